"""The suite-wall benchmark runs end to end on one small test module (numbers:
docs/performance.md, "Test suite wall time"). Only the report's shape and counts are checked,
never a timing: both sides are this checkout, the candidate with one test deselected."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks import suite_wall

MODULE = "tests/core/test_limits.py"


def test_suite_wall_benchmark_smoke(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    deselect = tmp_path / "later.txt"
    deselect.write_text(f"# one test\n{MODULE}::test_every_bound_is_documented\n", encoding="utf-8")
    argv = [
        "--baseline", str(suite_wall.REPO_ROOT), "--baseline-python", sys.executable,
        "--candidate-args", "-q -p no:cacheprovider", "--deselect-file", str(deselect),
        "--rounds", "1", "--logs", str(tmp_path / "logs"), "--json", "--", MODULE,
    ]  # fmt: skip
    assert suite_wall.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert [run["side"] for run in report["runs"]] == ["baseline", "candidate"]
    baseline, candidate = report["runs"]
    assert baseline["exit"] == candidate["exit"] == 0
    assert candidate["counts"]["deselected"] == 1
    assert baseline["tests"] == candidate["tests"] + 1
    assert min(baseline["wall_s"], candidate["wall_s"], report["wall_ratio"]) > 0
    assert all(len(run["calibration_s"]) == 2 for run in report["runs"])
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "00-baseline.log", "01-candidate.log"]  # fmt: skip


def test_the_rounds_alternate_which_side_runs_first() -> None:
    assert suite_wall.order(3) == ["baseline", "candidate", "candidate", "baseline",
                                   "baseline", "candidate"]  # fmt: skip


def test_a_baseline_without_an_interpreter_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    with pytest.raises(SystemExit, match=r"\.venv/bin/python does not exist"):
        suite_wall.main(["--baseline", str(tmp_path)])
