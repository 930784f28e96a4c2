"""``kiln-verify.conformance-report.v2``, the conformance suite's JSON report, read strictly.

The plugin (``pytest_kiln.report``) writes the file; this module is its reader, so a
report can be rendered later, elsewhere, from the file alone (``kiln-verify openenv report
--conformance PATH``). The file is not trusted: strict JSON under a size bound, closed
records (unknown keys are refused), and the file's own redundancy is checked: the
``summary`` counts, ``summary_line`` and ``conforming`` must be what ``results`` say, every
result's endpoint must be listed, one case keeps one level and clause, and ``collectable``
must be what :func:`~kiln_verify.report.collectable.collectable_verdicts` makes of the
results. Endpoint ids, URLs, details and measurement names are peer-influenced text and are
rendered escaped.

The format is kiln-verify's own: Kiln publishes no conformance-report schema (its
contracts are the three ``contracts/kiln-*.schema.json``), so v2 carries our name. v2 added
``collectable``, which a strict v1 reader would refuse, hence the new version. A v1 file
(``kiln.conformance-report.v1``, written before) is still read, without that verdict.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr

from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import RecordInvalid
from kiln_verify.limits import REPORT_MAX_CONFORMANCE_BYTES
from kiln_verify.openenv.verify.files import read_bounded
from kiln_verify.records import Record, validate_record
from kiln_verify.report.collectable import CollectableVerdict, collectable_verdicts

__all__ = [
    "CONFORMANCE_FORMAT",
    "LEGACY_CONFORMANCE_FORMAT",
    "LEVELS",
    "VERDICTS",
    "ConformanceReport",
    "ConformanceResult",
    "read_conformance_report",
    "summary_line",
]

CONFORMANCE_FORMAT: Final = "kiln-verify.conformance-report.v2"
LEGACY_CONFORMANCE_FORMAT: Final = "kiln.conformance-report.v1"
"""The format before the ``collectable`` verdict; still read, never written."""
VERDICTS: Final = ("OK", "NON-STRICT", "FAILED", "INFORMATIONAL", "SKIPPED")
"""Every verdict, in the order reports list them (the plugin's ``Verdict`` enum)."""
LEVELS: Final = ("MUST", "SHOULD", "MAY")

Verdict = Literal["OK", "NON-STRICT", "FAILED", "INFORMATIONAL", "SKIPPED"]
_Text = Annotated[StrictStr, Field(min_length=1)]


class ToolInfo(Record):
    name: _Text
    version: _Text


class EndpointInfo(Record):
    id: _Text
    url: _Text


class ConformanceResult(Record):
    """One case's verdict on one endpoint."""

    _omit_when_none = frozenset({"measurements"})

    endpoint: _Text
    url: _Text
    case: _Text
    level: Literal["MUST", "SHOULD", "MAY"]
    clause: _Text
    verdict: Verdict
    detail: StrictStr
    duration_s: Annotated[StrictFloat | StrictInt, Field(ge=0)]
    measurements: dict[StrictStr, StrictInt | StrictFloat] | None = None


class ConformanceReport(Record):
    """The whole report; ``collectable`` is present in v2 and absent in v1."""

    _omit_when_none = frozenset({"collectable"})

    format: Literal["kiln-verify.conformance-report.v2", "kiln.conformance-report.v1"]
    tool: ToolInfo
    python: StrictStr
    platform: StrictStr
    created_utc: StrictStr
    endpoints: list[EndpointInfo]
    results: list[ConformanceResult] = Field(min_length=1)
    summary: dict[Verdict, StrictInt]
    summary_line: StrictStr
    conforming: StrictBool
    collectable: list[CollectableVerdict] | None = None


def summary_line(counts: dict[str, int]) -> str:
    """``kiln conformance: 17 OK, 1 NON-STRICT, 0 FAILED`` (+ informational, skipped)."""
    parts = [
        f"{counts['OK']} OK",
        f"{counts['NON-STRICT']} NON-STRICT",
        f"{counts['FAILED']} FAILED",
    ]
    parts.extend(
        f"{counts[extra]} {extra}" for extra in ("INFORMATIONAL", "SKIPPED") if counts[extra]
    )
    return "kiln conformance: " + ", ".join(parts)


def _consistent(report: ConformanceReport, shown: str) -> None:
    def fail(rule: str) -> RecordInvalid:
        return RecordInvalid(f"ConformanceReport: {rule}", path=shown)

    counts = Counter(result.verdict for result in report.results)
    expected = {verdict: counts.get(verdict, 0) for verdict in VERDICTS}
    if report.summary != expected:
        raise fail("summary does not count the results' verdicts")
    if report.summary_line != summary_line(expected):
        raise fail("summary_line does not match the summary")
    if report.conforming != (expected["FAILED"] == 0):
        raise fail("conforming must be true exactly when no case FAILED")
    urls = {endpoint.id: endpoint.url for endpoint in report.endpoints}
    if len(urls) != len(report.endpoints):
        raise fail("an endpoint id is listed twice")
    seen: dict[str, tuple[str, str]] = {}
    pairs: set[tuple[str, str]] = set()
    for index, result in enumerate(report.results):
        if urls.get(result.endpoint) != result.url:
            raise fail(f"results[{index}] names an endpoint the report does not list")
        if seen.setdefault(result.case, (result.level, result.clause)) != (
            result.level,
            result.clause,
        ):
            raise fail(f"results[{index}]: case {result.case!r} changes its level or clause")
        if (result.endpoint, result.case) in pairs:
            raise fail(f"results[{index}]: a second verdict for the same endpoint and case")
        pairs.add((result.endpoint, result.case))
    if report.format == LEGACY_CONFORMANCE_FORMAT:
        if report.collectable is not None:
            raise fail(f"collectable is not part of {LEGACY_CONFORMANCE_FORMAT}")
        return
    if report.collectable is None:
        raise fail("collectable is missing")
    expected_verdicts = collectable_verdicts(
        (result.endpoint, result.case, result.verdict) for result in report.results
    )
    if report.collectable != expected_verdicts:
        raise fail("collectable is not what the results of the cases behind it say")


def read_conformance_report(path: str | os.PathLike[str]) -> ConformanceReport:
    """The report at ``path``, strictly validated (``json_*``, ``record_invalid``, path
    and ``limit_exceeded`` errors otherwise)."""
    shown = os.fspath(path)
    data = read_bounded(
        Path(path), max_bytes=REPORT_MAX_CONFORMANCE_BYTES, limit="REPORT_MAX_CONFORMANCE_BYTES"
    )
    value = loads_object(data, max_bytes=REPORT_MAX_CONFORMANCE_BYTES, source=shown)
    report = validate_record(ConformanceReport, value, source=shown)
    _consistent(report, shown)
    return report
