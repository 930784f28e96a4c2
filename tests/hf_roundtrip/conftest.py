"""Shared pieces of the HF/TRL round trips: the tiny model, a random input adapter, and
running an exported bundle's own ``train.py`` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import models

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("peft")

FLAGS = (
    "--learning-rate",
    "1e-2",
    "--dtype",
    "float32",
    "--no-gradient-checkpointing",
    "--seed",
    "7",
)
LORA = ("--lora-rank", "2", "--target-modules", "q_proj,in_proj_qkv")
GRPO = ("--batch-size", "2", "--beta", "0.04", "--scale-rewards", "group")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory)


@pytest.fixture(scope="session")
def input_adapter(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    """A LoRA on ``q_proj``/``v_proj`` with random (non-zero) B, named ``support-base``."""
    from kiln_verify.testing.lora import build_lora_adapter

    directory = tmp_path_factory.mktemp("adapter") / "support-base"
    return build_lora_adapter(tiny_model, directory, seed=3)


def run_train(bundle: Path, model: Path, *flags: str) -> str:
    """Run ``BUNDLE/train.py`` as the operator would (isolated interpreter); return stdout."""
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    script = str(bundle / "train.py")
    proc = subprocess.run(
        [sys.executable, "-I", script, str(bundle), "--base-model", str(model), *FLAGS, *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def run_refused(bundle: Path, model: Path, *flags: str) -> str:
    """Run ``BUNDLE/train.py --verify-only`` expecting a contract error (exit 2); stderr."""
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    script = str(bundle / "train.py")
    proc = subprocess.run(
        [sys.executable, "-I", script, str(bundle), "--base-model", str(model), *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout == ""
    return proc.stderr


def logit_delta(model: Path, adapter: Path) -> float:
    """Largest |logit change| the adapter makes on a fixed input; disabling the adapter must
    give the base model's logits exactly."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32)
    ids = torch.tensor([[1, 5, 9, 17, 33, 2]])
    with torch.no_grad():
        plain = base(input_ids=ids).logits.clone()
        tuned = PeftModel.from_pretrained(base, str(adapter))
        adapted = tuned(input_ids=ids).logits
        with tuned.disable_adapter():
            disabled = tuned(input_ids=ids).logits
    assert torch.equal(disabled, plain)
    return float((adapted - plain).abs().max().item())
