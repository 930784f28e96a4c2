"""The replay report: where a live replay drifted, every drifted exchange as a diff.

Built from what ``openenv replay --json`` printed (:mod:`.replay_input`, read strictly):
the ``replay_drift`` error with its ``detail``, or the run report of a clean replay. Nothing
is recounted: totals, counts and renderings are the replay's own. The page shows the
verdict and the likely cause, the totals (candidates, step exchanges, resets, final states
and identities, replayed and drifted), the volatile state fields, the environment remaps,
any identity drift, and then the drifted candidates: an index linking to each one, and per
candidate every drifted exchange it kept, recorded above live with the differing part
marked, followed by how many more were counted but not kept.

The drifted exchanges themselves, and how a rendering is made readable, are
:mod:`.replay_diffs`.
"""

from __future__ import annotations

from typing import Final

from kiln_verify.openenv.records.reports import (
    EnvironmentRemap,
    ReplayRunNotes,
    ReplayRunReport,
    ReplayRunResult,
)
from kiln_verify.report.document import (
    Bar,
    Block,
    Cell,
    Chart,
    Document,
    KeyValues,
    Metric,
    Notice,
    Paragraph,
    Section,
    Table,
    fmt,
    percent,
)
from kiln_verify.report.replay_diffs import (
    candidates_section,
    identities_section,
    readable,
    tone,
)
from kiln_verify.report.replay_input import ReplayDriftError, ReplayResult

__all__ = ["readable", "replay_document"]


def _run(replay_sha256: str, environments: int, groups: int) -> KeyValues:
    return KeyValues(
        "Replay",
        (
            ("replay manifest", Cell(replay_sha256)),
            ("environments", Cell.num(environments)),
            ("groups", Cell.num(groups)),
        ),
    )


_NOT_RECORDED: Final = (
    "Not recorded: this is Kiln's kiln.openenv-replay-run.v1 report alone, without the "
    "kiln-verify.replay-run-notes.v1 that openenv replay --json prints beside it."
)


def _volatile(paths: list[str] | None, *, recorded: bool = True) -> Section:
    note = Paragraph(
        "State fields that are per-session identity (a fresh uuid per reset unless the reset "
        "payload names one) are compared by presence and JSON type only; --strict-state "
        "compares them exactly."
    )
    if not recorded:
        return Section("Volatile fields", (note, Paragraph(_NOT_RECORDED)), "volatile")
    if not paths:
        return Section("Volatile fields", (note, Paragraph("None in this replay.")), "volatile")
    rows = tuple((Cell(path),) for path in paths)
    table = Table("Compared by presence and type", ("state path",), rows)
    return Section("Volatile fields", (note, table), "volatile")


def _remaps(remaps: list[EnvironmentRemap] | None, *, recorded: bool = True) -> Section:
    if not recorded:
        return Section("Environment remaps", (Paragraph(_NOT_RECORDED),), "remaps")
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
                Cell.num(drifted, tone(drifted)),
                Cell(percent(drifted, done) if done else "\u2013", numeric=True),
            )
            for name, done, drifted in rows
        ),
    )


def _clean(report: ReplayRunReport, notes: ReplayRunNotes | None) -> Document:
    volatile = None if notes is None else notes.volatile
    remaps = None if notes is None else notes.environment_remaps
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
            _volatile(volatile, recorded=notes is not None),
            _remaps(remaps, recorded=notes is not None),
        ),
    )


def _drifted(error: ReplayDriftError) -> Document:
    detail, totals = error.detail, error.totals
    headline = (
        "Drift: the live environment does not keep the episode id the reset payload names "
        "(episode_id_ignored)."
        if error.code == "episode_id_ignored"
        else "Drift: the live environment no longer reproduces the bundle."
    )
    verdict: list[Block] = [Notice(headline, "bad"), Paragraph(error.rule)]
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
                Bar(name, float(count), tone(count))
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
                tone(totals.drifted_candidates),
            ),
            Metric(
                "drifted step exchanges",
                f"{totals.drifted_exchanges} of {totals.exchanges}",
                tone(totals.drifted_exchanges),
            ),
            Metric("drifted resets", fmt(totals.drifted_resets), tone(totals.drifted_resets)),
            Metric(
                "drifted final states",
                fmt(totals.drifted_final_states),
                tone(totals.drifted_final_states),
            ),
            Metric(
                "drifted identities",
                fmt(totals.drifted_identities),
                tone(totals.drifted_identities),
            ),
        )
        subtitle = (
            f"Drift: {totals.drifted_candidates} of {totals.candidates} candidates and "
            f"{totals.drifted_exchanges} of {totals.exchanges} step exchanges drifted"
        )
    sections.append(_volatile(detail.volatile))
    sections.append(_remaps(detail.environment_remaps))
    if detail.identities:
        sections.append(identities_section(detail))
    if totals is not None:
        sections.append(candidates_section(error))
    return Document(
        kind="replay",
        title="Live replay report",
        subtitle=subtitle,
        metrics=metrics,
        sections=tuple(sections),
    )


def replay_document(result: ReplayResult) -> Document:
    """The report of a replay result: the drift page, or the clean-replay page."""
    if isinstance(result, ReplayRunResult):
        return _clean(result.report, result.notes)
    if isinstance(result, ReplayRunReport):
        return _clean(result, None)
    return _drifted(result)
