"""A tiny Qwen3.5 model and a real PEFT LoRA adapter saved on it (built once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln_verify.hf.adapter_check import LORA_TARGETS
from tests import models


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return models.tiny_model(tmp_path_factory)


@pytest.fixture(scope="session")
def peft_adapter(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """All ten supported targets, r=4, saved by peft itself."""
    pytest.importorskip("peft")
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        target_modules=list(LORA_TARGETS),
    )
    out = tmp_path_factory.mktemp("adapter") / "adapter"
    get_peft_model(model, config).save_pretrained(str(out))
    return out
