"""A random (non-zero B) PEFT LoRA adapter for the tiny model (torch + peft needed).

PEFT's default initialisation makes B zero, which would leave the logits unchanged and
so prove nothing about an adapter being applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["build_lora_adapter", "random_lora_model"]


def random_lora_model(model_dir: Path, *, seed: int = 7, rank: int = 4) -> Any:
    """The model with a LoRA adapter on ``q_proj``/``v_proj`` (``lora_alpha`` twice the
    rank) whose A and B matrices are random.

    ``init_lora_weights=False`` draws A and B at random (PEFT's default makes B zero, which
    would leave the logits unchanged and so prove nothing).
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        target_modules=["q_proj", "v_proj"],
        init_lora_weights=False,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(base, config)


def build_lora_adapter(model_dir: Path, directory: Path, *, seed: int = 7) -> Path:
    """Save :func:`random_lora_model`'s adapter (rank 4) into ``directory``."""
    model = random_lora_model(model_dir, seed=seed)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory))
    return directory
