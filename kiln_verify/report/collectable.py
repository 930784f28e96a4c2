"""Can kiln-verify collect GRPO groups from an endpoint? The conformance report's answer.

"Conforming" says that no MUST case failed; it does not say that ``openenv rollout`` will
accept the endpoint's groups, because the cases that decide that are SHOULD and MAY cases
(a server that ignores the reset seed is conforming, and every group it serves is
refused). So the report gives a second, separate verdict per endpoint, ``collectable``,
derived from exactly the cases whose rules the collector enforces, and names them:

- ``determinism.fresh-session-same-seed`` (:attr:`ResetNondeterministic.conformance_case`):
  two fresh sessions reset with one seed agree on the observation and on the state read
  right after reset, under the volatile-identity rule the collector's group check and live
  replay use. Not OK means every group is refused with ``reset_nondeterministic``
  (``collectable: false``); SKIPPED or not run, ``collectable: null`` (undetermined).
- ``ws.episode-id-echo`` (:attr:`EpisodeIdIgnored.conformance_case`): a reset that names an
  ``episode_id`` finds it in the state. A server that does not keep it is still
  collectable, because an id the reset payload does not name is volatile session identity;
  ``requested_episode_id: "ignored"`` and the reason say to keep it out of the reset
  options, or rollout refuses with ``episode_id_ignored``.

An entry exists for each endpoint that ran at least one of the two cases (the control-plane
suite, which shares the report format, runs neither). Reasons are fixed text, never peer
text, so the reader can recompute every entry from the results and refuse a file whose
verdict disagrees with them (:func:`collectable_verdicts` is the one rule for the writer,
the reader and both renderings).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Final, Literal

from pydantic import Field, StrictBool, StrictStr

from kiln_verify.errors import EpisodeIdIgnored, ResetNondeterministic
from kiln_verify.records import Record

__all__ = [
    "COLLECTABLE_CASES",
    "EPISODE_ID_CASE",
    "FRESH_SESSION_CASE",
    "CaseVerdict",
    "CollectableVerdict",
    "collectable_label",
    "collectable_verdicts",
]

FRESH_SESSION_CASE: Final = ResetNondeterministic.conformance_case
EPISODE_ID_CASE: Final = EpisodeIdIgnored.conformance_case
COLLECTABLE_CASES: Final = (FRESH_SESSION_CASE, EPISODE_ID_CASE)
"""The cases behind the verdict, in the order an entry lists them."""

_Text = Annotated[StrictStr, Field(min_length=1)]
_Verdict = Literal["OK", "NON-STRICT", "FAILED", "INFORMATIONAL", "SKIPPED"]

_REPRODUCED = (
    "reset(seed) reproduced the observation and the hidden state on two fresh sessions"
)
_EPISODE_ID = {
    "kept": "; a requested episode_id is kept",
    "ignored": (
        "; a requested episode_id is not kept, so leave episode_id out of the reset options "
        "(--reset-options): an id the reset does not name is session identity, compared by "
        "presence and JSON type only, and one it names but the server does not keep is "
        "refused (episode_id_ignored)"
    ),
    "untested": f"; whether a requested episode_id is kept was not tested ({EPISODE_ID_CASE})",
}
_REFUSED = (
    f"two fresh sessions reset with one seed disagreed ({FRESH_SESSION_CASE}; its detail says "
    "where): rollout refuses every group with reset_nondeterministic; where only the hidden "
    "state differs, or cannot be read right after reset, --no-state-check collects anyway, "
    "knowing that a group's candidates may then play different hidden games"
)
_UNDETERMINED = {
    None: f"undetermined: {FRESH_SESSION_CASE} did not run",
    "SKIPPED": f"undetermined: {FRESH_SESSION_CASE} could not be probed (its detail says why)",
}


class CaseVerdict(Record):
    """One case behind an endpoint's verdict, and the verdict it got there."""

    case: _Text
    verdict: _Verdict


class CollectableVerdict(Record):
    """Whether kiln-verify can collect GRPO groups from one endpoint, and why.

    ``collectable`` is ``null`` when the deciding case did not run or could not probe the
    endpoint; ``cases`` lists the cases behind the answer that ran.
    """

    endpoint: _Text
    collectable: StrictBool | None
    requested_episode_id: Literal["kept", "ignored", "untested"]
    cases: Annotated[list[CaseVerdict], Field(min_length=1)]
    reason: _Text


def _entry(endpoint: str, verdicts: dict[str, str]) -> CollectableVerdict:
    fresh = verdicts.get(FRESH_SESSION_CASE)
    echo = verdicts.get(EPISODE_ID_CASE)
    episode_id: Literal["kept", "ignored", "untested"] = (
        "kept" if echo == "OK" else "untested" if echo in (None, "SKIPPED") else "ignored"
    )
    collectable: bool | None
    if fresh in _UNDETERMINED:
        collectable, reason = None, _UNDETERMINED[fresh]
    elif fresh == "OK":
        collectable, reason = True, _REPRODUCED + _EPISODE_ID[episode_id]
    else:
        collectable, reason = False, _REFUSED
    cases = [
        CaseVerdict(case=case, verdict=verdicts[case])  # type: ignore[arg-type]
        for case in COLLECTABLE_CASES
        if case in verdicts
    ]
    return CollectableVerdict(
        endpoint=endpoint,
        collectable=collectable,
        requested_episode_id=episode_id,
        cases=cases,
        reason=reason,
    )


def collectable_verdicts(results: Iterable[tuple[str, str, str]]) -> list[CollectableVerdict]:
    """One entry per endpoint that ran a case behind the verdict, by endpoint id.

    ``results`` are ``(endpoint, case, verdict)`` triples (any order; other cases are
    ignored).
    """
    per: dict[str, dict[str, str]] = {}
    for endpoint, case, verdict in results:
        if case in COLLECTABLE_CASES:
            per.setdefault(endpoint, {})[case] = verdict
    return [_entry(endpoint, per[endpoint]) for endpoint in sorted(per)]


def collectable_label(entry: CollectableVerdict | None) -> str:
    """``yes``, ``no``, ``undetermined``, or ``-`` where no case behind the verdict ran."""
    if entry is None:
        return "-"
    return {True: "yes", False: "no", None: "undetermined"}[entry.collectable]
