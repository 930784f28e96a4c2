"""Every drifted exchange of a replay as a diff, grouped by candidate (the replay report).

Replay quotes every value it renders with Python's ``repr`` (so no control character can
reach a terminal). :func:`readable` shows the text inside those quotes when the rendering
is provably exactly such a quotation (the literal, read back, writes the same bytes), and
escapes whatever is not printable either way, so a bidirectional override or a line break
in peer text is shown, never obeyed, and each side of a diff is one line.
"""

from __future__ import annotations

import ast
import re
from typing import Final

from kiln_verify.limits import MAX_REPLAY_DRIFTS_KEPT, MAX_REPLAY_DRIFTS_PER_CANDIDATE
from kiln_verify.report.document import (
    Block,
    Cell,
    Details,
    Diff,
    Notice,
    Paragraph,
    Section,
    Table,
    Tone,
)
from kiln_verify.report.replay_input import (
    DriftDetail,
    DriftedCandidate,
    DriftLocation,
    ExchangeDrift,
    ReplayDriftError,
)

__all__ = ["candidates_section", "identities_section", "readable", "tone"]

_QUOTED: Final = re.compile(
    r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")((?:\.\.\. \(\d+ chars\))?)\Z""", re.S
)
_STAGE: Final = {"reset": "reset", "step": "step", "state": "final state", "identity": "identity"}


def readable(rendering: str) -> str:
    """A rendering as a person reads it (see the module text); always one line."""
    text = rendering
    match = _QUOTED.match(rendering)
    if match is not None:
        try:
            value = ast.literal_eval(match.group(1))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = None
        if isinstance(value, str) and repr(value) == match.group(1):
            text = value + match.group(2)
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def tone(count: int) -> Tone:
    """A drift count reads as bad unless it is zero."""
    return "bad" if count else "plain"


def _yes(flag: bool) -> Cell:
    return Cell("yes", "bad") if flag else Cell("no")


def _label(drift: ExchangeDrift | DriftLocation) -> str:
    where = _STAGE[drift.stage]
    if drift.step_index is not None:
        where += f" {drift.step_index}"
    parts = [where, readable(drift.field)]
    if drift.expected_type is not None and drift.actual_type is not None:
        parts.append(f"{readable(drift.expected_type)} \u2192 {readable(drift.actual_type)}")
    if drift.offset is not None:
        parts.append(f"differs at character {drift.offset}")
    return " \u00b7 ".join(parts)


def _diff(drift: ExchangeDrift | DriftLocation) -> Diff:
    return Diff(_label(drift), readable(drift.expected), readable(drift.actual))


def _candidate_title(candidate: DriftedCandidate) -> str:
    drifted = []
    if candidate.reset_drifted:
        drifted.append("reset")
    if candidate.drifted_exchanges:
        drifted.append(f"{candidate.drifted_exchanges} of {candidate.exchanges} step exchanges")
    if candidate.state_drifted:
        drifted.append("final state")
    return (
        f"environment {candidate.environment_index} ({readable(candidate.environment_name)}) "
        f"\u00b7 group {candidate.group_index} \u00b7 candidate {candidate.candidate_index}: "
        f"{', '.join(drifted)} drifted"
    )


def candidates_section(error: ReplayDriftError) -> Section:
    detail = error.detail
    rows = []
    blocks: list[Block] = []
    for number, candidate in enumerate(detail.candidates, start=1):
        anchor = f"candidate-{number}"
        rows.append(
            (
                Cell(readable(candidate.environment_name), anchor=anchor),
                Cell.num(candidate.group_index),
                Cell.num(candidate.candidate_index),
                _yes(candidate.reset_drifted),
                Cell.num(candidate.drifted_exchanges, tone(candidate.drifted_exchanges)),
                Cell.num(candidate.exchanges),
                _yes(candidate.state_drifted),
            )
        )
        inner: list[Block] = [_diff(drift) for drift in candidate.drifts]
        if candidate.omitted_drifts:
            inner.append(
                Paragraph(
                    f"And {candidate.omitted_drifts} more drifted exchanges of this candidate, "
                    f"counted but not kept (MAX_REPLAY_DRIFTS_PER_CANDIDATE = "
                    f"{MAX_REPLAY_DRIFTS_PER_CANDIDATE}, MAX_REPLAY_DRIFTS_KEPT = "
                    f"{MAX_REPLAY_DRIFTS_KEPT}).",
                    "muted",
                )
            )
        blocks.append(Details(_candidate_title(candidate), tuple(inner), anchor=anchor))
    head: list[Block] = []
    if rows:
        head.append(
            Table(
                "Drifted candidates, in replay order",
                (
                    "environment",
                    "group",
                    "candidate",
                    "reset drifted",
                    "drifted steps",
                    "steps",
                    "final state drifted",
                ),
                tuple(rows),
            )
        )
        head.append(
            Paragraph(
                "Each drifted exchange below shows the recorded value above the live one, as "
                "replay rendered them (two strings as a window around their first differing "
                "character), with the part that differs marked."
            )
        )
    else:
        head.append(Paragraph("No candidate drifted."))
    if detail.omitted_candidates:
        blocks.append(
            Notice(
                f"And {detail.omitted_candidates} more drifted candidates, counted in the totals "
                f"but not kept (MAX_REPLAY_DRIFTS_KEPT = {MAX_REPLAY_DRIFTS_KEPT} drifted "
                "exchanges are kept per replay)."
            )
        )
    return Section("Drifted exchanges", (*head, *blocks), "candidates")


def identities_section(detail: DriftDetail) -> Section:
    blocks: list[Block] = []
    for identity in detail.identities:
        title = (
            f"environment {identity.environment_index} ({readable(identity.environment_name)}), "
            f"{identity.when or 'identity'}"
        )
        blocks.append(Details(title, (_diff(identity),)))
    note = Paragraph(
        "Rediscovery compares each environment's identity (metadata, environment names, "
        "authentication method, schemas, discovery digests) before and after the replay; "
        "only the changed fields are shown, schemas as digests."
    )
    return Section("Identity drift", (note, *blocks), "identity")
