"""The conformance report: an endpoint-by-case matrix, and every finding with its evidence.

Built from a :class:`~kiln_verify.report.conformance_input.ConformanceReport` (the
plugin's JSON, validated). The matrix has one row per case (level and clause beside it)
and one column per endpoint; every verdict that is not OK or SKIPPED links to its entry
under "Findings", which shows the case's requirement level, clause, the detail the check
recorded and its measurements. "Collectable" shows, per endpoint, whether kiln-verify can
collect GRPO groups from it, the cases behind that answer (linked to their findings) and
why; a v1 report, written before that verdict existed, says so instead. Nothing is
recomputed: the verdicts are the suite's (the reader checked that ``collectable`` is what
its cases say).
"""

from __future__ import annotations

from collections import Counter

from kiln_verify.limits import REPORT_EXCERPT_CHARS
from kiln_verify.report.collectable import COLLECTABLE_CASES, collectable_label
from kiln_verify.report.conformance_input import (
    VERDICTS,
    ConformanceReport,
    ConformanceResult,
    read_conformance_report,
)
from kiln_verify.report.document import (
    Bar,
    Block,
    Cell,
    Chart,
    Details,
    Document,
    KeyValues,
    Metric,
    Notice,
    Paragraph,
    Preformatted,
    Section,
    Table,
    Tone,
    excerpt,
    fmt,
)

__all__ = ["conformance_document", "endpoint_counts", "read_conformance_report"]

TONES: dict[str, Tone] = {
    "OK": "good",
    "NON-STRICT": "warn",
    "FAILED": "bad",
    "INFORMATIONAL": "muted",
    "SKIPPED": "muted",
}
_FINDINGS = ("FAILED", "NON-STRICT", "INFORMATIONAL")


def endpoint_counts(results: list[ConformanceResult]) -> dict[str, dict[str, int]]:
    """Verdict counts per endpoint id (every verdict present, in report order)."""
    counts: dict[str, Counter[str]] = {}
    for result in results:
        counts.setdefault(result.endpoint, Counter())[result.verdict] += 1
    return {key: {v: counter.get(v, 0) for v in VERDICTS} for key, counter in counts.items()}


def _anchors(report: ConformanceReport) -> dict[tuple[str, str], str]:
    """In-page ids of the findings, numbered in report order (never from peer text)."""
    found = [r for r in report.results if r.verdict in _FINDINGS]
    return {(r.endpoint, r.case): f"finding-{i}" for i, r in enumerate(found, start=1)}


_COLLECTABLE_TONES: dict[str, Tone] = {
    "yes": "good", "no": "bad", "undetermined": "warn", "-": "muted",
}  # fmt: skip


def _collectable_cell(report: ConformanceReport, endpoint: str) -> Cell:
    found = {entry.endpoint: entry for entry in report.collectable or ()}
    label = collectable_label(found.get(endpoint))
    return Cell(label, _COLLECTABLE_TONES[label])


def _endpoints(report: ConformanceReport) -> Section:
    per = endpoint_counts(report.results)
    versioned = report.collectable is not None
    rows = []
    for endpoint in report.endpoints:
        counts = per.get(endpoint.id, dict.fromkeys(VERDICTS, 0))
        failed = counts["FAILED"]
        rows.append(
            (
                Cell(endpoint.id),
                Cell(endpoint.url),
                *(
                    Cell.num(counts[v], TONES[v] if counts[v] and v != "OK" else "plain")
                    for v in VERDICTS
                ),
                Cell("no" if failed else "yes", "bad" if failed else "good"),
                *((_collectable_cell(report, endpoint.id),) if versioned else ()),
            )
        )
    chart = Chart(
        "Verdicts, all endpoints",
        "verdict",
        "cases",
        tuple(Bar(v, float(report.summary[v]), TONES[v]) for v in VERDICTS),
    )
    columns = ("endpoint", "URL", *VERDICTS, "conforming", *(("collectable",) if versioned else ()))
    table = Table("Verdicts per endpoint", columns, tuple(rows))
    return Section("Endpoints", (table, chart), "endpoints")


def _collectable(report: ConformanceReport, anchors: dict[tuple[str, str], str]) -> Section:
    note = Paragraph(
        "Conforming means that no MUST case failed. Collectable means that kiln-verify's "
        "rollout accepts the endpoint's GRPO groups: reset(seed) reproduces the observation "
        "and the hidden state on fresh sessions, and a requested episode_id is kept or left "
        f"out of the reset options (it is then volatile identity). It rests on "
        f"{' and '.join(COLLECTABLE_CASES)}, the cases whose rules rollout enforces and names "
        "when it refuses."
    )
    if report.collectable is None:
        old = Paragraph(
            f"This report is {report.format}, written before the collectable verdict existed; "
            "run the suite again for it.",
            "muted",
        )
        return Section("Collectable", (note, old), "collectable")
    rows = []
    for entry in report.collectable:
        label = collectable_label(entry)
        ran = {item.case: item.verdict for item in entry.cases}
        cases = (
            Cell(ran[case], TONES[ran[case]], anchor=anchors.get((entry.endpoint, case)))
            if case in ran
            else Cell("\u2013", "muted")
            for case in COLLECTABLE_CASES
        )
        rows.append(
            (
                Cell(entry.endpoint),
                Cell(label, _COLLECTABLE_TONES[label]),
                Cell(entry.requested_episode_id),
                *cases,
                Cell(entry.reason),
            )
        )
    if not rows:
        empty = Paragraph(f"No endpoint ran {' or '.join(COLLECTABLE_CASES)}.", "muted")
        return Section("Collectable", (note, empty), "collectable")
    columns = ("endpoint", "collectable", "requested episode_id", *COLLECTABLE_CASES, "why")
    table = Table("Collectable per endpoint", columns, tuple(rows))
    return Section("Collectable", (note, table), "collectable")


def _matrix(report: ConformanceReport, anchors: dict[tuple[str, str], str]) -> Section:
    cases: dict[str, ConformanceResult] = {}
    verdicts: dict[tuple[str, str], str] = {}
    for result in report.results:
        cases.setdefault(result.case, result)
        verdicts[(result.endpoint, result.case)] = result.verdict
    endpoints = [endpoint.id for endpoint in report.endpoints]
    rows = []
    for case_id in sorted(cases):
        first = cases[case_id]
        cells = [Cell(case_id), Cell(first.level), Cell(first.clause)]
        for endpoint in endpoints:
            verdict = verdicts.get((endpoint, case_id))
            if verdict is None:
                cells.append(Cell("\u2013", "muted"))
            else:
                cells.append(Cell(verdict, TONES[verdict], anchor=anchors.get((endpoint, case_id))))
        rows.append(tuple(cells))
    table = Table("Case by endpoint", ("case", "level", "clause", *endpoints), tuple(rows))
    note = Paragraph(
        "Each verdict other than OK and SKIPPED links to its finding below. MUST cases that do "
        "not hold are FAILED, SHOULD cases NON-STRICT, MAY cases INFORMATIONAL."
    )
    return Section("Matrix", (note, table), "matrix")


def _finding(result: ConformanceResult, anchor: str) -> Details:
    items: list[tuple[str, Cell]] = [
        ("endpoint", Cell(result.endpoint)),
        ("URL", Cell(result.url)),
        ("level", Cell(result.level)),
        ("clause", Cell(result.clause)),
        ("verdict", Cell(result.verdict, TONES[result.verdict])),
        ("duration (s)", Cell.num(result.duration_s)),
    ]
    blocks: list[Block] = [
        KeyValues("Case", tuple(items)),
        Preformatted("evidence", excerpt(result.detail, REPORT_EXCERPT_CHARS) or "(none recorded)"),
    ]
    if result.measurements:
        rows = tuple(
            (Cell(name), Cell.num(value)) for name, value in sorted(result.measurements.items())
        )
        blocks.append(Table("Measurements", ("measurement", "value"), rows))
    title = f"{result.verdict}: {result.case} on {result.endpoint}"
    return Details(title, tuple(blocks), TONES[result.verdict], anchor=anchor)


def _findings(report: ConformanceReport, anchors: dict[tuple[str, str], str]) -> Section:
    order = {verdict: index for index, verdict in enumerate(_FINDINGS)}
    found = sorted(
        (r for r in report.results if r.verdict in _FINDINGS), key=lambda r: order[r.verdict]
    )
    blocks: list[Block] = [_finding(r, anchors[(r.endpoint, r.case)]) for r in found]
    if not blocks:
        blocks.append(Paragraph("Every case that ran held.", "good"))
    skipped = [r for r in report.results if r.verdict == "SKIPPED"]
    if skipped:
        rows = tuple(
            (Cell(r.endpoint), Cell(r.case), Cell(excerpt(r.detail, REPORT_EXCERPT_CHARS)))
            for r in skipped
        )
        blocks.append(Table("Skipped (could not be probed)", ("endpoint", "case", "reason"), rows))
    return Section("Findings", tuple(blocks), "findings")


def conformance_document(report: ConformanceReport) -> Document:
    anchors = _anchors(report)
    counts = report.summary
    verdict = (
        Notice(f"Conforming: no MUST case failed. {report.summary_line}.", "good")
        if report.conforming
        else Notice(
            f"Not conforming: {counts['FAILED']} MUST case verdicts FAILED. {report.summary_line}.",
            "bad",
        )
    )
    run = KeyValues(
        "Run",
        (
            ("tool", Cell(f"{report.tool.name} {report.tool.version}")),
            ("python", Cell(report.python)),
            ("platform", Cell(report.platform)),
            ("created (UTC)", Cell(report.created_utc)),
        ),
    )
    metrics = (
        Metric("endpoints", fmt(len(report.endpoints))),
        Metric(
            "conforming",
            "yes" if report.conforming else "no",
            "good" if report.conforming else "bad",
        ),
        *(
            Metric(v, fmt(counts[v]), TONES[v] if counts[v] and v != "OK" else "plain")
            for v in VERDICTS
        ),
    )
    return Document(
        kind="conformance",
        title="OpenEnv conformance report",
        subtitle=f"{len(report.endpoints)} endpoints, {len(report.results)} verdicts, "
        f"created {report.created_utc}",
        metrics=metrics,
        sections=(
            Section("Verdict", (verdict, run), "verdict"),
            _endpoints(report),
            _collectable(report, anchors),
            _matrix(report, anchors),
            _findings(report, anchors),
        ),
    )
