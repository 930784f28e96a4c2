"""The conformance report: a strict reader, the matrix and findings, and the plugin's options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import KilnError
from kiln_verify.report import engine
from kiln_verify.report.conformance_input import read_conformance_report
from tests.pytest_kiln.kilnkit import CONFORMANCE
from tests.report.conftest import assert_conformance_refused
from tests.report.pages import elements

pytest_plugins = ["pytester"]


def test_matrix_and_findings(conformance_file: Path) -> None:
    page = engine.conformance_report(conformance_file).data.decode()
    text = " ".join(elements(page).text)
    assert "Not conforming: 1 MUST case verdicts FAILED." in text
    # each finding is linked from the matrix, in report order
    assert '<a href="#finding-1">FAILED</a>' in page
    assert '<a href="#finding-2">NON-STRICT</a>' in page
    assert '<a href="#finding-3">INFORMATIONAL</a>' in page
    assert page.count('<details open id="finding-') == 3
    assert "FAILED: error.unknown-type on alpha" in text
    assert "capacity_retries" in text
    assert "no schema-valid action" in text  # skipped, with its reason
    assert "docs/openenv-protocol.md §2.4" in text
    assert "<script>document.title" in text  # the failure's evidence, as text
    assert "script" not in elements(page).tags


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        (lambda d: d.update(extra=1), "Extra inputs"),
        (lambda d: d["summary"].update(OK=4), "summary does not count"),
        (lambda d: d.update(conforming=True), "summary_line|conforming"),
        (lambda d: d["results"][0].update(endpoint="gamma"), "does not list"),
        (lambda d: d["results"][3].update(level="SHOULD"), "changes its level"),
        (lambda d: d["results"][0].update(verdict="PASSED"), "verdict"),
        (lambda d: d.update(format="kiln.conformance-report.v2"), "format"),
    ],
)
def test_the_reader_refuses_what_is_not_a_report(tmp_path: Path, change: Any, rule: str) -> None:
    assert_conformance_refused(tmp_path, change, rule)


def test_the_reader_refuses_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "dup.json"
    path.write_text('{"format": 1, "format": 2}')
    with pytest.raises(KilnError) as failure:
        read_conformance_report(path)
    assert failure.value.code == "json_duplicate_key"


def test_the_plugin_writes_json_and_html_that_agree(pytester: pytest.Pytester) -> None:
    report, page = pytester.path / "c.json", pytester.path / "c.html"
    result = pytester.runpytest_inprocess(
        "-p",
        "kiln",
        "--kiln-oracle",
        "counter",
        "-k",
        "health or invalid_json",
        "--kiln-report",
        str(report),
        "--kiln-report-html",
        str(page),
        *CONFORMANCE,
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "endpoint*OK*NON-STRICT*FAILED*INFORMATIONAL*SKIPPED*conforming*collectable",
            "oracle-counter*1*0*0*0*0*yes*-",
            f"kiln report written to {report}",
            f"kiln report written to {page}",
        ]
    )
    # rendering the JSON file later gives exactly the page the run wrote
    assert engine.conformance_report(report).data == page.read_bytes()
    assert json.loads(report.read_text())["summary"]["OK"] == 1


def test_existing_reports_are_refused_unless_overwrite(pytester: pytest.Pytester) -> None:
    page = pytester.path / "c.html"
    page.write_text("old")
    args = ["-p", "kiln", "--kiln-oracle", "counter", "-k", "health", *CONFORMANCE]
    refused = pytester.runpytest_inprocess(*args, "--kiln-report-html", str(page))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--kiln-report-html*already exists*--kiln-report-overwrite*"])
    assert page.read_text() == "old"
    replaced = pytester.runpytest_inprocess(
        *args, "--kiln-report-html", str(page), "--kiln-report-overwrite"
    )
    replaced.assert_outcomes(passed=1)
    assert page.read_text().startswith("<!DOCTYPE html>")
