"""The `kiln` conformance suite against the openenv 0.10.0 peers.

The peers (`openenv_peers.py`) are served by openenv's own `create_app`: the reference
implementation of the protocol the suite checks. Every MUST case therefore has to pass
against them; a FAILED verdict here is a bug in the suite (or in our client), not in the
peer. Cases that cannot be probed (SKIPPED) or SHOULD cases that do not hold (NON-STRICT)
are listed exactly, so a change in either direction is noticed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv")

from pytest_kiln.cases import CASES

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
CASE_IDS = frozenset(case.id for case in CASES)

#: What a server without MCP tools cannot be probed for: none of these peers has tools
#: (tests/interop/test_conformance_behaviours.py covers an MCP tool environment).
NO_MCP_TOOLS = {
    case: "SKIPPED"
    for case in (
        "mcp.tools-list", "mcp.tools-call", "mcp.tools-call-without-name",
        "mcp.tools-call-unknown", "mcp.ws-route", "mcp.step-list-tools", "mcp.step-call-tool",
    )
}
#: peer key -> {case id: verdict} for every case that is not OK against that peer. The
#: capacity probe (64 sessions by default) reaches the peers' limits of 8 and 1.
NOT_OK: dict[str, dict[str, str]] = {
    "counter": NO_MCP_TOOLS,
    "bandit": NO_MCP_TOOLS,
    "algebra": NO_MCP_TOOLS,
    "capacity": NO_MCP_TOOLS,
}


def run_suite(url: str, report: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "kiln",
            "--kiln-openenv-url",
            url,
            "--pyargs",
            "pytest_kiln.conformance",
            "--kiln-report",
            str(report),
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.is_file(), process.stdout + process.stderr
    data: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return process, data


@pytest.mark.parametrize("key", sorted(NOT_OK))
def test_conformance_suite_against_openenv_peer(
    openenv_urls: dict[str, str], tmp_path: Path, key: str
) -> None:
    url = openenv_urls[key]
    process, report = run_suite(url, tmp_path / "r.json")
    output = process.stdout + process.stderr
    assert process.returncode == 0, output

    assert report["format"] == "kiln-verify.conformance-report.v2"
    assert report["endpoints"] == [{"id": url, "url": url}]
    verdicts = {row["case"]: row["verdict"] for row in report["results"]}
    assert set(verdicts) == CASE_IDS
    failed = {row["case"]: row["detail"] for row in report["results"] if row["verdict"] == "FAILED"}
    assert failed == {}, output
    assert {case: v for case, v in verdicts.items() if v != "OK"} == NOT_OK[key], output
    assert report["conforming"] is True
    expected_summary = {"OK": 0, "NON-STRICT": 0, "FAILED": 0, "INFORMATIONAL": 0, "SKIPPED": 0}
    for verdict in verdicts.values():
        expected_summary[verdict] += 1
    assert report["summary"] == expected_summary
    assert report["summary_line"] in output
