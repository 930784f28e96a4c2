"""A saved live-replay result, read strictly: what ``openenv replay --json`` printed.

Three shapes are accepted: the two a finished replay prints, and Kiln's bare report.

- ``{"report": ..., "kiln_verify": ...}`` of a replay that found no drift: Kiln's exact
  ``kiln.openenv-replay-run.v1`` report and our ``kiln-verify.replay-run-notes.v1`` beside
  it (:class:`~kiln_verify.openenv.records.reports.ReplayRunResult`);
- a bare ``kiln.openenv-replay-run.v1`` report (what Kiln's own replay writes, or the
  ``report`` taken out of ours): the page then says the notes were not recorded;
- ``{"error": {...}}`` whose error is ``replay_drift`` (or ``episode_id_ignored``, a replay
  drift whose cause is a requested episode id the live server did not keep) *with* its
  ``detail`` (every drifted
  exchange kept, by candidate; :mod:`kiln_verify.openenv.replay.detail`).

Anything else is ``record_invalid``: another error (a transport failure, a usage error: the
replay did not finish, so there is no drift to show), a drift written without its detail (by
an older kiln-verify), a report carrying ``volatile`` or ``environment_remaps`` inside
Kiln's closed record (what kiln-verify wrote before the notes moved beside it), unknown or
missing keys at any depth, values out of range, and a document that contradicts itself. The
file is not trusted, so its redundancy is checked as the conformance reader checks its own:
kept and omitted candidates add up to ``totals.drifted_candidates``, each candidate's kept
and omitted drifts to its counts, the first kept drift is the error's ``drift``, candidates
come in replay order, and the bounds a replay keeps to hold. Names, paths and renderings are
peer text, rendered escaped.
"""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import Field, StrictBool, StrictStr

from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import RecordInvalid, snippet
from kiln_verify.limits import (
    MAX_ENVIRONMENTS,
    MAX_REPLAY_DRIFT_LOCATIONS,
    MAX_REPLAY_DRIFTS_KEPT,
    MAX_REPLAY_DRIFTS_PER_CANDIDATE,
    REPORT_MAX_REPLAY_BYTES,
)
from kiln_verify.openenv.records.reports import EnvironmentRemap, ReplayRunReport, ReplayRunResult
from kiln_verify.openenv.verify.files import read_bounded
from kiln_verify.records import U64, Record, Sha256, validate_record

__all__ = [
    "DriftDetail",
    "DriftLocation",
    "DriftTotals",
    "DriftedCandidate",
    "ExchangeDrift",
    "ReplayDriftError",
    "ReplayResult",
    "read_replay_result",
]

_Positive = Annotated[U64, Field(ge=1)]
_Path = Annotated[StrictStr, Field(min_length=1)]
_OPTIONAL_DIFFERENCE: Final = frozenset({"expected_type", "actual_type", "offset"})


class DriftLocation(Record):
    """The error's ``drift``, an item of its ``drifted`` list, or an identity drift."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {"group_index", "candidate_index", "step_index", "when", "drifted_exchanges"}
        | _OPTIONAL_DIFFERENCE
    )

    stage: Literal["identity", "reset", "step", "state"]
    environment_index: U64
    environment_name: StrictStr
    group_index: U64 | None = None
    candidate_index: U64 | None = None
    step_index: U64 | None = None
    when: Literal["before replay", "after replay"] | None = None
    field: StrictStr
    expected: StrictStr
    actual: StrictStr
    expected_type: StrictStr | None = None
    actual_type: StrictStr | None = None
    offset: U64 | None = None
    drifted_exchanges: U64 | None = None


class ExchangeDrift(Record):
    """One drifted exchange a candidate kept: where in the episode, and what differs."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"step_index"} | _OPTIONAL_DIFFERENCE)

    stage: Literal["reset", "step", "state"]
    step_index: U64 | None = None
    field: StrictStr
    expected: StrictStr
    actual: StrictStr
    expected_type: StrictStr | None = None
    actual_type: StrictStr | None = None
    offset: U64 | None = None


class DriftedCandidate(Record):
    environment_index: U64
    environment_name: StrictStr
    group_index: U64
    candidate_index: U64
    exchanges: U64
    drifted_exchanges: U64
    reset_drifted: StrictBool
    state_drifted: StrictBool
    drifts: Annotated[
        list[ExchangeDrift], Field(min_length=1, max_length=MAX_REPLAY_DRIFTS_PER_CANDIDATE)
    ]
    omitted_drifts: U64


class DriftTotals(Record):
    candidates: U64
    drifted_candidates: U64
    exchanges: U64
    drifted_exchanges: U64
    drifted_resets: U64
    drifted_final_states: U64
    drifted_identities: U64


class DriftDetail(Record):
    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"volatile", "environment_remaps"})

    replay_sha256: Sha256
    environments: _Positive
    groups: _Positive
    volatile: Annotated[list[_Path], Field(min_length=1)] | None = None
    environment_remaps: Annotated[list[EnvironmentRemap], Field(min_length=1)] | None = None
    candidates: Annotated[list[DriftedCandidate], Field(max_length=MAX_REPLAY_DRIFTS_KEPT)]
    omitted_candidates: U64
    identities: Annotated[list[DriftLocation], Field(max_length=MAX_ENVIRONMENTS)]


class ReplayDriftError(Record):
    """The ``replay_drift`` (or ``episode_id_ignored``) error object, as ``--json`` prints it
    under ``error``."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"hint", "totals", "drifted"})

    code: Literal["replay_drift", "episode_id_ignored"]
    rule: StrictStr
    hint: StrictStr | None = None
    drift: DriftLocation
    totals: DriftTotals | None = None
    drifted: Annotated[list[DriftLocation], Field(max_length=MAX_REPLAY_DRIFT_LOCATIONS)] | None = (
        None
    )
    detail: DriftDetail


ReplayResult = ReplayRunResult | ReplayRunReport | ReplayDriftError
"""What a finished replay reported: no drift (with our notes, or Kiln's report alone), or
the drift."""


def _where(drift: DriftLocation | ExchangeDrift) -> dict[str, Any]:
    return {
        key: value
        for key, value in drift.to_json().items()
        if key in ("stage", "step_index", "field", "expected", "actual")
        or key in _OPTIONAL_DIFFERENCE
    }


def _consistent(error: ReplayDriftError, shown: str) -> None:
    def fail(rule: str) -> RecordInvalid:
        return RecordInvalid(f"ReplayDriftError: {rule}", path=shown)

    detail, totals, drift = error.detail, error.totals, error.drift
    if totals is None:
        if (drift.stage, drift.when) != ("identity", "before replay"):
            raise fail("totals are missing (only identity drift before the replay has none)")
        if detail.candidates or detail.omitted_candidates or error.drifted is not None:
            raise fail("identity drift before the replay replayed no candidate")
        if [item.to_json() for item in detail.identities] != [drift.to_json()]:
            raise fail("detail.identities must be the drift itself")
        return
    if error.drifted is None:
        raise fail("drifted is missing beside totals")
    kept = len(detail.candidates)
    if kept + detail.omitted_candidates != totals.drifted_candidates:
        raise fail("detail.candidates and omitted_candidates do not add up to the totals")
    if len(detail.identities) != totals.drifted_identities:
        raise fail("detail.identities does not match totals.drifted_identities")
    located = totals.drifted_candidates + totals.drifted_identities
    if len(error.drifted) != min(located, MAX_REPLAY_DRIFT_LOCATIONS):
        raise fail("drifted does not list the first drifted candidates and identities")
    if sum(len(candidate.drifts) for candidate in detail.candidates) > MAX_REPLAY_DRIFTS_KEPT:
        raise fail(f"more drifts kept than MAX_REPLAY_DRIFTS_KEPT = {MAX_REPLAY_DRIFTS_KEPT}")
    order = [(c.group_index, c.candidate_index) for c in detail.candidates]
    if any(later <= earlier for earlier, later in pairwise(order)):
        raise fail("detail.candidates are not in replay order")
    for index, candidate in enumerate(detail.candidates):
        counted = candidate.reset_drifted + candidate.drifted_exchanges + candidate.state_drifted
        if len(candidate.drifts) + candidate.omitted_drifts != counted:
            raise fail(f"detail.candidates[{index}]: kept and omitted drifts do not add up")
        if candidate.drifted_exchanges > candidate.exchanges:
            raise fail(f"detail.candidates[{index}]: more drifted exchanges than exchanges")
        for drift_index, kept_drift in enumerate(candidate.drifts):
            if (kept_drift.stage == "step") != (kept_drift.step_index is not None):
                raise fail(f"detail.candidates[{index}].drifts[{drift_index}]: step_index")
    if totals.drifted_candidates == 0:
        if (drift.stage, drift.when) != ("identity", "after replay"):
            raise fail("no candidate drifted, so the first drift is an identity after replay")
        return
    first = detail.candidates[0] if detail.candidates else None
    placed = None if first is None else (first.group_index, first.candidate_index)
    if placed != (drift.group_index, drift.candidate_index) or (
        first is not None and _where(first.drifts[0]) != _where(drift)
    ):
        raise fail("the first kept drift is not the error's drift")


def read_replay_result(path: str | os.PathLike[str]) -> ReplayResult:
    """The saved replay result at ``path``, strictly validated (``record_invalid`` for
    anything but the two shapes, ``json_*`` and path and ``limit_exceeded`` errors)."""
    shown = os.fspath(path)
    data = read_bounded(
        Path(path), max_bytes=REPORT_MAX_REPLAY_BYTES, limit="REPORT_MAX_REPLAY_BYTES"
    )
    value = loads_object(data, max_bytes=REPORT_MAX_REPLAY_BYTES, source=shown)
    if "error" not in value:
        if "report" in value:
            return validate_record(ReplayRunResult, value, source=shown)
        if "schema" not in value:
            raise RecordInvalid(
                "neither a replay result, a kiln.openenv-replay-run.v1 report nor a "
                "replay_drift error (the documents `openenv replay --json` prints)",
                path=shown,
            )
        return validate_record(ReplayRunReport, value, source=shown)
    error = value["error"]
    if len(value) != 1 or not isinstance(error, dict):
        raise RecordInvalid('a replay error document is exactly {"error": {...}}', path=shown)
    code = error.get("code")
    if code not in ("replay_drift", "episode_id_ignored"):
        raise RecordInvalid(
            f"the replay failed with {snippet(code)} before it could compare anything: there is "
            "no drift to report",
            path=shown,
            hint="fix that failure and replay again",
        )
    if "detail" not in error:
        raise RecordInvalid(
            "this replay_drift error has no detail (written by an older kiln-verify)",
            path=shown,
            hint="replay again with this version to report every drifted exchange",
        )
    drift = validate_record(ReplayDriftError, error, source=shown)
    _consistent(drift, shown)
    return drift
