"""The OpenEnv reference client (`openenv` 0.10.0 `GenericEnvClient`) drives our oracle.

Nobody here wrote that client, so an episode it completes against our server is evidence
that the oracle speaks OpenEnv's wire protocol as OpenEnv itself reads it. Each test also
runs against the openenv peer hosting the same game, so the expectations below are
checked to be exactly what an openenv server gives that client, not only what we believe.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

pytest.importorskip("openenv")

from openenv.core.generic_client import GenericEnvClient

from oracle.envs.bandit import PULLS, arm_ranks, pay_permille, pays

from .conftest import Pair

pytestmark = pytest.mark.interop

SIDES = ("ours", "openenv")


def _url(pair: Pair, side: str) -> str:
    return pair.ours if side == "ours" else pair.openenv


def _sync_client(base_url: str) -> Any:
    return GenericEnvClient(base_url=base_url, message_timeout_s=10.0).sync()


@pytest.mark.parametrize("side", SIDES)
def test_counter_episode(pairs: dict[str, Pair], side: str) -> None:
    with _sync_client(_url(pairs["counter"], side)) as env:
        result = env.reset(seed=17, episode_id="kiln-interop")
        assert result.observation == {"metadata": {}, "total": 0, "target": 4, "last_note": None}
        assert result.reward is None
        assert result.done is False
        assert result.metadata is None

        result = env.step({"amount": 2, "note": "first"})
        assert result.observation["total"] == 2
        assert result.observation["last_note"] == "first"
        assert result.reward == 2.0
        assert type(result.reward) is float
        assert result.done is False

        result = env.step({"amount": 2, "note": "second"})
        assert result.observation == {
            "metadata": {},
            "total": 4,
            "target": 4,
            "last_note": "second",
        }
        assert result.reward == 4.0
        assert type(result.reward) is float
        assert result.done is True

        assert env.state() == {"episode_id": "kiln-interop", "step_count": 2, "total": 4}


def _expected_bandit_rewards(seed: int, arms: list[int]) -> list[int]:
    """The rewards the oracle's rules give these pulls at the default difficulty (2)."""
    permille = [pay_permille(rank, 2) for rank in arm_ranks(seed)]
    return [1 if pays(seed, pull, arm, permille[arm]) else 0 for pull, arm in enumerate(arms)]


@pytest.mark.parametrize("side", SIDES)
def test_bandit_episode_with_a_recoverable_execution_error(
    pairs: dict[str, Pair], side: str
) -> None:
    seed = 41
    arms = [pull % 10 for pull in range(PULLS)]
    expected = _expected_bandit_rewards(seed, arms)
    with _sync_client(_url(pairs["bandit"], side)) as env:
        result = env.reset(seed=seed)
        assert result.observation["pulls"] == 0
        assert result.observation["last_arm"] is None
        assert result.reward is None
        assert result.done is False

        with pytest.raises(RuntimeError, match=r"EXECUTION_ERROR") as raised:
            env.step({"arm": 99})
        assert "arm 99 is out of range" in str(raised.value)

        rewards: list[Any] = []
        for pull, arm in enumerate(arms):
            result = env.step({"arm": arm})  # the same socket: the error was recoverable
            assert result.observation["pulls"] == pull + 1
            assert result.observation["pulls_left"] == PULLS - pull - 1
            assert result.observation["last_arm"] == arm
            assert type(result.reward) is int  # integer 0/1, neither bool nor float
            assert result.observation["last_reward"] == result.reward
            assert result.done is (pull + 1 == PULLS)
            rewards.append(result.reward)
        assert rewards == expected
        assert result.observation["total_reward"] == sum(expected)

        # After done the observation is frozen and the reward is null.
        after = env.step({"arm": 0})
        assert after.observation == result.observation
        assert after.reward is None
        assert after.done is True

        state = env.state()
        assert state["episode_id"] == f"episode-{seed}"
        assert state["step_count"] == PULLS + 1  # the failed pull is not counted, the frozen one is
        assert state["pulls"] == PULLS
        assert state["total_reward"] == sum(expected)


@pytest.mark.parametrize("side", SIDES)
def test_async_client_and_a_second_episode_on_one_socket(pairs: dict[str, Pair], side: str) -> None:
    async def run() -> list[Any]:
        async with GenericEnvClient(base_url=_url(pairs["counter"], side)) as env:
            first = await env.reset(seed=1)
            stepped = await env.step({"amount": 3})
            again = await env.reset(seed=2, episode_id="second")
            state = await env.state()
            return [first.observation, stepped.reward, again.observation, state]

    first, reward, again, state = asyncio.run(run())
    assert first["total"] == 0
    assert reward == 3.0
    assert again["total"] == 0
    assert state == {"episode_id": "second", "step_count": 0, "total": 0}


@pytest.mark.parametrize("side", SIDES)
def test_validation_error_reaches_the_client_and_the_session_continues(
    pairs: dict[str, Pair], side: str
) -> None:
    with _sync_client(_url(pairs["counter"], side)) as env:
        env.reset(seed=3)
        with pytest.raises(RuntimeError, match=r"Invalid message \(code: VALIDATION_ERROR\)"):
            env.step({"amount": "two"})
        with pytest.raises(RuntimeError, match=r"\(code: VALIDATION_ERROR\)"):
            env.step({"amount": 1, "bogus": True})
        assert env.step({"amount": 1}).observation["total"] == 1


@pytest.mark.parametrize("side", SIDES)
def test_capacity_reached_is_reported_to_the_client(pairs: dict[str, Pair], side: str) -> None:
    url = _url(pairs["capacity"], side)
    with _sync_client(url) as holder:
        holder.reset(seed=1)
        refused = _sync_client(url)
        try:
            with pytest.raises(RuntimeError, match=r"\(code: CAPACITY_REACHED\)") as raised:
                refused.reset(seed=2)
            assert "Server at capacity: 1/1 sessions active" in str(raised.value)
        finally:
            refused.close()
    # Once the holder has closed, a new session is admitted (the slot frees asynchronously).
    _reset_when_admitted(url)


def _reset_when_admitted(url: str, attempts: int = 50) -> None:
    for attempt in range(attempts):
        client = _sync_client(url)
        try:
            assert client.reset(seed=3).observation["pulls"] == 0
            return
        except RuntimeError as exc:
            if "CAPACITY_REACHED" not in str(exc) or attempt == attempts - 1:
                raise
        finally:
            client.close()
        time.sleep(0.05)
