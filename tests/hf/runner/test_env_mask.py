"""Environment tokens carry no policy gradient in the runner's recorded-GRPO route.

The runner feeds TRL the recorded sequence with ``env_mask`` 1 only on sampled action
positions. Changing the behaviour log-probabilities TRL is handed at every other position
(the environment turns between actions and the forced thinking-budget close tokens) must
leave the loss and every gradient bit-identical; changing them at sampled positions must
not (they are pi_old of the importance ratio).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("peft")

from kiln_verify.hf.export import export_grpo
from kiln_verify.hf.export.source import ExportSource
from kiln_verify.hf.runner import train
from kiln_verify.testing.tiny_model import THINKING_CHAT_TEMPLATE
from tests import models
from tests.hf.grpo_corpus import write_groups
from tests.tokens.stream_corpus import stream_groups


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, train.GroupCursor, list[str]]:
    root = tmp_path_factory.mktemp("mask")
    model = models.tiny_model(tmp_path_factory, THINKING_CHAT_TEMPLATE)
    groups = stream_groups(model, 2, thinking=True, budget=2)
    outcome = export_grpo(
        ExportSource(model=model),
        dataset=write_groups(root / "g.jsonl", groups),
        name="m",
        output=root / "m.kiln-hf.tar.gz",
    )  # fmt: skip
    args = train.build_parser().parse_args([
        str(outcome.directory), "--base-model", str(model), "--beta", "0", "--dtype", "float32",
        "--lora-rank", "2", "--target-modules", "q_proj,in_proj_qkv", "--batch-size", "1",
        "--no-gradient-checkpointing", "--seed", "3"])  # fmt: skip
    bundle = train.load_bundle(str(outcome.directory))
    work = root / "work"
    work.mkdir()
    stats = train.snapshot_grpo_corpus(bundle, str(work))
    cursor = train.GroupCursor(str(work), stats.dataset)
    run = train.build_grpo_trainer(args, bundle, str(work), stats, cursor)
    return run.trainer, cursor, stats.prompts


Perturb = Callable[[list[float], list[int]], list[float]]


def loss_and_grads(
    recorded: tuple[Any, train.GroupCursor, list[str]], perturb: Perturb
) -> tuple[Any, dict[str, Any], int]:
    import torch

    trainer, cursor, prompts = recorded
    cursor.rows = None  # always the first recorded group
    source = trainer.rollout_func
    touched = 0

    def rollout(batch: list[Any], owner: Any) -> dict[str, Any]:
        nonlocal touched
        out: dict[str, Any] = copy.deepcopy(source(batch, owner))
        for index, (logprobs, mask) in enumerate(zip(out["logprobs"], out["env_mask"],
                                                     strict=True)):  # fmt: skip
            out["logprobs"][index] = perturb(list(logprobs), list(mask))
            touched += sum(a != b for a, b in zip(logprobs, out["logprobs"][index], strict=True))
        return out

    trainer.rollout_func = rollout
    try:
        torch.manual_seed(0)
        batch = trainer._generate_and_score_completions([{"prompt": prompts[0]} for _ in "ab"])
        trainer.model.zero_grad()
        trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train per step
        loss = trainer.compute_loss(trainer.model, batch)
        loss.backward()
    finally:
        trainer.rollout_func = source
    grads = {
        name: param.grad.detach().clone()
        for name, param in trainer.model.named_parameters()
        if param.requires_grad and param.grad is not None
    }
    return loss.detach().clone(), grads, touched


def _environment(logprobs: list[float], mask: list[int]) -> list[float]:
    """Other finite values at every masked position. (TRL masks by multiplying, so a
    ratio that overflows to inf would still poison the loss as inf * 0; the runner never
    hands TRL anything but 0.0 there, see ``completion_record``.)"""
    return [lp if m else -3.0 - 0.01 * i for i, (lp, m) in enumerate(zip(logprobs, mask,
                                                                        strict=True))]  # fmt: skip


def _sampled(logprobs: list[float], mask: list[int]) -> list[float]:
    return [lp - 0.75 if m else lp for lp, m in zip(logprobs, mask, strict=True)]


def test_environment_log_probs_do_not_move_loss_or_gradients(
    recorded: tuple[Any, train.GroupCursor, list[str]],
) -> None:
    import torch

    loss, grads, untouched = loss_and_grads(recorded, lambda lp, mask: lp)
    assert untouched == 0
    assert grads
    assert any(bool(g.abs().sum() > 0) for g in grads.values())
    env_loss, env_grads, touched = loss_and_grads(recorded, _environment)
    assert touched > 50  # environment turns and forced close tokens of both completions
    assert torch.equal(env_loss, loss)
    assert env_grads.keys() == grads.keys()
    assert all(torch.equal(env_grads[name], grads[name]) for name in grads)


def test_sampled_log_probs_do_contribute(
    recorded: tuple[Any, train.GroupCursor, list[str]],
) -> None:
    import torch

    loss, grads, _ = loss_and_grads(recorded, lambda lp, mask: lp)
    moved_loss, moved_grads, touched = loss_and_grads(recorded, _sampled)
    assert touched > 0
    assert not torch.equal(moved_loss, loss)
    assert any(not torch.equal(moved_grads[name], grads[name]) for name in grads)
