"""The throughput benchmark runs end to end (tiny workload; no assertion on the ratio).

Wall-clock numbers are never asserted in tests; this only proves that the benchmark starts
both servers as subprocesses, drives them, reports, and stops them again.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openenv")

# `benchmarks` is importable because pytest puts the repository root (above `tests/`) on sys.path.
from benchmarks import oracle_throughput

pytestmark = pytest.mark.interop


def test_benchmark_runs_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    status = oracle_throughput.main(
        [
            "--sessions",
            "2",
            "--episodes",
            "1",
            "--concurrency",
            "2",
            "--repeats",
            "1",
            "--floor",
            "--json",
        ]
    )
    assert status == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert any(line.startswith("sequential") for line in lines)
    assert any(line.startswith("target ours >= 2x openenv ") for line in lines)
    report = json.loads(lines[-1])
    assert report["benchmark"] == "oracle_throughput"
    assert report["steps_per_session"] == oracle_throughput.STEPS_PER_EPISODE
    assert isinstance(report["meets_target"], bool)
    assert isinstance(report["meets_target_same_compression"], bool)
    assert [row["mode"] for row in report["results"]] == ["sequential", "concurrent x2"]
    for row in report["results"]:
        assert list(row["servers"]) == ["ours", "openenv", "openenv-nodeflate", "floor"]
        for server in row["servers"].values():
            assert server["steps_per_s"] > 0
            assert len(server["samples"]) == 1
        assert list(row["ratios"]) == ["openenv", "openenv-nodeflate"]
        for ratio in row["ratios"].values():
            assert ratio["steps_per_s"] > 0
            assert isinstance(ratio["meets_target"], bool)


def test_workload_counts_steps() -> None:
    workload = oracle_throughput.Workload(sessions=3, episodes=2)
    assert workload.steps == 3 * 2 * oracle_throughput.STEPS_PER_EPISODE
