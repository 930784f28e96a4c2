"""The SFT route end to end on the tiny Qwen3.5 model (torch needed; a few seconds a run)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests import models

from .conftest import Runner
from .kit import make_bundle

pytest.importorskip("trl")

pytestmark = pytest.mark.slow

TRAIN_FLAGS = (
    "--learning-rate",
    "1e-2",
    "--lora-rank",
    "2",
    "--target-modules",
    "q_proj,in_proj_qkv",
    "--dtype",
    "float32",
    "--no-gradient-checkpointing",
    "--epochs",
    "1",
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory)


@pytest.fixture
def sft_bundle(tmp_path: Path, tiny_model: Path) -> Path:
    root = tmp_path / "sft_01.kiln-hf"
    make_bundle(root, tiny_model, tokenizer=(tiny_model / "tokenizer.json").read_bytes())
    return root


def _canonical(value: Any) -> bytes:
    return json.dumps(
        value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
    ).encode()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_sft_trains_and_publishes_the_result_last(
    sft_bundle: Path, tiny_model: Path, run_runner: Runner, tmp_path: Path
) -> None:
    pristine = {p.name for p in sft_bundle.iterdir()}
    run = run_runner(sft_bundle, *TRAIN_FLAGS, model=tiny_model)
    assert run.returncode == 0, run.stderr[-4000:]
    result_path = sft_bundle / "kiln_hf_result.json"
    assert run.status == {"result": str(result_path), "status": "complete"}
    assert {p.name for p in sft_bundle.iterdir()} - pristine == {
        "kiln_hf_result.json",
        "executed_train.py",
        "adapter_config.json",
        "adapter_model.safetensors",
    }
    raw = result_path.read_text()
    assert raw.endswith("}\n")
    result = json.loads(raw)
    export = json.loads((sft_bundle / "kiln_hf_export.json").read_text())
    body = {k: v for k, v in result.items() if k != "result_sha256"}
    assert result["result_sha256"] == _sha(_canonical(body))
    assert list(result) == [
        "schema_version",
        "result_type",
        "export_sha256",
        "task",
        "trainer",
        "effective_config",
        "output_adapter",
        "result_sha256",
    ]
    assert result["export_sha256"] == export["export_sha256"]
    assert result["task"] == "sft"
    trainer = result["trainer"]
    assert trainer["kind"] == "trl_sft_trainer"
    assert trainer["script"]["sha256"] == export["reference_script"]["sha256"]
    assert (sft_bundle / "executed_train.py").read_bytes() == (sft_bundle / "train.py").read_bytes()
    for key, name in (("config", "adapter_config.json"), ("model", "adapter_model.safetensors")):
        data = (sft_bundle / name).read_bytes()
        assert result["output_adapter"][key] == {
            "relative_path": name,
            "size_bytes": len(data),
            "sha256": _sha(data),
        }
    cfg = result["effective_config"]
    assert cfg["learning_rate"] == {"kind": "decimal", "value": "1e-2"}
    assert cfg["target_modules"] == {"kind": "text", "value": "q_proj,in_proj_qkv"}
    assert cfg["lora_rank"] == {"kind": "unsigned", "value": 2}
    assert cfg["dataset_rows"] == {"kind": "unsigned", "value": 2}
    assert cfg["platform_torch"] == {"kind": "boolean", "value": False}
    assert cfg["packing"]["value"] is False
    assert cfg["shuffle_dataset"]["value"] is False
    assert not any(p.name.startswith(f".{sft_bundle.name}.sft-work") for p in tmp_path.iterdir())

    # a trained copy is refused afterwards
    again = run_runner(sft_bundle, *TRAIN_FLAGS, model=tiny_model)
    assert again.returncode == 2
    assert "[existing-result]" in again.stderr

    # same seed, fresh copy left by an interrupted run (sentinel + partial outputs): the
    # residue is removed, training reruns and the adapter weights are byte-identical
    second = tmp_path / "second" / sft_bundle.name
    second.parent.mkdir()
    shutil.copytree(sft_bundle, second)
    (second / "kiln_hf_result.json").unlink()
    (second / "executed_train.py").unlink()
    (second / "adapter_model.safetensors").write_bytes(b"partial")
    (second / ".kiln_hf_result.incomplete").write_bytes(b"kiln.hf-trl-result.incomplete.v1\n")
    rerun = run_runner(second, *TRAIN_FLAGS, model=tiny_model)
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert not (second / ".kiln_hf_result.incomplete").exists()
    assert (second / "adapter_model.safetensors").read_bytes() == (
        sft_bundle / "adapter_model.safetensors"
    ).read_bytes()


def test_max_length_shorter_than_a_row_is_refused(
    sft_bundle: Path, tiny_model: Path, run_runner: Runner
) -> None:
    run = run_runner(sft_bundle, *TRAIN_FLAGS, "--max-length", "3", model=tiny_model)
    assert run.returncode == 2
    assert "[max-length]" in run.stderr
    assert not (sft_bundle / ".kiln_hf_result.incomplete").exists()
