"""The TRL recording benchmark runs end to end at its smoke shape (numbers: docs/performance.md).

Only the report's shape is checked, never a timing: both arms train (the hand-written
``environment_factory`` and kiln-verify's factory with the recorder, plus ``every=2``), the
recorded arms publish one bundle per recorded step with all three parts, and the scratch
directory is removed. The benchmark runs in a child process: it sets torch's thread count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
pytest.importorskip("datasets")

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_trl_recording_benchmark_runs(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.trl_recording", "--quick", "--json",
         "--tmpdir", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    report = json.loads(out.stdout)
    assert report["benchmark"] == "trl_recording"
    assert list(tmp_path.iterdir()) == []  # the scratch directory is gone
    assert set(report["arms"]) == {"baseline", "kiln", "kiln_every2"}
    assert report["shape"]["optimizer_steps"] == 2
    for summary in report["arms"].values():
        assert len(summary["wall_s"]) == report["repeats"] == 1
        assert summary["steps_per_s"] > 0
        assert summary["sampled_tokens_per_step"] > 0
    for arm, recorded in (("kiln", 2), ("kiln_every2", 1)):
        summary = report["arms"][arm]
        assert summary["recorded_steps_per_run"] == recorded
        parts = summary["bytes_per_recorded_step"]
        assert min(parts["openenv"], parts["corpus"], parts["adapter"]) > 0
        assert abs(parts["total"] - (parts["openenv"] + parts["corpus"] + parts["adapter"])) <= 3
        ratios = report["ratios"][arm]
        assert min(ratios["ratio"], ratios["per_token_ratio"], ratios["cpu_ratio"]) > 0
        assert isinstance(ratios["met"], bool)
