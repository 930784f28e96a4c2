"""The behaviour adapter's snapshot: PEFT's own bytes (the skipped model card changes
nothing), set-valued config fields in one order whatever the hash seed, and the live model
left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kiln_verify.trl.identity import adapter_snapshot


def test_the_snapshot_is_peft_s_own_config_and_weights(tool_model: Path, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(3)
    base = AutoModelForCausalLM.from_pretrained(tool_model, local_files_only=True)
    config = LoraConfig(
        r=2,
        lora_alpha=4,
        target_modules=["v_proj", "q_proj", "o_proj", "k_proj"],  # PEFT keeps a set
        init_lora_weights=False,
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, config)
    snapshot = adapter_snapshot(model)
    assert "create_or_update_model_card" not in vars(model)

    model.save_pretrained(str(tmp_path / "peft"))  # PEFT's full save, model card included
    assert (tmp_path / "peft" / "README.md").is_file()
    assert snapshot.weights == (tmp_path / "peft" / "adapter_model.safetensors").read_bytes()
    assert snapshot.config == (tmp_path / "peft" / "adapter_config.json").read_bytes()
    targets = json.loads(snapshot.config)["target_modules"]
    assert targets == ["k_proj", "o_proj", "q_proj", "v_proj"]
    assert snapshot.content_sha256 == adapter_snapshot(model).content_sha256


def test_a_model_without_an_adapter_is_refused() -> None:
    from kiln_verify.errors import TrlBatchAmbiguous

    with pytest.raises(TrlBatchAmbiguous, match="no PEFT adapter"):
        adapter_snapshot(object())
