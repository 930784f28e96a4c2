"""The verify-run benchmark runs end to end on two tiny run directories (numbers:
docs/performance.md). Only the report's shape is checked, never a timing: the benchmark
builds run directories that verify (its child asserts the run was read), times every
measured command and removes its scratch directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import verify_run

KEYS = {
    "groups", "build_s", "files", "total_mib", "sha256sum_s", "verify_run_s", "ratio",
    "sha256sum_cpu_s", "verify_run_cpu_s", "cpu_ratio", "cli_s", "cli_ratio",
    "verify_bundle_s", "verify_bundle_cpu_s", "run_over_bundle_cpu",
}  # fmt: skip


def test_verify_run_benchmark_smoke(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["--groups", "4", "--small-fraction", "0.5", "--pad", "0", "--rounds", "1"]
    assert verify_run.main([*argv, "--tmpdir", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(tmp_path.iterdir()) == []  # the scratch directory is gone
    assert [report["small"]["groups"], report["large"]["groups"]] == [2, 4]
    for row in report.values():
        assert set(row) == KEYS
        assert row["files"] == 4  # the bundle and run.json
        assert min(row["verify_run_s"], row["sha256sum_s"], row["ratio"]) > 0
    assert report["large"]["total_mib"] > report["small"]["total_mib"]


def test_verify_run_benchmark_refuses_a_run_without_groups() -> None:
    with pytest.raises(SystemExit) as exit_info:
        verify_run.main(["--groups", "1"])
    assert exit_info.value.code == 2
