"""The recorded-GRPO route end to end on the tiny Qwen3.5 model (torch needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kiln_verify.hf.runner import train

from .conftest import Runner
from .kit import make_bundle, recorded_grpo_groups

pytest.importorskip("trl")

FLAGS = (
    "--learning-rate",
    "1e-2",
    "--lora-rank",
    "2",
    "--target-modules",
    "q_proj",
    "--dtype",
    "float32",
    "--no-gradient-checkpointing",
    "--batch-size",
    "2",
    "--beta",
    "0.04",
    "--epsilon-high",
    "0.28",
    "--scale-rewards",
    "group",
)


def test_completion_record_masks_forced_and_environment_tokens() -> None:
    record = train.completion_record(
        {
            "input_token_ids": [10, 20, 21],
            "prompt_token_count": 1,
            "action_tokens": [
                {
                    "sequence_index": 1,
                    "token_id": 20,
                    "source": "sampled",
                    "behavior_logprob": -0.5,
                },
                {"sequence_index": 2, "token_id": 21, "source": "forced", "behavior_logprob": None},
            ],
        }
    )
    assert record["prompt_ids"] == [10]
    assert record["completion_ids"] == [20, 21]
    assert record["logprobs"] == [-0.5, 0.0]
    assert record["env_mask"] == [1, 0]


@pytest.mark.parametrize(
    "actions",
    [
        [],
        [{"sequence_index": 0, "token_id": 10, "source": "sampled", "behavior_logprob": -1.0}],
        [{"sequence_index": 1, "token_id": 99, "source": "sampled", "behavior_logprob": -1.0}],
        [{"sequence_index": 1, "token_id": 20, "source": "sampled", "behavior_logprob": 0.5}],
        [{"sequence_index": 1, "token_id": 20, "source": "forced", "behavior_logprob": None}],
    ],
)
def test_completion_record_rejects_bad_actions(actions: list[object]) -> None:
    with pytest.raises(train.ContractError, match="grpo-corpus"):
        train.completion_record(
            {"input_token_ids": [10, 20], "prompt_token_count": 1, "action_tokens": actions}
        )


@pytest.mark.slow
def test_recorded_grpo_trains_and_publishes(tmp_path: Path, run_runner: Runner) -> None:
    from kiln_verify.testing.tiny_model import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    root = tmp_path / "grpo_01.kiln-hf"
    export = make_bundle(
        root,
        model,
        task="grpo",
        grpo_rows=recorded_grpo_groups(),
        tokenizer=(model / "tokenizer.json").read_bytes(),
    )
    run = run_runner(root, *FLAGS, model=model)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.status["status"] == "complete"
    result = json.loads((root / "kiln_hf_result.json").read_text())
    assert result["task"] == "grpo"
    assert result["export_sha256"] == export["export_sha256"]
    assert result["trainer"]["kind"] == "trl_grpo_trainer"
    cfg = result["effective_config"]
    assert cfg["num_generations"] == {"kind": "unsigned", "value": 2}
    assert cfg["per_device_train_batch_size"] == {"kind": "unsigned", "value": 4}
    assert cfg["dataset_groups"] == {"kind": "unsigned", "value": 2}
    assert cfg["dataset_completions"] == {"kind": "unsigned", "value": 4}
    assert cfg["dataset_forced_action_tokens"] == {"kind": "unsigned", "value": 2}
    assert cfg["dataset_sampled_action_tokens"] == {"kind": "unsigned", "value": 9}
    assert cfg["max_completion_length"] == {"kind": "unsigned", "value": 4}
    assert cfg["kl_reference_policy"] == {"kind": "text", "value": "base_model"}
    assert cfg["epsilon_high"] == {"kind": "decimal", "value": "0.28"}
    assert (root / "adapter_model.safetensors").stat().st_size > 0
    assert not (root / ".kiln_hf_result.incomplete").exists()
    assert not any(p.name.startswith(".grpo_01.kiln-hf.grpo-work") for p in tmp_path.iterdir())
