"""The control-plane benchmark runs (its numbers are never asserted).

Only the metrics part runs here, at a tiny size: the download and creation parts start
several interpreters each and belong to `python -m benchmarks.control_plane`, not the suite.
"""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks._common import REPO_ROOT


def test_control_plane_benchmark_runs() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.control_plane",
            "--only",
            "metrics",
            "--size-mib",
            "1",
            "--tracked",
            "6",
            "--scrapes",
            "5",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(result.stdout)
    assert report["benchmark"] == "control_plane"
    assert set(report) >= {"metrics"}
    assert "download" not in report
    assert report["metrics"]["tracked_runs"] == 6
    assert report["metrics"]["ratio"] > 0
