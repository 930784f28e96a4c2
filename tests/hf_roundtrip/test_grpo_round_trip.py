"""Recorded GRPO end to end: a corpus sampled by the real ``transformers`` policy, exported,
trained by the bundle's own ``train.py`` (one step), verified completed, imported, loaded
with PEFT with a measurable logit delta; the same seed gives byte-identical weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.hf.importer import INSTALLED_FILES, verify_installed
from kiln_verify.hf.manifest import grpo_row_bytes, read_result
from kiln_verify.hf.manifest.read import read_export

from .conftest import GRPO, LORA, logit_delta, run_train

pytestmark = pytest.mark.slow


def _cli(*args: str) -> tuple[int, dict[str, Any]]:
    out = CliRunner().invoke(app, ["hf", *args, "--json"])
    return out.exit_code, json.loads(out.stdout)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    """2 groups x 2 completions recorded by ``TransformersPolicy`` (canonical JSONL)."""
    from tests.hf.grpo_corpus import recorded_groups

    groups = recorded_groups(tiny_model, groups=2, width=2)
    path = tmp_path_factory.mktemp("corpus") / "groups.jsonl"
    path.write_bytes(b"".join(grpo_row_bytes(g) for g in groups))
    return path


def test_recorded_grpo_round_trip(tmp_path: Path, tiny_model: Path, recorded: Path) -> None:
    archive = tmp_path / "grpo_01.kiln-hf.tar.gz"
    code, made = _cli(
        "export-grpo",
        "--model",
        str(tiny_model),
        "--file",
        str(recorded),
        "--name",
        "grpo_01",
        "--output",
        str(archive),
    )
    assert code == 0, made
    bundle = tmp_path / "grpo_01.kiln-hf"
    pristine = Path(shutil.copytree(bundle, tmp_path / "again" / "grpo_01.kiln-hf"))
    assert (bundle / "train.jsonl").read_bytes() == recorded.read_bytes()

    out = run_train(bundle, tiny_model, *LORA, *GRPO)
    assert json.loads(out)["status"] == "complete"
    code, verified = _cli("verify", "--completed", str(bundle))
    assert code == 0, verified
    assert verified["task"] == "grpo"
    assert verified["kind"] == "completed"
    result = read_result((bundle / "kiln_hf_result.json").read_bytes())
    config = result.effective_config
    assert result.trainer.kind == "trl_grpo_trainer"
    assert config["dataset_groups"].value == 2
    assert config["dataset_completions"].value == 4
    assert config["num_generations"].value == 2
    assert config["kl_reference_policy"].value == "base_model"
    assert config["input_adapter"].value is False

    registry = tmp_path / "registry"
    registry.mkdir()
    code, report = _cli(
        "import-peft",
        "--bundle",
        str(bundle),
        "--name",
        "grpo-v1",
        "--model",
        str(tiny_model),
        "--registry",
        str(registry),
    )
    assert code == 0, report
    installed = registry / "grpo-v1"
    assert sorted(p.name for p in installed.iterdir()) == sorted(INSTALLED_FILES)
    assert verify_installed(installed).receipt.task == "grpo"
    assert logit_delta(tiny_model, installed) > 1e-6

    # the same seed on a fresh copy of the export: byte-identical adapter and result
    run_train(pristine, tiny_model, *LORA, *GRPO)
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        assert (pristine / name).read_bytes() == (bundle / name).read_bytes(), name
    again = read_result((pristine / "kiln_hf_result.json").read_bytes())
    assert again.output_adapter == result.output_adapter
    assert read_export((pristine / "kiln_hf_export.json").read_bytes()).export_sha256 == (
        result.export_sha256
    )
