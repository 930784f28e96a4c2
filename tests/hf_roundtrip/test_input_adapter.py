"""Training from an exported input adapter: SFT and recorded GRPO start from the adapter
(its shape, not new LoRA flags), GRPO's KL reference is the frozen initial adapter, and
only the trained adapter is published."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.core.digest import hash_file
from kiln_verify.hf.export import export_grpo, export_sft
from kiln_verify.hf.export.source import ExportSource
from kiln_verify.hf.grpo_scan import behaviour_adapter
from kiln_verify.hf.manifest import FileIdentity, read_result
from kiln_verify.hf.verify import verify_hf_path
from tests.hf.export.conftest import ROWS
from tests.hf.grpo_corpus import synthetic_groups, write_groups

from .conftest import GRPO, run_refused, run_train

pytestmark = pytest.mark.slow


def _tensors(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return dict(load_file(str(path)))


def _check_trained_from(adapter: Path, bundle: Path) -> None:
    """Same LoRA shape as the input adapter, different (trained) weights, no extra adapter."""
    import torch

    config = json.loads((bundle / "adapter_config.json").read_text())
    source = json.loads((adapter / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"]) == (source["r"], source["lora_alpha"]) == (4, 8)
    assert config["target_modules"] == sorted(source["target_modules"]) == ["q_proj", "v_proj"]
    trained = _tensors(bundle / "adapter_model.safetensors")
    initial = _tensors(adapter / "adapter_model.safetensors")
    assert sorted(trained) == sorted(initial)
    assert not any(".ref." in key for key in trained)
    assert any(not torch.equal(trained[key], initial[key]) for key in trained)


def test_sft_trains_the_exported_input_adapter(
    tmp_path: Path, tiny_model: Path, input_adapter: Path
) -> None:
    data = tmp_path / "messages.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    outcome = export_sft(
        ExportSource(model=tiny_model, input_adapter=input_adapter),
        dataset=data,
        name="sft_a",
        output=tmp_path / "sft_a.kiln-hf.tar.gz",
    )
    bundle = outcome.directory
    refused = run_refused(bundle, tiny_model, "--verify-only", "--lora-rank", "2")
    assert "lora-flags" in refused
    run_train(bundle, tiny_model)
    assert verify_hf_path(bundle, completed=True).kind == "completed"
    config = read_result((bundle / "kiln_hf_result.json").read_bytes()).effective_config
    assert config["input_adapter"].value is True
    assert not {"lora_rank", "lora_alpha", "lora_dropout", "target_modules"} & config.keys()
    _check_trained_from(input_adapter, bundle)


def _behaviour(adapter: Path) -> dict[str, str]:
    def ident(name: str) -> FileIdentity:
        found = hash_file(adapter / name, max_bytes=1 << 30)
        return FileIdentity(
            relative_path=f"input_adapter/{name}",
            size_bytes=found.size_bytes,
            sha256=str(found.sha256),
        )

    return behaviour_adapter(
        adapter.name, ident("adapter_model.safetensors"), ident("adapter_config.json")
    )


def test_recorded_grpo_trains_the_exported_input_adapter(
    tmp_path: Path, tiny_model: Path, input_adapter: Path
) -> None:
    groups = synthetic_groups(tiny_model, 2, adapter=_behaviour(input_adapter))
    corpus = write_groups(tmp_path / "groups.jsonl", groups)
    outcome = export_grpo(
        ExportSource(model=tiny_model, input_adapter=input_adapter),
        dataset=corpus,
        name="grpo_a",
        output=tmp_path / "grpo_a.kiln-hf.tar.gz",
    )
    bundle = outcome.directory
    refused = run_refused(
        bundle, tiny_model, "--verify-only", "--batch-size", "2", "--target-modules", "q_proj"
    )
    assert "lora-flags" in refused
    run_train(bundle, tiny_model, *GRPO)
    assert verify_hf_path(bundle, completed=True).task == "grpo"
    config = read_result((bundle / "kiln_hf_result.json").read_bytes()).effective_config
    assert config["input_adapter"].value is True
    assert config["kl_reference_policy"].value == "initial_adapter"
    assert config["beta"].value == "0.04"
    assert not {"lora_rank", "lora_alpha", "lora_dropout", "target_modules"} & config.keys()
    _check_trained_from(input_adapter, bundle)
