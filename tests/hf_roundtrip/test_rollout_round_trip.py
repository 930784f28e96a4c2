"""Recorded GRPO from a real rollout: ``openenv rollout --grpo-output`` against the embedded
oracle with the ``transformers`` policy, then export, the bundle's ``train.py``, completed
verification, import and a PEFT load with a LoRA delta.

A random tiny model never emits a valid bandit action, so every candidate would earn the
same penalty and every advantage would be zero; the model is the session-shared tiny model
warm-started (the qualification workload's own tool) on valid actions from a seeded
random-policy bandit rollout (tests/models.py: the train-run, dashboard and interop modules
use the same build, so it is trained once per session, not once more here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.hf.manifest import read_result
from oracle.runner import ServerHandle as OracleHandle
from tests import models

from .conftest import GRPO, LORA, logit_delta, run_train

pytestmark = pytest.mark.slow

ROLLOUT = ("openenv", "rollout", "--oracle", "bandit", "--group-size", "2", "--max-steps", "1")


def _invoke(*args: str) -> dict[str, Any]:
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output[-3000:]
    parsed: dict[str, Any] = json.loads(out.stdout)
    return parsed


def _files(directory: Path, stem: str) -> list[str]:
    return [
        "--output",
        str(directory / f"{stem}.rollouts.jsonl"),
        "--replay-output",
        str(directory / f"{stem}.replay.json"),
        "--summary-output",
        str(directory / f"{stem}.summary.json"),
    ]


def test_grpo_round_trip_from_a_live_rollout(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, bandit: OracleHandle
) -> None:
    model = models.warm_bandit_model(tmp_path_factory, bandit.base_url)

    corpus = tmp_path / "grpo.jsonl"
    _invoke(*ROLLOUT, "--policy", "transformers", "--policy-option", f"model_dir={model}",
            "--groups", "6", "--seed-start", "0", "--no-thinking",
            "--max-action-tokens", "16", "--concurrency", "1", *_files(tmp_path, "train"),
            "--grpo-output", str(corpus))  # fmt: skip
    _invoke("openenv", "verify", "--summary", str(tmp_path / "train.summary.json"))
    rows = corpus.read_bytes().splitlines(keepends=True)
    assert len(rows) == 6
    spread = [r for r in rows if len({c["reward"] for c in json.loads(r)["completions"]}) > 1]
    assert spread, "the warm-started model should earn different rewards within a group"

    archive = tmp_path / "live.kiln-hf.tar.gz"
    _invoke("hf", "export-grpo", "--model", str(model), "--file", str(corpus),
            "--name", "live", "--output", str(archive))  # fmt: skip
    bundle = tmp_path / "live.kiln-hf"
    assert (bundle / "train.jsonl").read_bytes() == corpus.read_bytes()
    assert json.loads(run_train(bundle, model, *LORA, *GRPO))["status"] == "complete"
    assert _invoke("hf", "verify", "--completed", str(bundle))["task"] == "grpo"
    result = read_result((bundle / "kiln_hf_result.json").read_bytes())
    assert result.effective_config["dataset_completions"].value == 12

    registry = tmp_path / "registry"
    registry.mkdir()
    _invoke("hf", "import-peft", "--bundle", str(bundle), "--name", "live-grpo",
            "--model", str(model), "--registry", str(registry))  # fmt: skip
    assert logit_delta(model, registry / "live-grpo") > 1e-6
