"""The README's TRL example, run as a user runs it: its own process, its own output folder,
and the JSON it prints checked against the bundles it left on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo_openenv.py"


def test_the_example_trains_records_and_verifies_every_step(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    output = tmp_path / "demo"
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--output", str(output), "--steps", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout[done.stdout.index("{\n") :])
    assert result["status"] == "verified"
    bundles = sorted((output / "bundles" / "rank-00000").iterdir())
    assert [step["bundle"] for step in result["steps"]] == [str(b) for b in bundles]
    assert [b.name for b in bundles] == ["step-000001", "step-000002"]
    for step, bundle in zip(result["steps"], bundles, strict=True):
        assert (step["groups"], step["rollouts"], step["grpo_rows_verified"]) == (2, 4, 2)
        assert step["environment_exchanges"] >= 4
        assert sorted(p.name for p in bundle.iterdir()) == [
            "adapter",
            "grpo.train.jsonl",
            "openenv.replay.json",
            "openenv.rollout-summary.json",
            "openenv.rollouts.jsonl",
        ]
        assert step["bytes"] == sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())


def test_the_example_refuses_an_existing_output_folder(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--output", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])},
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert f"--output {tmp_path} already exists: give a new directory" in done.stderr
    assert "Traceback" not in done.stderr
