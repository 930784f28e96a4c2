"""Turn a pristine export into a completed bundle without training (no torch needed)."""

from __future__ import annotations

import json
from pathlib import Path

from kiln_verify.core.digest import identify
from kiln_verify.hf.adapter_check import LORA_TARGETS, resident_modules
from kiln_verify.hf.manifest import (
    FileIdentity,
    TrainingResult,
    config_value,
    document_bytes,
    read_export,
)
from tests.hf.adapter_check.kit import safetensors_bytes


def write_adapter(bundle: Path, *, rank: int = 2, shape_rank: int | None = None) -> None:
    """A structurally valid LoRA adapter for the exported model (layer 0, its first
    projection); ``shape_rank`` gives the tensors another rank than the config's."""
    resident = resident_modules(json.loads((bundle / "kiln_model_config.json").read_bytes()))
    module = next(m for m in LORA_TARGETS if m in resident.layers[0])
    block = {"gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}.get(module)
    if block is None:
        block = "self_attn" if module in ("q_proj", "k_proj", "v_proj", "o_proj") else "linear_attn"
    inner, outer = resident.layers[0][module]
    r = rank if shape_rank is None else shape_rank
    prefix = f"base_model.model.model.layers.0.{block}.{module}"
    tensors = {
        f"{prefix}.lora_A.weight": ("F32", [r, inner]),
        f"{prefix}.lora_B.weight": ("F32", [outer, r]),
    }
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": 4,
        "target_modules": [module],
    }
    (bundle / "adapter_config.json").write_text(json.dumps(config))
    (bundle / "adapter_model.safetensors").write_bytes(safetensors_bytes(tensors))


def complete_bundle(
    bundle: Path, *, export_sha256: str | None = None, shape_rank: int | None = None
) -> TrainingResult:
    export = read_export((bundle / "kiln_hf_export.json").read_bytes())
    (bundle / "executed_train.py").write_bytes((bundle / "train.py").read_bytes())
    write_adapter(bundle, shape_rank=shape_rank)

    def ident(name: str) -> FileIdentity:
        return FileIdentity.from_artifact(identify(bundle, name, max_bytes=1 << 30))

    result = TrainingResult.create(
        export_sha256=export_sha256 or export.export_sha256,
        task=export.task,
        trainer={
            "kind": "trl_sft_trainer",
            "python_version": "3.11.9",
            "torch_version": "2.13.0+cpu",
            "transformers_version": "5.24.0",
            "trl_version": "1.16.0",
            "peft_version": "0.21.2",
            "script": ident("executed_train.py"),
        },
        effective_config={"seed": config_value(42)},
        output_adapter={
            "config": ident("adapter_config.json"),
            "model": ident("adapter_model.safetensors"),
        },
    )
    (bundle / "kiln_hf_result.json").write_bytes(document_bytes(result))
    return result
