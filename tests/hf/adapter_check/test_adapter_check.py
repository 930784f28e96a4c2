"""check_adapter on a real PEFT adapter, and each rule broken once with its exact message."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import AdapterUnloadable, KilnError, snippet
from kiln_verify.hf.adapter_check import (
    LORA_TARGETS,
    check_adapter,
    check_adapter_config,
    resident_modules,
)
from kiln_verify.limits import MAX_LORA_RANK

from .kit import DELETE, edit_config, rewrite_adapter, safetensors_bytes, tensors_of

PREFIX = "base_model.model.model.layers"
Q_A = f"{PREFIX}.1.self_attn.q_proj.lora_A.weight"
Q_B = f"{PREFIX}.1.self_attn.q_proj.lora_B.weight"


def unloadable(adapter: Path, model: Path | None = None, **kw: Any) -> str:
    with pytest.raises(AdapterUnloadable) as caught:
        check_adapter(adapter, model, **kw)
    assert caught.value.code == "adapter_unloadable"
    return caught.value.rule


@pytest.fixture
def adapter(peft_adapter: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(peft_adapter, tmp_path / "adapter"))


def test_real_peft_adapter_passes(peft_adapter: Path, tiny_model: Path) -> None:
    summary = check_adapter(peft_adapter, tiny_model)
    assert summary.config.r == 4
    assert summary.config.lora_alpha == 8
    assert summary.config.target_modules == LORA_TARGETS
    assert summary.config.base_model_name_or_path == str(tiny_model)
    assert summary.dtypes == {"F32"}
    assert (0, "in_proj_qkv") in summary.modules
    assert (1, "q_proj") in summary.modules
    assert (0, "q_proj") not in summary.modules  # layer 0 is linear attention
    assert len(summary.modules) == 13


def test_matches_peft_shapes_on_real_model(peft_adapter: Path, tiny_model: Path) -> None:
    """resident_modules() agrees with the nn.Linear shapes transformers builds."""
    import torch
    from transformers import AutoModelForCausalLM

    resident = resident_modules(json.loads((tiny_model / "config.json").read_text()))
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    actual: dict[tuple[int, str], tuple[int, int]] = {}
    for name, module in model.named_modules():
        parts = name.split(".")
        if isinstance(module, torch.nn.Linear) and parts[-1] in LORA_TARGETS:
            actual[(int(parts[2]), parts[-1])] = (module.in_features, module.out_features)
    computed = {
        (i, name): feats for i, layer in enumerate(resident.layers) for name, feats in layer.items()
    }
    assert computed == actual


def test_bf16_and_subset_targets_pass(adapter: Path, tiny_model: Path) -> None:
    edit_config(adapter, target_modules=["q_proj"], r=2)
    rewrite_adapter(
        adapter, adapter.parent / "a2", {Q_A: ("BF16", [2, 64]), Q_B: ("BF16", [128, 2])}
    )
    assert check_adapter(adapter.parent / "a2", tiny_model).modules == ((1, "q_proj"),)


def test_wrong_rank_tensor(adapter: Path, tiny_model: Path) -> None:
    tensors = tensors_of(adapter / "adapter_model.safetensors")
    tensors[Q_A] = ("F32", [3, 64])
    bad = rewrite_adapter(adapter, adapter.parent / "bad", tensors)
    assert unloadable(bad, tiny_model) == (
        f"tensor {snippet(Q_A)}: shape [3, 64] but lora_A of q_proj on the resident model"
        " needs [4, 64] (r=4, in=64, out=128)"
    )


def test_missing_lora_b(adapter: Path, tiny_model: Path) -> None:
    tensors = tensors_of(adapter / "adapter_model.safetensors")
    del tensors[Q_B]
    bad = rewrite_adapter(adapter, adapter.parent / "bad", tensors)
    assert unloadable(bad, tiny_model) == (
        f"tensor {snippet(Q_A)}: lora_B of layer 1 q_proj is missing (A/B pairing)"
    )


def test_missing_lora_a(adapter: Path, tiny_model: Path) -> None:
    tensors = tensors_of(adapter / "adapter_model.safetensors")
    del tensors[Q_A]
    bad = rewrite_adapter(adapter, adapter.parent / "bad", tensors)
    assert "lora_A of layer 1 q_proj is missing" in unloadable(bad, tiny_model)


def test_layer_beyond_model(adapter: Path, tiny_model: Path) -> None:
    tensors = tensors_of(adapter / "adapter_model.safetensors")
    name = f"{PREFIX}.2.mlp.up_proj.lora_A.weight"
    tensors[name] = ("F32", [4, 64])
    bad = rewrite_adapter(adapter, adapter.parent / "bad", tensors)
    assert unloadable(bad, tiny_model) == (
        f"tensor {snippet(name)}: layer 2 is beyond the resident model's 2 hidden layers"
    )


def test_module_absent_on_layer_type(adapter: Path, tiny_model: Path) -> None:
    tensors = tensors_of(adapter / "adapter_model.safetensors")
    name = f"{PREFIX}.0.self_attn.q_proj.lora_A.weight"
    tensors[name] = ("F32", [4, 64])
    tensors[name.replace("lora_A", "lora_B")] = ("F32", [128, 4])
    bad = rewrite_adapter(adapter, adapter.parent / "bad", tensors)
    assert unloadable(bad, tiny_model) == (
        f"tensor {snippet(name)}: layer 0 of the resident model has no q_proj"
    )


def test_unsupported_target_module_in_config(adapter: Path, tiny_model: Path) -> None:
    edit_config(adapter, target_modules=["q_proj", "in_proj_b"])
    assert unloadable(adapter, tiny_model) == (
        "target module 'in_proj_b' is not one of the supported " + ",".join(LORA_TARGETS)
    )


def test_unsupported_module_tensor(adapter: Path, tiny_model: Path) -> None:
    tensors = tensors_of(adapter / "adapter_model.safetensors")
    name = f"{PREFIX}.0.linear_attn.in_proj_b.lora_A.weight"
    tensors[name] = ("F32", [4, 64])
    bad = rewrite_adapter(adapter, adapter.parent / "bad", tensors)
    assert unloadable(bad, tiny_model) == (
        f"tensor {snippet(name)}: module 'in_proj_b' is not a supported target"
    )


def test_tensor_outside_target_modules(adapter: Path, tiny_model: Path) -> None:
    edit_config(adapter, target_modules=["q_proj", "k_proj"])
    assert unloadable(adapter, tiny_model).endswith("is not in target_modules")


def test_foreign_tensor_name(adapter: Path, tiny_model: Path) -> None:
    tensors = tensors_of(adapter / "adapter_model.safetensors")
    tensors["base_model.model.lm_head.weight"] = ("F32", [384, 64])
    bad = rewrite_adapter(adapter, adapter.parent / "bad", tensors)
    assert unloadable(bad, tiny_model).startswith(
        "tensor 'base_model.model.lm_head.weight': not a LoRA weight of a supported projection"
    )


def test_integer_dtype(adapter: Path, tiny_model: Path) -> None:
    tensors = tensors_of(adapter / "adapter_model.safetensors")
    tensors[Q_A] = ("I32", [4, 64])
    bad = rewrite_adapter(adapter, adapter.parent / "bad", tensors)
    assert (
        unloadable(bad, tiny_model) == f"tensor {snippet(Q_A)}: dtype I32 is not F16, BF16 or F32"
    )


def test_bigger_resident_model(peft_adapter: Path, tiny_model: Path) -> None:
    config = json.loads((tiny_model / "config.json").read_text())
    config["hidden_size"] = 128
    rule = unloadable(peft_adapter, model_config=config)
    assert rule.endswith("needs [4, 128] (r=4, in=128, out=96)")
    assert rule.startswith(
        f"tensor '{PREFIX}.0.linear_attn.in_proj_qkv.lora_A.weight': shape [4, 64]"
    )


def test_model_dir_config_read(peft_adapter: Path, tiny_model: Path, tmp_path: Path) -> None:
    other = tmp_path / "model"
    other.mkdir()
    config = json.loads((tiny_model / "config.json").read_text())
    config["num_hidden_layers"] = 1
    config["layer_types"] = ["linear_attention"]
    (other / "config.json").write_text(json.dumps(config))
    assert "layer 1 is beyond the resident model's 1 hidden layers" in unloadable(
        peft_adapter, other
    )


def test_malformed_header_keeps_code(adapter: Path, tiny_model: Path) -> None:
    weights = adapter / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes() + b"\0")
    rule = unloadable(adapter, tiny_model)
    assert rule.startswith("safetensors_invalid: the tensors cover")
    assert rule.endswith("(trailing bytes are not allowed)")


def test_adapter_config_duplicate_key(adapter: Path, tiny_model: Path) -> None:
    (adapter / "adapter_config.json").write_text('{"r": 4, "r": 8}')
    assert unloadable(adapter, tiny_model) == "json_duplicate_key: duplicate object key 'r'"


def test_no_lora_tensors(adapter: Path, tiny_model: Path) -> None:
    (adapter / "adapter_model.safetensors").write_bytes(safetensors_bytes({}, {"format": "pt"}))
    assert unloadable(adapter, tiny_model) == "the adapter has no LoRA tensors"


def test_missing_files_keep_path_codes(adapter: Path, tiny_model: Path) -> None:
    (adapter / "adapter_model.safetensors").unlink()
    with pytest.raises(KilnError) as caught:
        check_adapter(adapter, tiny_model)
    assert caught.value.code == "path_missing"


BASE: dict[str, Any] = {
    "peft_type": "LORA",
    "task_type": "CAUSAL_LM",
    "r": 4,
    "lora_alpha": 8,
    "target_modules": ["q_proj"],
}


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"peft_type": "LOHA"}, "peft_type is 'LOHA', not 'LORA'"),
        ({"task_type": "SEQ_CLS"}, "task_type is 'SEQ_CLS', not 'CAUSAL_LM'"),
        ({"r": 0}, f"r must be an integer in 1..MAX_LORA_RANK={MAX_LORA_RANK}"),
        ({"r": MAX_LORA_RANK + 1}, f"r must be an integer in 1..MAX_LORA_RANK={MAX_LORA_RANK}"),
        ({"r": True}, f"r must be an integer in 1..MAX_LORA_RANK={MAX_LORA_RANK}"),
        ({"r": 4.0}, f"r must be an integer in 1..MAX_LORA_RANK={MAX_LORA_RANK}"),
        ({"lora_alpha": 0}, "lora_alpha must be a positive number"),
        ({"lora_alpha": "8"}, "lora_alpha must be a positive number"),
        ({"lora_dropout": 1.5}, "lora_dropout must be a number in 0..1"),
        ({"target_modules": "q_proj"}, "target_modules must be a non-empty list of module names"),
        ({"target_modules": []}, "target_modules must be a non-empty list of module names"),
        ({"target_modules": ["q_proj", "q_proj"]}, "target_modules lists a module twice"),
        (
            {"target_modules": ["all-linear"]},
            "target module 'all-linear' is not one of the supported " + ",".join(LORA_TARGETS),
        ),
        ({"base_model_name_or_path": 3}, "base_model_name_or_path must be a string or null"),
        ({"bias": "all"}, "bias 'all' is unsupported (only 'none')"),
        ({"r": DELETE}, "adapter_config.json has no 'r'"),
        (
            {"init_lora_weights": "pissa"},
            "init_lora_weights 'pissa' is unsupported"
            " (methods that rewrite the base weights cannot be imported)",
        ),
        (
            {"use_dora": True},
            "unsupported PEFT feature 'use_dora' = 'True' (must be absent, null, false, {} or [])",
        ),
        (
            {"modules_to_save": ["lm_head"]},
            "unsupported PEFT feature 'modules_to_save' = \"['lm_head']\""
            " (must be absent, null, false, {} or [])",
        ),
        (
            {"rank_pattern": {"q_proj": 8}},
            "unsupported PEFT feature 'rank_pattern' = \"{'q_proj': 8}\""
            " (must be absent, null, false, {} or [])",
        ),
        ({"alpha_pattern": {"q_proj": 8}}, "unsupported PEFT feature 'alpha_pattern' = "),
        ({"use_rslora": True}, "unsupported PEFT feature 'use_rslora' = 'True'"),
        ({"layers_to_transform": [0]}, "unsupported PEFT feature 'layers_to_transform' = '[0]'"),
        ({"some_future_feature": 1}, "unsupported PEFT feature 'some_future_feature' = '1'"),
    ],
)
def test_config_rules(changes: dict[str, Any], rule: str) -> None:
    config = dict(BASE)
    for key, value in changes.items():
        if value is DELETE:
            del config[key]
        else:
            config[key] = value
    with pytest.raises(AdapterUnloadable) as caught:
        check_adapter_config(config)
    assert caught.value.rule.startswith(rule)


def test_neutral_and_free_keys_pass() -> None:
    config = dict(
        BASE,
        lora_alpha=16.5,
        use_dora=False,
        modules_to_save=None,
        rank_pattern={},
        layers_pattern=[],
        peft_version="0.21.2",
        inference_mode=True,
        init_lora_weights="gaussian",
        base_model_name_or_path=None,
    )
    assert check_adapter_config(config).lora_alpha == 16.5


QWEN3 = {
    "model_type": "qwen3",
    "num_hidden_layers": 3,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
}


def test_plain_attention_family() -> None:
    resident = resident_modules(QWEN3)
    assert len(resident.layers) == 3
    assert resident.layers[2] == {
        "q_proj": (64, 128),
        "k_proj": (64, 64),
        "v_proj": (64, 64),
        "o_proj": (128, 64),
        "gate_proj": (64, 96),
        "up_proj": (64, 96),
        "down_proj": (96, 64),
    }
    llama = dict(QWEN3, model_type="llama")
    del llama["head_dim"]
    assert resident_modules(llama).layers[0]["k_proj"] == (64, 32)


def test_qwen3_5_defaults_and_nested_text_config() -> None:
    text = dict(
        QWEN3,
        model_type="qwen3_5_text",
        num_hidden_layers=8,
        linear_num_key_heads=2,
        linear_key_head_dim=8,
        linear_num_value_heads=4,
        linear_value_head_dim=8,
    )
    resident = resident_modules({"model_type": "qwen3_5", "text_config": text})
    kinds = ["q_proj" in layer for layer in resident.layers]
    assert kinds == [False, False, False, True] * 2  # every 4th layer is full attention
    assert resident.layers[3]["q_proj"] == (64, 256)
    assert resident.layers[0]["in_proj_qkv"] == (64, 2 * 16 + 32)


@pytest.mark.parametrize(
    ("config", "rule"),
    [
        ({"model_type": "qwen3_moe"}, "resident model type 'qwen3_moe' is not supported"),
        ({"model_type": "qwen3_5"}, "resident model config: qwen3_5 without a text_config"),
        (dict(QWEN3, hidden_size=0), "resident model config: hidden_size must be a positive"),
        (
            dict(QWEN3, model_type="qwen3_5_text", layer_types=["full_attention"]),
            "resident model config: layer_types must list every hidden layer",
        ),
    ],
)
def test_resident_config_rules(config: dict[str, Any], rule: str) -> None:
    with pytest.raises(AdapterUnloadable) as caught:
        resident_modules(config)
    assert caught.value.rule.startswith(rule)
