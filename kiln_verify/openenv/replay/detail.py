"""The drift detail of a replay: every drifted exchange kept, grouped by candidate.

The ``replay_drift`` error's ``drift``, ``totals`` and ``drifted`` say where a replay first
drifted and how much; a report that shows *every* drifted exchange needs more, and the
error must stay bounded however large the replay. So:

- a candidate keeps its first ``MAX_REPLAY_DRIFTS_PER_CANDIDATE`` drifts
  (:meth:`~kiln_verify.openenv.replay.candidate.CandidateOutcome.note`) and counts the rest;
- the tally spends one budget of ``MAX_REPLAY_DRIFTS_KEPT`` kept drifts over all candidates
  in replay order as each group finishes (:class:`DriftBudget`), so at most one group's
  candidates ever hold more than the budget; a drifted candidate that finds it spent is
  counted, not kept;
- paths are cut at ``MAX_REPLAY_DRIFT_PATH_CHARS`` and values are the bounded renderings
  of :mod:`~kiln_verify.openenv.replay.compare` (the window around the first differing
  character of two strings), exactly as the error's ``drift`` shows them.

The detail is a JSON object (docs/contract.md, "Drift"): the replay's context
(``replay_sha256``, ``environments``, ``groups``, and when not empty ``volatile`` and
``environment_remaps``, as a clean replay's ``kiln-verify.replay-run-notes.v1`` has them;
the error is ours, not a Kiln record, so they sit in it directly), ``candidates`` (each drifted
candidate kept: where it is, its counts, ``drifts`` and ``omitted_drifts``),
``omitted_candidates`` and ``identities`` (every identity drift, before or after the
replay). Nothing in it is recomputed by a reader: the report renders it as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kiln_verify.errors import snippet
from kiln_verify.limits import MAX_REPLAY_DRIFTS_KEPT
from kiln_verify.openenv.records.reports import EnvironmentRemap
from kiln_verify.openenv.replay.candidate import (
    CandidateOutcome,
    Drift,
    ReplayTarget,
    difference_fields,
    drift_location,
)
from kiln_verify.openenv.replay.rediscovery import IdentityDrift

__all__ = [
    "DriftBudget",
    "ReplayContext",
    "candidate_entry",
    "detail_document",
    "drift_entry",
    "identity_location",
]


@dataclass(frozen=True, slots=True)
class ReplayContext:
    """What the success report would say about the replay, known before it starts."""

    replay_sha256: str
    environments: int
    groups: int
    remaps: tuple[EnvironmentRemap, ...] = ()


@dataclass(slots=True)
class DriftBudget:
    """``MAX_REPLAY_DRIFTS_KEPT`` kept drifts, spent in replay order."""

    remaining: int = MAX_REPLAY_DRIFTS_KEPT
    omitted_candidates: int = 0

    def spend(self, outcomes: Sequence[CandidateOutcome]) -> None:
        """Trim one finished group's outcomes (in candidate order) to what is left; what
        is cut moves to the candidate's ``omitted_drifts``."""
        for outcome in outcomes:
            if not outcome.drifted:
                continue
            keep = min(len(outcome.drifts), self.remaining)
            if keep < len(outcome.drifts):
                outcome.omitted_drifts += len(outcome.drifts) - keep
                del outcome.drifts[keep:]
            self.remaining -= keep
            if not outcome.drifts:
                self.omitted_candidates += 1


def drift_entry(drift: Drift) -> dict[str, Any]:
    """One drifted exchange: ``stage``, ``step_index`` (steps), then what differs."""
    entry: dict[str, Any] = {"stage": drift.stage}
    if drift.step_index is not None:
        entry["step_index"] = drift.step_index
    entry.update(difference_fields(drift.difference))
    return entry


def candidate_entry(
    target: ReplayTarget, group_index: int, outcome: CandidateOutcome
) -> dict[str, Any]:
    """One drifted candidate: where it is, its counts and its kept drifts."""
    return {
        "environment_index": target.index,
        "environment_name": snippet(target.name),
        "group_index": group_index,
        "candidate_index": outcome.candidate_index,
        "exchanges": outcome.exchanges,
        "drifted_exchanges": outcome.drifted_steps,
        "reset_drifted": outcome.reset_drifted,
        "state_drifted": outcome.state_drifted,
        "drifts": [drift_entry(drift) for drift in outcome.drifts],
        "omitted_drifts": outcome.omitted_drifts,
    }


def identity_location(found: IdentityDrift) -> dict[str, Any]:
    """An identity drift as the error's ``drift`` object shows it."""
    return drift_location(found.target, "identity", found.difference, when=found.when)


def detail_document(
    context: ReplayContext,
    *,
    volatile: Sequence[str] = (),
    candidates: Sequence[dict[str, Any]] = (),
    omitted_candidates: int = 0,
    identities: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The error's ``detail`` object (key order fixed; empty optional lists omitted)."""
    detail: dict[str, Any] = {
        "replay_sha256": context.replay_sha256,
        "environments": context.environments,
        "groups": context.groups,
    }
    if volatile:
        detail["volatile"] = list(volatile)
    if context.remaps:
        detail["environment_remaps"] = [remap.to_json() for remap in context.remaps]
    detail["candidates"] = list(candidates)
    detail["omitted_candidates"] = omitted_candidates
    detail["identities"] = list(identities)
    return detail
