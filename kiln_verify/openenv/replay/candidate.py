"""Replay one recorded candidate against the live environment (contract §7.1 step 4-5).

Capacity-aware fresh session whose admission probe is the ``reset`` with the group's
exact recorded payload; the reset observation is compared with the recorded one; every
recorded action is sent as a ``step`` and its result compared with the record
(observation vs observation with the reward's tag, protocol error vs the identical error
object; any other pairing is drift at ``kind``); then, if recorded, ``state`` is
compared with ``final_state`` under the volatile-identity rule
(:func:`kiln_verify.openenv.volatile.compare_states`; ``strict_state`` turns it off).

A difference does not stop the candidate: every recorded exchange is still sent and
compared, so the outcome counts every drifted exchange, keeps its first drift (for the
error and its hint) and the first ``MAX_REPLAY_DRIFTS_PER_CANDIDATE`` drifts in detail
(for the replay report), counting the rest. When the live session ends early (a terminal
protocol error the record does not have, or a reset that is refused), the exchanges that
could not be sent count as drifted too. The session is always closed. Client failures
other than OpenEnv error replies (transport, timeout, poisoning, reflection, capacity
exhaustion) propagate unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kiln_verify.errors import RecoverableProtocolError, ReplayDrift, TerminalProtocolError, snippet
from kiln_verify.limits import MAX_REPLAY_DRIFTS_PER_CANDIDATE
from kiln_verify.openenv.protocol.client import OpenEnvClient
from kiln_verify.openenv.records.observation import ObservationRecord, ProtocolErrorRecord
from kiln_verify.openenv.records.replay import ReplayCandidate, ReplayGroup
from kiln_verify.openenv.replay.compare import (
    Difference,
    observation_difference,
    render,
    result_difference,
)
from kiln_verify.openenv.volatile import compare_states, ignored_identity

__all__ = [
    "CandidateOutcome",
    "Drift",
    "ReplayTarget",
    "difference_fields",
    "drift_error",
    "replay_candidate",
]


@dataclass(frozen=True, slots=True)
class ReplayTarget:
    """One captured environment as the replay reaches it."""

    index: int
    name: str
    client: OpenEnvClient


@dataclass(frozen=True, slots=True)
class Drift:
    """One drifted exchange of a candidate: where, and the first differing path."""

    stage: str
    difference: Difference
    step_index: int | None = None


@dataclass(slots=True)
class CandidateOutcome:
    """What replaying one candidate cost, covered and found.

    ``first`` is the candidate's first drift (``None``: it replayed exactly); ``drifts``
    its first ``MAX_REPLAY_DRIFTS_PER_CANDIDATE`` drifts in replay order (reset, steps,
    final state) and ``omitted_drifts`` how many more it had (the tally may move kept ones
    there too, to stay within ``MAX_REPLAY_DRIFTS_KEPT``);
    ``drifted_steps`` counts step exchanges that differed or could not be sent;
    ``volatile`` the state paths compared by presence and type only; ``live_reset`` the
    live reset observation (``None`` when the reset was refused), which the engine uses
    to tell unseeded randomness from changed task data; ``ignored`` the identity field the
    reset payload named that the live final state did not keep (``episode_id``), which
    makes a drift of that field ``episode_id_ignored`` rather than ``replay_drift``.
    """

    candidate_index: int
    exchanges: int
    capacity_retries: int
    prefix_only: bool
    first: Drift | None = None
    reset_drifted: bool = False
    drifted_steps: int = 0
    state_drifted: bool = False
    volatile: tuple[str, ...] = ()
    live_reset: ObservationRecord | None = None
    ignored: str | None = None
    observations_matched: bool = True
    drifts: list[Drift] = field(default_factory=list)
    omitted_drifts: int = 0

    @property
    def drifted(self) -> bool:
        return self.first is not None

    def note(self, drift: Drift) -> None:
        if self.first is None:
            self.first = drift
        if len(self.drifts) < MAX_REPLAY_DRIFTS_PER_CANDIDATE:
            self.drifts.append(drift)
        else:
            self.omitted_drifts += 1


def drift_error(
    target: ReplayTarget,
    stage: str,
    difference: Difference,
    *,
    group_index: int | None = None,
    candidate_index: int | None = None,
    step_index: int | None = None,
    when: str | None = None,
    hint: str | None = None,
    totals: dict[str, int] | None = None,
    drifted: list[dict[str, Any]] | None = None,
    error: type[ReplayDrift] = ReplayDrift,
    cause: str = "",
) -> ReplayDrift:
    """A :class:`ReplayDrift` (or ``error``, a subclass) locating ``difference``; absent
    coordinates are omitted, and ``cause`` heads the rule."""
    return error(
        cause + drift_rule(
            target, stage, difference, group_index=group_index,
            candidate_index=candidate_index, step_index=step_index, when=when,
        ),
        drift=drift_location(
            target, stage, difference, group_index=group_index,
            candidate_index=candidate_index, step_index=step_index, when=when,
        ),
        hint=hint,
        totals=totals,
        drifted=drifted,
    )  # fmt: skip


def drift_location(
    target: ReplayTarget,
    stage: str,
    difference: Difference,
    *,
    group_index: int | None = None,
    candidate_index: int | None = None,
    step_index: int | None = None,
    when: str | None = None,
) -> dict[str, Any]:
    """The ``drift`` object of a :class:`ReplayDrift` (absent coordinates omitted)."""
    drift: dict[str, Any] = {
        "stage": stage,
        "environment_index": target.index,
        "environment_name": snippet(target.name),
    }
    for key, value in (
        ("group_index", group_index),
        ("candidate_index", candidate_index),
        ("step_index", step_index),
        ("when", when),
    ):
        if value is not None:
            drift[key] = value
    drift.update(difference_fields(difference))
    return drift


def difference_fields(difference: Difference) -> dict[str, Any]:
    """``field``, ``expected``, ``actual``, then the two types when they differ and the
    ``offset`` of two strings: the part of a drift's JSON that says *what* differs."""
    fields: dict[str, Any] = {
        "field": difference.path,
        "expected": difference.expected,
        "actual": difference.actual,
    }
    if difference.expected_type and difference.expected_type != difference.actual_type:
        fields.update(expected_type=difference.expected_type, actual_type=difference.actual_type)
    if difference.offset is not None:
        fields["offset"] = difference.offset
    return fields


def drift_rule(
    target: ReplayTarget,
    stage: str,
    difference: Difference,
    *,
    group_index: int | None = None,
    candidate_index: int | None = None,
    step_index: int | None = None,
    when: str | None = None,
) -> str:
    """``replay drift at environment 0 ('X') group 1 candidate 0 step 2 (step): ...``."""
    where = [f"environment {target.index} ({snippet(target.name)})"]
    for word, value in (("group", group_index), ("candidate", candidate_index),
                        ("step", step_index)):  # fmt: skip
        if value is not None:
            where.append(f"{word} {value}")
    phase = stage if when is None else f"{stage}, {when}"
    at = "" if difference.offset is None else f" at character {difference.offset}"
    return (
        f"replay drift at {' '.join(where)} ({phase}): {difference.path} differs{at}: "
        f"recorded {difference.expected}, live {difference.actual}"
    )


def _error_record(exc: RecoverableProtocolError | TerminalProtocolError) -> ProtocolErrorRecord:
    if exc.error is None:
        raise exc
    return ProtocolErrorRecord.from_wire(exc.error)


def _unreplayed(candidate: ReplayCandidate, outcome: CandidateOutcome, start: int) -> None:
    """The recorded exchanges from ``start`` on (and the final state) could not be sent."""
    for exchange in candidate.exchanges[start:]:
        outcome.drifted_steps += 1
        outcome.note(
            Drift(
                "step",
                Difference("kind", render(exchange.result.kind), render("not replayed")),
                exchange.step_index,
            )
        )
    if candidate.has_final_state:
        outcome.state_drifted = True
        outcome.note(Drift("state", Difference("final_state", render("a state"),
                                               render("not replayed"))))  # fmt: skip


async def replay_candidate(
    target: ReplayTarget,
    group: ReplayGroup,
    candidate: ReplayCandidate,
    *,
    capacity_wait_seconds: float,
    strict_state: bool = False,
) -> CandidateOutcome:
    """Replay ``candidate`` of ``group`` to its end; the outcome holds every drift."""
    outcome = CandidateOutcome(
        candidate_index=candidate.candidate_index,
        exchanges=len(candidate.exchanges),
        capacity_retries=0,
        prefix_only=candidate.prefix_only,
    )
    try:
        acquisition = await target.client.open_session_with_capacity(
            capacity_wait_seconds, reset_data=group.reset_payload
        )
    except (RecoverableProtocolError, TerminalProtocolError) as exc:
        record = _error_record(exc)
        outcome.reset_drifted = True
        outcome.observations_matched = False
        outcome.note(Drift("reset", Difference(
            "reset_observation", render("an observation"), render(record.to_json()),
            "observation", "protocol_error",
        )))  # fmt: skip
        _unreplayed(candidate, outcome, 0)
        return outcome
    outcome.capacity_retries = acquisition.retries
    session = acquisition.session
    try:
        assert acquisition.observation is not None
        live_reset = ObservationRecord.from_wire(acquisition.observation)
        outcome.live_reset = live_reset
        found = observation_difference(group.reset_observation, live_reset, "reset_observation")
        if found is not None:
            outcome.reset_drifted = True
            outcome.observations_matched = False
            outcome.note(Drift("reset", found))
        for position, exchange in enumerate(candidate.exchanges):
            if not session.usable:  # a live terminal error the record does not have
                _unreplayed(candidate, outcome, position)
                return outcome
            live: ObservationRecord | ProtocolErrorRecord
            try:
                live = ObservationRecord.from_wire(await session.step(exchange.action))
            except (RecoverableProtocolError, TerminalProtocolError) as exc:
                live = _error_record(exc)
            found = result_difference(exchange.result, live)
            if found is not None:
                outcome.drifted_steps += 1
                outcome.observations_matched = False
                outcome.note(Drift("step", found, exchange.step_index))
        if candidate.has_final_state:
            if not session.usable:
                _unreplayed(candidate, outcome, len(candidate.exchanges))
                return outcome
            live_state = await session.state()
            outcome.ignored = ignored_identity(group.reset_payload, live_state)
            comparison = compare_states(
                candidate.final_state,
                live_state,
                reset_payload=group.reset_payload,
                strict=strict_state,
                path="final_state",
            )
            outcome.volatile = tuple(f"final_state.{name}" for name in comparison.volatile)
            if comparison.difference is not None:
                outcome.state_drifted = True
                outcome.note(Drift("state", comparison.difference))
    finally:
        await session.close()
    return outcome
