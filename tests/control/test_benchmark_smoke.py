"""The control-plane benchmark runs end to end at tiny sizes (its numbers are not asserted)."""

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
            "--size-mib",
            "2",
            "--rounds",
            "1",
            "--clients",
            "4",
            "--creation-rounds",
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
    download = report["download"]
    assert download["size_mib"] == 2
    assert download["ratio"] > 0
    assert len(download["rounds"]["client"]) == 1
    assert set(download["peak_rss_kib"]) == {"1 MiB", "2 MiB"}
    assert report["creation"]["requests"] == 4
    assert report["metrics"]["tracked_runs"] == 6
