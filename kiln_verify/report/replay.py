"""The replay report: where a live replay drifted, every drifted exchange as a diff.

Built from what ``openenv replay --json`` printed (:mod:`.replay_input`, read strictly):
the ``replay_drift`` error with its ``detail``, or the run report of a clean replay. Nothing
is recounted: totals, counts and renderings are the replay's own. The page shows the
verdict and the likely cause, the totals (candidates, step exchanges, resets, final states
and identities, replayed and drifted), the volatile state fields, the environment remaps,
any identity drift, and then the drifted candidates: an index linking to each one, and per
candidate every drifted exchange it kept, recorded above live with the differing part
marked, followed by how many more were counted but not kept.

Replay quotes every value it renders with Python's ``repr`` (so no control character can
reach a terminal). :func:`readable` shows the text inside those quotes when the rendering
is provably exactly such a quotation, and escapes whatever is not printable either way,
so a bidirectional override or a line break in peer text is shown, never obeyed.
"""

from __future__ import annotations

import ast
import re
from typing import Final

from kiln_verify.limits import MAX_REPLAY_DRIFTS_KEPT, MAX_REPLAY_DRIFTS_PER_CANDIDATE
from kiln_verify.openenv.records.reports import ReplayRunReport
from kiln_verify.report.document import (
    Bar,
    Block,
    Cell,
    Chart,
    Details,
    Diff,
    Document,
    KeyValues,
    Metric,
    Notice,
    Paragraph,
    Section,
    Table,
    Tone,
    fmt,
    percent,
)
from kiln_verify.report.replay_input import (
    DriftDetail,
    DriftedCandidate,
    DriftLocation,
    ExchangeDrift,
    ReplayDriftError,
    ReplayResult,
)

__all__ = ["readable", "replay_document"]

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


def _tone(count: int) -> Tone:
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


def _run(replay_sha256: str, environments: int, groups: int) -> KeyValues:
    return KeyValues(
        "Replay",
        (
            ("replay manifest", Cell(replay_sha256)),
            ("environments", Cell.num(environments)),
            ("groups", Cell.num(groups)),
        ),
    )


def _volatile(paths: list[str] | None) -> Section:
    note = Paragraph(
        "State fields that are per-session identity (a fresh uuid per reset unless the reset "
        "payload names one) are compared by presence and JSON type only; --strict-state "
        "compares them exactly."
    )
    if not paths:
        return Section("Volatile fields", (note, Paragraph("None in this replay.")), "volatile")
    rows = tuple((Cell(path),) for path in paths)
    table = Table("Compared by presence and type", ("state path",), rows)
    return Section("Volatile fields", (note, table), "volatile")


def _remaps(report: ReplayRunReport | DriftDetail) -> Section:
    remaps = report.environment_remaps or []
    if not remaps:
        text = "None: every environment was replayed at its recorded base URL."
        return Section("Environment remaps", (Paragraph(text),), "remaps")
    rows = tuple(
        (
            Cell.num(remap.environment_index),
            Cell(remap.recorded_base_url),
            Cell(remap.base_url),
            Cell("--environment-url" if remap.source == "environment_url" else "embedded oracle"),
            Cell(remap.oracle or "\u2013"),
        )
        for remap in remaps
    )
    table = Table(
        "Replayed elsewhere (every other identity field compared exactly)",
        ("environment", "recorded base URL", "replayed at", "by", "oracle server"),
        rows,
    )
    return Section("Environment remaps", (table,), "remaps")


def _counts_table(rows: list[tuple[str, int | None, int]]) -> Table:
    return Table(
        "Replayed and drifted",
        ("what", "replayed", "drifted", "share drifted"),
        tuple(
            (
                Cell(name),
                Cell.num(done),
                Cell.num(drifted, _tone(drifted)),
                Cell(percent(drifted, done) if done else "\u2013", numeric=True),
            )
            for name, done, drifted in rows
        ),
    )


def _clean(report: ReplayRunReport) -> Document:
    verdict = Notice(
        "No drift: every recorded reset, step and final state replayed exactly, and every "
        "environment kept its identity.",
        "good",
    )
    run = _run(report.replay_sha256, report.environments, report.groups)
    extra = KeyValues(
        "During the replay",
        (
            ("capacity retries", Cell.num(report.capacity_retries)),
            ("prefix-only rollouts", Cell.num(report.environment_prefix_only_rollouts)),
        ),
    )
    totals = _counts_table(
        [
            ("candidates", report.rollouts, 0),
            ("step exchanges", report.environment_exchanges, 0),
            ("resets", report.rollouts, 0),
            ("identities (after the replay)", report.environments, 0),
        ]
    )
    return Document(
        kind="replay",
        title="Live replay report",
        subtitle=f"No drift: {report.rollouts} candidates and {report.environment_exchanges} "
        "step exchanges replayed exactly",
        metrics=(
            Metric("verdict", "no drift", "good"),
            Metric("candidates", fmt(report.rollouts)),
            Metric("step exchanges", fmt(report.environment_exchanges)),
            Metric("environments", fmt(report.environments)),
            Metric("groups", fmt(report.groups)),
        ),
        sections=(
            Section("Verdict", (verdict, run, extra), "verdict"),
            Section("Totals", (totals,), "totals"),
            _volatile(report.volatile),
            _remaps(report),
        ),
    )


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


def _candidates(error: ReplayDriftError) -> Section:
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
                Cell.num(candidate.drifted_exchanges, _tone(candidate.drifted_exchanges)),
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


def _identities(detail: DriftDetail) -> Section:
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


def _drifted(error: ReplayDriftError) -> Document:
    detail, totals = error.detail, error.totals
    verdict: list[Block] = [
        Notice("Drift: the live environment no longer reproduces the bundle.", "bad"),
        Paragraph(error.rule),
    ]
    if error.hint is not None:
        verdict.append(Paragraph(f"Likely cause: {error.hint}"))
    verdict.append(_run(detail.replay_sha256, detail.environments, detail.groups))
    sections = [Section("Verdict", tuple(verdict), "verdict")]
    metrics: tuple[Metric, ...]
    if totals is None:
        sections.append(
            Section(
                "Totals",
                (Paragraph("Nothing was replayed: an identity differed before the replay."),),
                "totals",
            )
        )
        metrics = (
            Metric("verdict", "drift", "bad"),
            Metric("replayed", "nothing"),
            Metric("drifted identities", fmt(len(detail.identities)), "bad"),
        )
        subtitle = "Drift before the replay: an environment's identity changed"
    else:
        table = _counts_table(
            [
                ("candidates", totals.candidates, totals.drifted_candidates),
                ("step exchanges", totals.exchanges, totals.drifted_exchanges),
                ("resets", totals.candidates, totals.drifted_resets),
                ("identities (after the replay)", detail.environments, totals.drifted_identities),
            ]
        )
        finals = Paragraph(
            f"Final states drifted: {totals.drifted_final_states} (compared where one was "
            "recorded and the live session was still open)."
        )
        chart = Chart(
            "Drifted, by stage",
            "stage",
            "drifted",
            tuple(
                Bar(name, float(count), _tone(count))
                for name, count in (
                    ("resets", totals.drifted_resets),
                    ("step exchanges", totals.drifted_exchanges),
                    ("final states", totals.drifted_final_states),
                    ("identities", totals.drifted_identities),
                )
            ),
        )
        sections.append(Section("Totals", (table, finals, chart), "totals"))

        metrics = (
            Metric("verdict", "drift", "bad"),
            Metric(
                "drifted candidates",
                f"{totals.drifted_candidates} of {totals.candidates}",
                _tone(totals.drifted_candidates),
            ),
            Metric(
                "drifted step exchanges",
                f"{totals.drifted_exchanges} of {totals.exchanges}",
                _tone(totals.drifted_exchanges),
            ),
            Metric("drifted resets", fmt(totals.drifted_resets), _tone(totals.drifted_resets)),
            Metric(
                "drifted final states",
                fmt(totals.drifted_final_states),
                _tone(totals.drifted_final_states),
            ),
            Metric(
                "drifted identities",
                fmt(totals.drifted_identities),
                _tone(totals.drifted_identities),
            ),
        )
        subtitle = (
            f"Drift: {totals.drifted_candidates} of {totals.candidates} candidates and "
            f"{totals.drifted_exchanges} of {totals.exchanges} step exchanges drifted"
        )
    sections.append(_volatile(detail.volatile))
    sections.append(_remaps(detail))
    if detail.identities:
        sections.append(_identities(detail))
    if totals is not None:
        sections.append(_candidates(error))
    return Document(
        kind="replay",
        title="Live replay report",
        subtitle=subtitle,
        metrics=metrics,
        sections=tuple(sections),
    )


def replay_document(result: ReplayResult) -> Document:
    """The report of a replay result: the drift page, or the clean-replay page."""
    if isinstance(result, ReplayRunReport):
        return _clean(result)
    return _drifted(result)
