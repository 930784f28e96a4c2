"""The conformance report: verdicts per endpoint and case, summary counts, atomic publication.

The report is ``kiln.conformance-report.v1`` JSON, written once at the end of the run with
:func:`kiln_verify.core.publish.publish_bytes`, which never overwrites: an existing path is
refused up front by the plugin (a usage error naming the fix), so a report can never be
half-written or silently replace an earlier one.
"""

from __future__ import annotations

import datetime
import platform
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_kiln.cases import CaseResult

REPORT_FORMAT = "kiln.conformance-report.v1"
VERDICTS: tuple[str, ...] = ("OK", "NON-STRICT", "FAILED", "INFORMATIONAL", "SKIPPED")


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
    parts = [
        f"{counts['OK']} OK",
        f"{counts['NON-STRICT']} NON-STRICT",
        f"{counts['FAILED']} FAILED",
    ]
    for extra in ("INFORMATIONAL", "SKIPPED"):
        if counts.get(extra):
            parts.append(f"{counts[extra]} {extra}")
    return "kiln conformance: " + ", ".join(parts)


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
    }


def write_report(path: str, results: list[RecordedResult]) -> None:
    """Publish the report atomically; raises ``TargetExists`` if ``path`` appeared meanwhile."""
    from kiln_verify.core.jsonio import dumps_pretty
    from kiln_verify.core.publish import publish_bytes

    publish_bytes(path, dumps_pretty(build_report(results)))
