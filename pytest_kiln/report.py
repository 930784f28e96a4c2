"""The conformance report: verdicts per endpoint and case, summary counts, atomic publication.

The report is ``kiln-verify.conformance-report.v2`` JSON (read back strictly by
:mod:`kiln_verify.report.conformance_input`, which owns the format's name, verdict order
and summary line). Beside ``conforming`` it says per endpoint whether kiln-verify can
collect GRPO groups from it (``collectable``, :mod:`kiln_verify.report.collectable`), in
the JSON, in the HTML and in the terminal summary, each time naming the cases behind it.
It is optionally written with its HTML rendering beside it (``--kiln-report-html``),
written once at the end of the run, together or not at all. By default neither file is
ever overwritten: an existing path is refused up front by the plugin (a usage error naming
the fix), so a report can never be half-written or silently replace an earlier one.
``--kiln-report-overwrite`` chooses pytest's ``--junitxml`` behaviour instead: an existing
file is replaced atomically (a reader sees the old report or the new one).
"""

from __future__ import annotations

import datetime
import platform
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kiln_verify.report.collectable import (
    CollectableVerdict,
    collectable_label,
    collectable_verdicts,
)
from kiln_verify.report.conformance_input import CONFORMANCE_FORMAT as REPORT_FORMAT
from kiln_verify.report.conformance_input import VERDICTS
from kiln_verify.report.conformance_input import summary_line as _summary_line

if TYPE_CHECKING:
    from pytest_kiln.cases import CaseResult

__all__ = [
    "REPORT_FORMAT",
    "VERDICTS",
    "RecordedResult",
    "build_report",
    "collectable_lines",
    "endpoint_collectable",
    "endpoint_table",
    "summary_counts",
    "summary_line",
    "write_report",
]


@dataclass(frozen=True, slots=True)
class RecordedResult:
    endpoint_id: str
    url: str
    result: CaseResult

    def to_json(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint_id, "url": self.url, **self.result.to_json()}


def summary_counts(results: Iterable[RecordedResult]) -> dict[str, int]:
    counts = Counter(item.result.verdict.value for item in results)
    return {verdict: counts.get(verdict, 0) for verdict in VERDICTS}


def summary_line(counts: Mapping[str, int]) -> str:
    """``kiln conformance: 17 OK, 1 NON-STRICT, 0 FAILED`` (+ skipped/informational if any)."""
    return _summary_line({verdict: counts.get(verdict, 0) for verdict in VERDICTS})


def endpoint_collectable(results: Iterable[RecordedResult]) -> list[CollectableVerdict]:
    """The ``collectable`` verdict of every endpoint that ran a case behind it."""
    return collectable_verdicts(
        (item.endpoint_id, item.result.case_id, item.result.verdict.value) for item in results
    )


def collectable_lines(results: Iterable[RecordedResult]) -> list[str]:
    """The terminal's collectable verdicts: per endpoint, the answer, its cases and why."""
    lines = []
    for entry in endpoint_collectable(results):
        cases = ", ".join(f"{item.case} {item.verdict}" for item in entry.cases)
        lines.append(
            f"collectable   {entry.endpoint}: {collectable_label(entry)} ({cases}): "
            f"{entry.reason}"
        )
    return lines


def endpoint_table(results: Iterable[RecordedResult]) -> list[str]:
    """The terminal's per-endpoint summary: one aligned row of verdict counts per endpoint,
    then whether it conforms and whether kiln-verify can collect from it."""
    results = list(results)
    per: dict[str, Counter[str]] = {}
    for item in results:
        per.setdefault(item.endpoint_id, Counter())[item.result.verdict.value] += 1
    collectable = {entry.endpoint: entry for entry in endpoint_collectable(results)}
    header = ["endpoint", *VERDICTS, "conforming", "collectable"]
    rows = [
        [
            endpoint,
            *(str(counts.get(v, 0)) for v in VERDICTS),
            "no" if counts.get("FAILED") else "yes",
            collectable_label(collectable.get(endpoint)),
        ]
        for endpoint, counts in sorted(per.items())
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        cells = [row[0].ljust(widths[0])] + [
            cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True)
        ]
        return "  ".join(cells).rstrip()

    return [line(header), *(line(row) for row in rows)]


def build_report(results: list[RecordedResult]) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        tool_version = version("kiln-verify")
    except PackageNotFoundError:
        tool_version = "unknown"
    endpoints: dict[str, str] = {}
    for item in results:
        endpoints.setdefault(item.endpoint_id, item.url)
    ordered = sorted(results, key=lambda item: (item.endpoint_id, item.result.case_id))
    counts = summary_counts(ordered)
    return {
        "format": REPORT_FORMAT,
        "tool": {"name": "kiln-verify", "version": tool_version},
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "created_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "endpoints": [{"id": key, "url": url} for key, url in sorted(endpoints.items())],
        "results": [item.to_json() for item in ordered],
        "summary": counts,
        "summary_line": summary_line(counts),
        "conforming": counts["FAILED"] == 0,
        "collectable": [entry.to_json() for entry in endpoint_collectable(ordered)],
    }


def write_report(
    path: str | None,
    results: list[RecordedResult],
    *,
    html_path: str | None = None,
    overwrite: bool = False,
) -> None:
    """Publish the JSON report and/or its HTML rendering, together or not at all.

    The HTML is rendered from the JSON bytes themselves, read back as
    ``kiln-verify openenv report --conformance`` reads a file, so the two can never
    disagree and rendering the file later gives the same bytes. Without ``overwrite`` an
    existing target is refused (``target_exists``); with it, replaced atomically.
    """
    from kiln_verify.core.jsonio import dumps_pretty, loads_object
    from kiln_verify.limits import REPORT_MAX_CONFORMANCE_BYTES
    from kiln_verify.openenv.collect.publish import publish_together
    from kiln_verify.records import validate_record
    from kiln_verify.report.conformance import conformance_document
    from kiln_verify.report.conformance_input import ConformanceReport
    from kiln_verify.report.engine import render

    data = dumps_pretty(build_report(results))
    files: list[tuple[str, bytes]] = []
    if path is not None:
        files.append((path, data))
    if html_path is not None:
        value = loads_object(data, max_bytes=REPORT_MAX_CONFORMANCE_BYTES)
        report = validate_record(ConformanceReport, value)
        files.append((html_path, render(conformance_document(report)).data))
    publish_together(files, force=overwrite)
