"""One session per TRL environment instance, kept across its episodes (kiln_verify.trl.episode).

Against live oracle servers: an instance resets its next episode on the session it already
holds (no new upgrade, no capacity wait), so a server admitting exactly the batch serves
any number of batches; a session the server closed while idle (``idle-close``, as a proxy
with an idle timeout does) is replaced by a fresh capacity-aware one; a session that failed
is closed and the instance's next episode opens another; a session that received a frame
nobody asked for while idle fails the next episode (fail closed); ``factory.close()`` frees
every slot.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from kiln_verify.errors import (
    EnvironmentTransport,
    KilnError,
    ProtocolViolation,
    TrlEpisodeFailed,
)
from kiln_verify.openenv.collect.controls import CollectionOptions
from kiln_verify.trl.episode import ENDED_TEXT, Episode
from kiln_verify.trl.factory import OpenEnvToolFactory
from oracle.envs.counter import CounterEnvironment
from pytest_kiln.fixtures import OracleFactory

ROW: dict[str, Any] = {"prompt": [{"role": "user", "content": ""}]}


def _factory(url: str) -> OpenEnvToolFactory:
    options = CollectionOptions(group_size=2, thinking=False, max_steps=2, capacity_wait_seconds=1)
    return OpenEnvToolFactory(url, options=options)


def _session(instance: Any) -> Any:
    return instance._episode._session


def _play(*plays: tuple[Any, list[int]]) -> list[float]:
    """Each instance's tool calls, then every reward, as TRL asks for them: once the whole
    batch is generated (the first ``get_reward`` ends every rollout of the batch)."""
    for instance, amounts in plays:
        for amount in amounts:
            instance.step(amount=amount)
    return [instance.get_reward() for instance, _ in plays]


def test_an_instance_keeps_its_session_across_episodes(start: OracleFactory) -> None:
    server = start("counter", max_sessions=2)
    factory = _factory(server.base_url)
    try:
        first, second = factory(), factory()
        sessions = None
        for batch in range(4):
            texts = [first.reset(**ROW), second.reset(**ROW)]
            assert texts[0] == texts[1]  # one group: candidates share the reset
            held = (_session(first), _session(second))
            assert sessions is None or held == sessions
            sessions = held
            assert _play((first, [4]), (second, [2, 2])) == [4.0, 6.0]
            assert server.active_sessions == 2
            assert [e.slot.plan.seed for e in factory.batch] == [batch, batch]
    finally:
        factory.close()
    deadline = time.monotonic() + 5
    while server.active_sessions and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.active_sessions == 0


def test_a_session_the_server_closed_while_idle_is_replaced(start: OracleFactory) -> None:
    server = start("counter", max_sessions=1, faults=["idle-close=0.2"])
    factory = _factory(server.base_url)
    try:
        instance = factory()
        instance.reset(**ROW)
        before = _session(instance)
        assert _play((instance, [4])) == [4.0]
        factory.run.begin_batch()  # what TRL's next batch does before its first reset
        time.sleep(0.6)  # the server closes the idle session and frees its one slot
        instance.reset(**ROW)
        assert _session(instance) is not before
        assert _session(instance).usable
        assert _play((instance, [4])) == [4.0]
    finally:
        factory.close()


def test_a_failed_session_is_closed_and_the_next_episode_opens_another(
    start: OracleFactory,
) -> None:
    server = start("counter", max_sessions=1, faults=["drop-after-steps=1"])
    factory = _factory(server.base_url)
    try:
        instance: Any = factory()
        instance.reset(**ROW)
        failed = _session(instance)
        instance.step(amount=1)
        with pytest.raises(EnvironmentTransport):
            instance.step(amount=1)  # the server drops the connection: the episode fails
        with pytest.raises(TrlEpisodeFailed):
            instance.get_reward()
        instance.reset(**ROW)  # a new batch; the one slot is free again
        assert _session(instance) is not failed
        assert _play((instance, [4])) == [4.0]
    finally:
        factory.close()


def test_a_kept_session_that_received_an_unsolicited_frame_fails_the_episode(
    start: OracleFactory,
) -> None:
    server = start("counter", faults=["unsolicited-frame=0.05"])
    factory = _factory(server.base_url)
    run = factory.run
    try:
        acquired = run.loop.run(run.client.open_session_with_capacity(1, reset_data={}))
        time.sleep(0.3)  # the frame nobody asked for arrives while the session is idle
        episode = Episode(run, run.next_slot(ROW))
        with pytest.raises(ProtocolViolation) as raised:
            episode.start(acquired.session)
        assert raised.value.code == "protocol_violation"
        assert run.failure is raised.value
        assert episode.failure is raised.value
        assert acquired.session.poisoned
    finally:
        factory.close()


def _batch_of_two(factory: OpenEnvToolFactory) -> tuple[Any, Any]:
    """Two instances of one group, both reset (TRL's batch of 2)."""
    first: Any = factory()
    second: Any = factory()
    first.reset(**ROW)
    second.reset(**ROW)
    return first, second


class BrokenState(CounterEnvironment):
    """The counter, except that its state cannot be read (an execution error)."""

    def state(self) -> Any:
        raise RuntimeError("the state store is unavailable")


def test_the_first_get_reward_ends_the_batch_and_reads_its_final_states_together(
    start: OracleFactory,
) -> None:
    """An episode the environment ended in a tool call sends its final state read then,
    without waiting; the first ``get_reward`` ends every open rollout of the batch (a
    reply without an action) and sends theirs; each reward waits only for its own."""
    server = start("counter", max_sessions=2)
    factory = _factory(server.base_url)
    try:
        first, second = _batch_of_two(factory)
        first.step(amount=4)  # the total reaches 4: done
        second.step(amount=1)  # still open
        assert first._episode._state is not None
        assert not first._episode.open
        assert second._episode._state is None
        assert second._episode.open
        assert first.get_reward() == 4.0
        assert second._episode._state is not None
        assert not second._episode.open
        assert second.step(amount=3) == ENDED_TEXT  # ended with the batch: nothing is sent
        assert second.get_reward() == 0.0  # 1, then -1 for the reply without an action
        outcomes = [instance._episode.outcome for instance in (first, second)]
        assert [o.termination for o in outcomes] == ["done", "invalid_model_action"]
        assert [e.steps for e in outcomes] == [1, 1]
        assert all(instance._episode._state is None for instance in (first, second))
    finally:
        factory.close()


def test_a_final_state_that_cannot_be_read_fails_the_episode_at_get_reward(
    start: OracleFactory,
) -> None:
    server = start("counter", max_sessions=2, environment=BrokenState)
    factory = _factory(server.base_url)
    try:
        first, second = _batch_of_two(factory)
        assert '"done":true' in first.step(amount=4)  # the tool call itself succeeds
        with pytest.raises(KilnError) as failed:
            first.get_reward()
        assert failed.value.code == "environment_error_recoverable"
        with pytest.raises(TrlEpisodeFailed, match="environment_error_recoverable"):
            second.get_reward()
        assert first._episode.failure is failed.value
    finally:
        factory.close()
