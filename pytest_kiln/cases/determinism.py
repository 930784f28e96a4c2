"""Determinism checks: what the same seed reproduces, on one session and on fresh ones.

A reset observation can agree while the game behind it does not (a hidden deck, a secret
word drawn from an unseeded generator): the state read right after reset is where that
shows. States are compared under the volatile-identity rule of
:mod:`kiln_verify.openenv.volatile`, which live replay and the collector's group check
use as well: ``episode_id`` is per-session identity unless the reset payload set it, so
it is compared by presence and JSON type only; everything else, type-strict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_kiln.cases.context import CaseContext, guard
from pytest_kiln.cases.model import DETERMINISM_SEED, CheckFailed

if TYPE_CHECKING:
    from kiln_verify.openenv.protocol.wire import Observation


def _wire(observation: Observation) -> dict[str, Any]:
    """The observation reply as it travelled, reward tag included (for a typed comparison)."""
    return {
        "observation": observation.observation,
        "reward": observation.reward.to_json(),
        "done": observation.done,
    }


async def check_determinism(ctx: CaseContext) -> str | None:
    """Two resets with the same seed on one session give the same observation."""
    payload = {"seed": DETERMINISM_SEED}
    async with ctx.session(payload) as (session, first):
        second = await guard(session.reset(payload), "second reset")
    if first.observation != second.observation or first.reward != second.reward:
        keys = sorted(
            key
            for key in set(first.observation) | set(second.observation)
            if first.observation.get(key) != second.observation.get(key)
        )
        raise CheckFailed(f"two resets with seed {DETERMINISM_SEED} differ in {keys[:8]}")
    return None


async def _fresh_reset(ctx: CaseContext, payload: dict[str, Any]) -> tuple[Observation, Any]:
    async with ctx.session(payload) as (session, observation):
        state = await guard(session.state(), "state after reset")
    return observation, state


async def check_fresh_session_determinism(ctx: CaseContext) -> str | None:
    """Fresh sessions reset with the same seed agree on the observation and on the state."""
    from kiln_verify.openenv.replay.compare import first_difference
    from kiln_verify.openenv.volatile import compare_states

    payload = {"seed": DETERMINISM_SEED}
    first_obs, first_state = await _fresh_reset(ctx, payload)
    second_obs, second_state = await _fresh_reset(ctx, payload)
    difference = first_difference(_wire(first_obs), _wire(second_obs), "reset")
    if difference is not None:
        raise CheckFailed(
            f"two fresh sessions reset with seed {DETERMINISM_SEED} answer different "
            f"observations at {difference.path} ({difference.expected} vs {difference.actual})"
        )
    comparison = compare_states(first_state, second_state, reset_payload=payload)
    if comparison.difference is not None:
        found = comparison.difference
        raise CheckFailed(
            f"two fresh sessions reset with seed {DETERMINISM_SEED} agree on the observation "
            f"but their states differ at {found.path} ({found.expected} vs {found.actual}): "
            "hidden state the seed does not reproduce"
        )
    if comparison.volatile:
        return f"volatile (compared by presence and type): {', '.join(comparison.volatile)}"
    return None
