"""Smoke test: the client-overhead benchmark runs end to end with a tiny N (no ratio check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_client_overhead_runs() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.client_overhead",
            "--episodes",
            "3",
            "--steps",
            "2",
            "--rounds",
            "2",
            "--json",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["benchmark"] == "client_overhead"
    assert result["exchanges_per_round"] == 9
    assert len(result["client_s"]) == len(result["raw_s"]) == 2
    assert result["ratio"] > 0
