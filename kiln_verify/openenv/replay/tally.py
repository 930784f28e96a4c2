"""Everything a replay found, and the one ``replay_drift`` error that reports it.

(That error is ``episode_id_ignored``, a :class:`~kiln_verify.errors.ReplayDrift` with the
same payload, when the first drift is a payload-named ``episode_id`` the live server did
not keep: rollout refuses the same cause under the same code.)

Replay does not stop at the first drifted candidate: every candidate is independent (a
fresh session), so finishing the replay costs no more than a clean one and tells a user
whether one seed drifted or the whole environment did. The error then carries:

- ``drift``: the first drift in replay order (groups in order, candidates by index,
  exchanges in order, then the rediscovery after the last group), in detail;
- ``totals``: candidates and exchanges replayed, and how many of each drifted (a step
  exchange that differed, or could not be sent because the live session had ended),
  plus drifted resets, final states and identities (after the replay);
- ``drifted``: the first ``MAX_REPLAY_DRIFT_LOCATIONS`` drifted candidates one by one;
- the hint of :mod:`~kiln_verify.openenv.replay.diagnose` for the first drift;
- ``detail``, for the replay report: the replay's context and every drifted exchange kept
  (:mod:`~kiln_verify.openenv.replay.detail`), trimmed to one budget as each group is
  added, so what the tally holds stays bounded.

Identity drift *before* the replay is raised at once by the engine (nothing is replayed
against a different build), so it has no totals (:meth:`Tally.before_replay`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kiln_verify.errors import EpisodeIdIgnored, ReplayDrift, snippet
from kiln_verify.limits import MAX_REPLAY_DRIFT_LOCATIONS
from kiln_verify.openenv.records.replay import ReplayGroup
from kiln_verify.openenv.replay.candidate import (
    CandidateOutcome,
    Drift,
    ReplayTarget,
    drift_error,
    drift_location,
)
from kiln_verify.openenv.replay.detail import (
    DriftBudget,
    ReplayContext,
    candidate_entry,
    detail_document,
    identity_location,
)
from kiln_verify.openenv.replay.diagnose import candidate_hint, identity_hint
from kiln_verify.openenv.replay.rediscovery import IdentityDrift

__all__ = ["Tally", "identity_drift_error"]


def identity_drift_error(
    found: IdentityDrift,
    totals: dict[str, int] | None = None,
    drifted: list[dict[str, Any]] | None = None,
    detail: dict[str, Any] | None = None,
) -> ReplayDrift:
    """The ``replay_drift`` error of an identity that changed."""
    hint = identity_hint(
        found.changed,
        when=found.when,
        remap=found.remap,
        metadata_name_changed=found.metadata_name_changed,
    )
    error = drift_error(
        found.target, "identity", found.difference, when=found.when, hint=hint,
        totals=totals, drifted=drifted,
    )  # fmt: skip
    error.detail = detail
    return error


@dataclass(slots=True)
class _GroupResult:
    target: ReplayTarget
    group: ReplayGroup
    outcomes: list[CandidateOutcome]


@dataclass(slots=True)
class Tally:
    """Accumulates the outcomes of a replay, then reports it or raises its drift."""

    context: ReplayContext
    strict_state: bool = False
    groups: list[_GroupResult] = field(default_factory=list)
    identities: list[IdentityDrift] = field(default_factory=list)
    budget: DriftBudget = field(default_factory=DriftBudget)

    def add_group(
        self, target: ReplayTarget, group: ReplayGroup, outcomes: list[CandidateOutcome]
    ) -> None:
        """Add one finished group (candidates in index order), its kept drifts trimmed."""
        self.budget.spend(outcomes)
        self.groups.append(_GroupResult(target, group, outcomes))

    def before_replay(self, found: IdentityDrift) -> ReplayDrift:
        """The error of an identity that differed before anything was replayed."""
        detail = detail_document(self.context, identities=[identity_location(found)])
        return identity_drift_error(found, detail=detail)

    def detail(self) -> dict[str, Any]:
        """The error's ``detail``: context, kept drifts by candidate, identity drifts."""
        candidates = [
            candidate_entry(result.target, result.group.group_index, outcome)
            for result in self.groups
            for outcome in result.outcomes
            if outcome.drifts
        ]
        return detail_document(
            self.context,
            volatile=self.volatile(),
            candidates=candidates,
            omitted_candidates=self.budget.omitted_candidates,
            identities=[identity_location(found) for found in self.identities],
        )

    def outcomes(self) -> list[CandidateOutcome]:
        return [outcome for result in self.groups for outcome in result.outcomes]

    def volatile(self) -> list[str]:
        """The state paths compared by presence and type only, sorted, each once."""
        return sorted({path for outcome in self.outcomes() for path in outcome.volatile})

    def totals(self) -> dict[str, int]:
        outcomes = self.outcomes()
        return {
            "candidates": len(outcomes),
            "drifted_candidates": sum(1 for outcome in outcomes if outcome.drifted),
            "exchanges": sum(outcome.exchanges for outcome in outcomes),
            "drifted_exchanges": sum(outcome.drifted_steps for outcome in outcomes),
            "drifted_resets": sum(1 for outcome in outcomes if outcome.reset_drifted),
            "drifted_final_states": sum(1 for outcome in outcomes if outcome.state_drifted),
            "drifted_identities": len(self.identities),
        }

    def _locations(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for result in self.groups:
            for outcome in result.outcomes:
                if outcome.first is None:
                    continue
                if len(found) == MAX_REPLAY_DRIFT_LOCATIONS:
                    return found
                first = outcome.first
                location = drift_location(
                    result.target, first.stage, first.difference,
                    group_index=result.group.group_index,
                    candidate_index=outcome.candidate_index, step_index=first.step_index,
                )  # fmt: skip
                location["drifted_exchanges"] = outcome.drifted_steps
                found.append(location)
        for identity in self.identities:
            if len(found) == MAX_REPLAY_DRIFT_LOCATIONS:
                break
            location = drift_location(
                identity.target, "identity", identity.difference, when=identity.when
            )
            found.append(location)
        return found

    def check(self) -> None:
        """Raise the replay's ``replay_drift`` (first drift, totals, locations, detail)
        if anything drifted."""
        drifted = [
            (result, outcome)
            for result in self.groups
            for outcome in result.outcomes
            if outcome.first is not None
        ]
        if not drifted and not self.identities:
            return
        totals, locations, detail = self.totals(), self._locations(), self.detail()
        if not drifted:
            error = identity_drift_error(self.identities[0], totals, locations, detail)
            error.rule += _summary(totals)
            raise error
        result, outcome = drifted[0]
        first = outcome.first
        assert first is not None
        hint = candidate_hint(
            first,
            outcome=outcome,
            group_outcomes=result.outcomes,
            reset_payload=result.group.reset_payload,
            strict_state=self.strict_state,
        )
        error = drift_error(
            result.target, first.stage, first.difference,
            group_index=result.group.group_index,
            candidate_index=outcome.candidate_index, step_index=first.step_index,
            hint=hint, totals=totals, drifted=locations,
            **_ignored_cause(first, outcome, result.group.reset_payload),
        )  # fmt: skip
        error.rule += _summary(totals)
        error.detail = detail
        raise error


def _ignored_cause(
    first: Drift, outcome: CandidateOutcome, reset_payload: Mapping[str, Any]
) -> dict[str, Any]:
    """``episode_id_ignored`` for a first drift that is a payload-named identity field the
    live final state did not keep (the same cause rollout refuses under that code)."""
    name = outcome.ignored
    if name is None or (first.stage, first.difference.path) != ("state", f"final_state.{name}"):
        return {}
    return {
        "error": EpisodeIdIgnored,
        "cause": (
            f"the reset payload named {name} {snippet(reset_payload[name])} but the live state "
            f"does not keep it (conformance case {EpisodeIdIgnored.conformance_case}): "
        ),
    }


def _summary(totals: dict[str, int]) -> str:
    return (
        f"; in all {totals['drifted_candidates']} of {totals['candidates']} candidates and "
        f"{totals['drifted_exchanges']} of {totals['exchanges']} step exchanges drifted"
    )
