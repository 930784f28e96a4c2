"""The gate on real model play: the tiny model itself, not a scripted arm, decides it.

The resident model is the session-shared tiny model warm-started on valid bandit actions
(tests/models.py). The candidate is that model as it is; the baseline is the same model
behind a random LoRA adapter (``kiln_verify.testing.lora``: random A and B) that wrecks its
replies, so every baseline episode is an invalid model action while the candidate pulls
real arms. The candidate is therefore really better on every seed it is paid on, and the
stage must find that out from the two collections alone and promote. Promotion hands the
adapter store a completed bundle, as the train kind hands it the trainer's (here the import
tests' shared bundle stands in: the point is the decision on real play), and the resident
model then serves it. Replies are capped at a few tokens so the 40 episodes stay cheap; the
warm model is the shared build the train-run and LLM-server lanes use.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.kinds.environment_eval import EvaluationJob
from kiln_verify.control.resident.store import install_adapter
from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy
from oracle.runner import ServerHandle
from tests import models
from tests.control.environment_eval.conftest import LANE, train_request
from tests.control.environment_eval.test_stage import GATE, Recorder
from tests.openenv.collect.options import make_controls

pytest.importorskip("torch")
pytest.importorskip("peft")

WRECK_SCALE = 200.0


def test_a_candidate_the_model_really_plays_better_is_promoted_then_served(
    bandits: tuple[ServerHandle, ServerHandle, ServerHandle],
    resident: ServerConfig,
    completed: tuple[Path, Path],
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
) -> None:
    url = bandits[0].base_url
    warm = models.warm_bandit_model(tmp_path_factory, url)
    wrecked = _wrecking_adapter(warm, tmp_path / "wrecked")
    request = train_request(url, GATE, output_adapter="played-v1")
    controls = make_controls(
        [url], **LANE, groups=request.groups, seed_start=request.seed_start, max_action_tokens=12
    )
    (tmp_path / "run").mkdir()
    job = EvaluationJob.from_request("run-eval-1", tmp_path / "run", request, controls)
    assert job is not None

    baseline = TransformersPolicy(warm, adapter_dir=wrecked)
    candidate = TransformersPolicy(warm)
    seen = Recorder(lambda: install_adapter(resident, bundle=completed[1], name="played-v1"))
    result = seen.run(job, baseline, candidate)

    evidence = result.receipt.evidence
    stats = result.section
    assert (evidence.decision, result.outcome) == ("passed", "promoted"), (
        str(evidence),
        str(stats.baseline_stats),
        str(stats.candidate_stats),
    )
    assert evidence.regressed_groups == 0
    assert evidence.improved_groups >= 5
    assert stats.baseline_stats is not None
    assert stats.candidate_stats is not None
    assert stats.baseline_stats.invalid_model_action_count == 20
    assert stats.candidate_stats.invalid_model_action_count == 0
    assert seen.promoted == 1
    assert asyncio.run(_served(resident))


def _wrecking_adapter(model: Path, directory: Path) -> Path:
    """A random LoRA adapter (``kiln_verify.testing.lora``) with its B matrices scaled up
    until the model's greedy replies are no longer actions (a plain random one leaves the
    tiny model's argmax where it was)."""
    import torch

    from kiln_verify.testing.lora import random_lora_model

    wrapped = random_lora_model(model, seed=11)
    with torch.no_grad():
        for name, parameter in wrapped.named_parameters():
            if "lora_B" in name:
                parameter.mul_(WRECK_SCALE)
    wrapped.save_pretrained(str(directory))
    return directory


async def _served(resident: ServerConfig) -> bool:
    from kiln_verify.control.resident.serving import served_policy, serves

    return serves(resident, "played-v1") and await served_policy(resident, "played-v1") is not None
