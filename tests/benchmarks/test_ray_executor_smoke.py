"""The Ray executor benchmark runs end to end in its quick form (numbers: docs/performance.md).
Only the report's shape is checked, never a timing: the benchmark itself checks that the
Ray executor's bundle is the single-process bundle's bytes in every round. About 3.5 s of
CPU (most of it the local Ray cluster's start), measured."""

from __future__ import annotations

import json

import pytest

from benchmarks import ray_executor


def test_ray_executor_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed")
    assert ray_executor.main(["--quick", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["benchmark"] == "ray_executor"
    assert report["workers"] == 2
    (row,) = report["rows"]
    assert len(row["single_s"]) == len(row["ray_s"]) == 1
    assert row["ray_over_single"] > 0
