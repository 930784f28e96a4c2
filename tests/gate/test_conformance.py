"""The plugin's conformance suite (`pytest -p kiln ... --pyargs pytest_kiln.conformance`)
against every server the gate launched; no case may end FAILED."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.gate.support import requires_gate

pytestmark = requires_gate

SERVERS = 23


def test_conformance_suite_passes_against_every_server(all_urls: list[str], tmp_path: Path) -> None:
    assert len(all_urls) == SERVERS
    report = tmp_path / "conformance.json"
    command = [sys.executable, "-m", "pytest", "-p", "kiln", "-p", "no:cacheprovider", "-q"]
    for url in all_urls:
        command += ["--kiln-openenv-url", url]
    command += ["--pyargs", "pytest_kiln.conformance", "--kiln-report", str(report)]
    env = dict(os.environ, PYTEST_ADDOPTS="")
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    tail = (result.stdout + result.stderr)[-6000:]
    assert result.returncode == 0, tail
    summary = re.search(r"kiln conformance: .*\b(\d+) FAILED\b", result.stdout)
    assert summary is not None, tail
    assert summary.group(1) == "0", tail
    document = json.loads(report.read_text())
    assert document["summary"]["FAILED"] == 0, tail
    assert document["conforming"] is True
    failed = [item for item in document["results"] if item.get("verdict") == "FAILED"]
    assert failed == [], failed[:5]
    assert {item["url"] for item in document["results"]} == set(all_urls)
