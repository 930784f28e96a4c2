"""Replay one recorded candidate against the live environment (contract §7.1 step 4-5).

Capacity-aware fresh session whose admission probe is the ``reset`` with the group's
exact recorded payload; the reset observation must equal the recorded one; every
recorded action is sent as a ``step`` and its result must equal the record (observation
vs observation with the reward's tag, protocol error vs the identical error object; any
other pairing is drift); then, if recorded, ``state`` must equal ``final_state``. The
session is always closed. Client failures other than OpenEnv error replies (transport,
timeout, poisoning, reflection, capacity exhaustion) propagate unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kiln_verify.errors import RecoverableProtocolError, ReplayDrift, TerminalProtocolError, snippet
from kiln_verify.openenv.client import OpenEnvClient
from kiln_verify.openenv.records.common import ObservationRecord, ProtocolErrorRecord
from kiln_verify.openenv.records.replay import ReplayCandidate, ReplayGroup
from kiln_verify.openenv.replay.compare import (
    Difference,
    first_difference,
    observation_difference,
    render,
    result_difference,
)

__all__ = ["CandidateOutcome", "ReplayTarget", "drift_error", "replay_candidate"]


@dataclass(frozen=True, slots=True)
class ReplayTarget:
    """One captured environment as the replay reaches it."""

    index: int
    name: str
    client: OpenEnvClient


@dataclass(frozen=True, slots=True)
class CandidateOutcome:
    """What replaying one candidate cost and covered."""

    candidate_index: int
    exchanges: int
    capacity_retries: int
    prefix_only: bool


def drift_error(
    target: ReplayTarget,
    stage: str,
    difference: Difference,
    *,
    group_index: int | None = None,
    candidate_index: int | None = None,
    step_index: int | None = None,
    when: str | None = None,
) -> ReplayDrift:
    """A :class:`ReplayDrift` locating ``difference``; absent coordinates are omitted."""
    drift: dict[str, Any] = {
        "stage": stage,
        "environment_index": target.index,
        "environment_name": snippet(target.name),
    }
    where = [f"environment {target.index} ({snippet(target.name)})"]
    for key, value in (
        ("group_index", group_index),
        ("candidate_index", candidate_index),
        ("step_index", step_index),
    ):
        if value is not None:
            drift[key] = value
            where.append(f"{key.removesuffix('_index')} {value}")
    if when is not None:
        drift["when"] = when
    drift.update(field=difference.path, expected=difference.expected, actual=difference.actual)
    phase = stage if when is None else f"{stage}, {when}"
    rule = (
        f"replay drift at {' '.join(where)} ({phase}): {difference.path} differs: "
        f"recorded {difference.expected}, live {difference.actual}"
    )
    return ReplayDrift(rule, drift=drift)


def _error_record(exc: RecoverableProtocolError | TerminalProtocolError) -> ProtocolErrorRecord:
    if exc.error is None:
        raise exc
    return ProtocolErrorRecord.from_wire(exc.error)


async def replay_candidate(
    target: ReplayTarget,
    group: ReplayGroup,
    candidate: ReplayCandidate,
    *,
    capacity_wait_seconds: float,
) -> CandidateOutcome:
    """Replay ``candidate`` of ``group``; raise :class:`ReplayDrift` on the first difference."""

    def drift(stage: str, difference: Difference, step_index: int | None = None) -> ReplayDrift:
        return drift_error(
            target,
            stage,
            difference,
            group_index=group.group_index,
            candidate_index=candidate.candidate_index,
            step_index=step_index,
        )

    try:
        acquisition = await target.client.open_session_with_capacity(
            capacity_wait_seconds, reset_data=group.reset_payload
        )
    except (RecoverableProtocolError, TerminalProtocolError) as exc:
        record = _error_record(exc)
        difference = Difference(
            "reset_observation", render("an observation"), render(record.to_json())
        )
        raise drift("reset", difference) from None
    session = acquisition.session
    try:
        assert acquisition.observation is not None
        live_reset = ObservationRecord.from_wire(acquisition.observation)
        difference_found = observation_difference(
            group.reset_observation, live_reset, "reset_observation"
        )
        if difference_found is not None:
            raise drift("reset", difference_found)
        for exchange in candidate.exchanges:
            live: ObservationRecord | ProtocolErrorRecord
            try:
                live = ObservationRecord.from_wire(await session.step(exchange.action))
            except (RecoverableProtocolError, TerminalProtocolError) as exc:
                live = _error_record(exc)
            difference_found = result_difference(exchange.result, live)
            if difference_found is not None:
                raise drift("step", difference_found, exchange.step_index)
        if candidate.has_final_state:
            state = await session.state()
            difference_found = first_difference(candidate.final_state, state, "final_state")
            if difference_found is not None:
                raise drift("state", difference_found)
    finally:
        await session.close()
    return CandidateOutcome(
        candidate_index=candidate.candidate_index,
        exchanges=len(candidate.exchanges),
        capacity_retries=acquisition.retries,
        prefix_only=candidate.prefix_only,
    )
