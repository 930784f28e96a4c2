"""The journal benchmark runs end to end with tiny counts (numbers: docs/performance.md).
Only the report's shape is checked, never a timing: the benchmark itself checks that the
merged bundle is the single-host bundle's bytes."""

from __future__ import annotations

import json

import pytest

from benchmarks import journal_overhead


def test_journal_overhead_runs(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--groups", "2", "--group-size", "2", "--steps", "1", "--rounds", "1", "--json"]
    assert journal_overhead.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["benchmark"] == "journal_overhead"
    assert len(report["plain_s"]) == len(report["journaled_s"]) == len(report["merge_s"]) == 1
    assert min(report["ratio"], report["cpu_ratio"], report["merge_over_verify"]) > 0


def test_journal_overhead_refuses_a_plan_that_cannot_be_split() -> None:
    with pytest.raises(SystemExit) as exit_info:
        journal_overhead.main(["--groups", "1"])
    assert exit_info.value.code == 2
