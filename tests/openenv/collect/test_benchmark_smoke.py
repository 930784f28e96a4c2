"""The collector benchmark runs end to end with tiny counts."""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks._common import REPO_ROOT


def test_collect_overhead_runs() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.collect_overhead",
            "--groups",
            "2",
            "--group-size",
            "2",
            "--steps",
            "2",
            "--rounds",
            "1",
            "--json",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(result.stdout)
    assert report["benchmark"] == "collect_overhead"
    assert report["episodes_per_round"] == 4
    assert report["ratio"] > 0
    assert report["cpu_ratio"] > 0
    assert len(report["collector_cpu_s"]) == len(report["raw_cpu_s"]) == 1
