"""Recorded GRPO of multi-step episodes, end to end (issue 16).

The tiny model (prefix-preserving thinking template) is warm-started on maze actions, then
the ``transformers`` policy plays the maze for up to three steps per episode: some moves
are out of range (a recoverable ``EXECUTION_ERROR``, penalised, the episode continues) and
some replies are not actions (``invalid_model_action``). Thinking is off here: the tiny
model cannot learn to close its reasoning in a CPU-sized warm start, so every thinking
episode would earn the same penalty and no advantage would move the adapter; forced close
tokens are covered by ``tests/openenv/collect/test_grpo_multiturn.py`` and the replay
tests. ``rollout --grpo-output`` → ``hf export-grpo`` (token replay
of every stream) → the bundle's own ``train.py`` (``env_mask`` 0 on environment and
forced tokens) → ``hf verify --completed`` → ``hf import-peft`` → PEFT loads the adapter
and changes logits; a pristine copy trained again with the same seed publishes the same
adapter bytes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.hf.manifest import read_result

from .conftest import GRPO, LORA, logit_delta, run_train

pytestmark = pytest.mark.slow

STEPS = ("--max-steps", "3", "--no-thinking")


def _invoke(*args: str) -> dict[str, Any]:
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output[-3000:]
    parsed: dict[str, Any] = json.loads(out.stdout)
    return parsed


def _files(directory: Path, stem: str) -> list[str]:
    return ["--output", str(directory / f"{stem}.rollouts.jsonl"),
            "--replay-output", str(directory / f"{stem}.replay.json"),
            "--summary-output", str(directory / f"{stem}.summary.json")]  # fmt: skip


def corpus_figures(corpus: Path) -> dict[str, Any]:
    """Counts the round trip reports: rollouts, steps, tokens by kind, outcomes."""
    figures: dict[str, Any] = {"groups": 0, "rollouts": 0, "steps": [], "sampled": 0,
                               "forced": 0, "environment": 0, "prompt": 0,
                               "recoverable_errors": 0, "rewards": set()}  # fmt: skip
    for line in corpus.read_bytes().splitlines():
        group = json.loads(line)
        figures["groups"] += 1
        for completion in group["completions"]:
            figures["rollouts"] += 1
            trajectory = completion["trajectory"]
            figures["steps"].append(sum(s["kind"] == "action" for s in trajectory))
            figures["recoverable_errors"] += sum(
                '"recoverable":true' in s["content"] for s in trajectory
            )
            provenance = completion["provenance"]
            actions = provenance["action_tokens"]
            sampled = sum(a["source"] == "sampled" for a in actions)
            figures["sampled"] += sampled
            figures["forced"] += len(actions) - sampled
            count = provenance["prompt_token_count"]
            figures["prompt"] += count
            figures["environment"] += len(provenance["input_token_ids"]) - count - len(actions)
            figures["rewards"].add(completion["reward"])
    return figures


def test_multi_turn_grpo_round_trip(tmp_path: Path) -> None:
    from kiln_verify.testing.tiny_model import THINKING_CHAT_TEMPLATE, build_tiny_model, warm_start

    _invoke("openenv", "rollout", "--oracle", "maze", "--policy", "random", "--groups", "8",
            "--group-size", "2", "--max-steps", "1", "--no-thinking", "--seed-start", "1000",
            *_files(tmp_path, "bootstrap"))  # fmt: skip
    model = build_tiny_model(tmp_path / "model", THINKING_CHAT_TEMPLATE)
    warm_start(model, tmp_path / "bootstrap.rollouts.jsonl", steps=80)

    corpus = tmp_path / "grpo.jsonl"
    _invoke("openenv", "rollout", "--oracle", "maze", "--policy", "transformers",
            "--policy-option", f"model_dir={model}", "--groups", "4", "--group-size", "2",
            "--seed-start", "0", *STEPS, "--max-action-tokens", "16", "--concurrency", "1",
            *_files(tmp_path, "train"), "--grpo-output", str(corpus))  # fmt: skip
    _invoke("openenv", "verify", "--summary", str(tmp_path / "train.summary.json"))
    figures = corpus_figures(corpus)
    assert figures["rollouts"] == 8
    assert max(figures["steps"]) >= 3
    assert figures["recoverable_errors"] >= 1
    assert figures["environment"] > 0
    assert len(figures["rewards"]) > 1
    print("round trip figures:", {k: v for k, v in figures.items() if k != "rewards"})

    archive = tmp_path / "turns.kiln-hf.tar.gz"
    _invoke("hf", "export-grpo", "--model", str(model), "--file", str(corpus),
            "--name", "turns", "--output", str(archive))  # fmt: skip
    bundle = tmp_path / "turns.kiln-hf"
    pristine = Path(shutil.copytree(bundle, tmp_path / "copy" / "turns.kiln-hf"))
    assert json.loads(run_train(bundle, model, *LORA, *GRPO))["status"] == "complete"
    assert _invoke("hf", "verify", "--completed", str(bundle))["task"] == "grpo"
    result = read_result((bundle / "kiln_hf_result.json").read_bytes())
    config = result.effective_config
    assert config["dataset_completions"].value == 8
    assert config["dataset_forced_action_tokens"].value == figures["forced"]
    assert config["dataset_sampled_action_tokens"].value == figures["sampled"]

    registry = tmp_path / "registry"
    registry.mkdir()
    _invoke("hf", "import-peft", "--bundle", str(bundle), "--name", "turns-grpo",
            "--model", str(model), "--registry", str(registry))  # fmt: skip
    delta = logit_delta(model, registry / "turns-grpo")
    print("max |logit delta|:", delta)
    assert delta > 1e-6

    assert json.loads(run_train(pristine, model, *LORA, *GRPO))["status"] == "complete"
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        assert (pristine / name).read_bytes() == (bundle / name).read_bytes(), name
