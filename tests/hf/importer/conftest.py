"""One completed SFT bundle (tiny Qwen3.5 model, export, two train.py steps) shared by the
import tests; every test copies what it changes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("peft")

from tests import models
from tests.hf.export.conftest import ROWS

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
    "--seed",
    "7",
)


@dataclass(frozen=True)
class Completed:
    model: Path
    bundle: Path
    """``sft_01.kiln-hf`` after ``train.py``: read-only by convention; copy to tamper."""


def train(bundle: Path, model: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    proc = subprocess.run(
        [
            sys.executable,
            "-I",
            str(bundle / "train.py"),
            str(bundle),
            "--base-model",
            str(model),
            *list(TRAIN_FLAGS),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]


def completed_sft_bundle(tmp_path_factory: pytest.TempPathFactory) -> Completed:
    """Exported and trained once per test session, shared by every worker (tests/models.py):
    the import tests, the resident-model tests and the evaluation stage's use it, and training
    is the expensive part."""
    from kiln_verify.hf.export import export_sft
    from kiln_verify.hf.export.source import ExportSource

    model = models.tiny_model(tmp_path_factory)

    def build(root: Path) -> None:
        root.mkdir(parents=True)
        data = root / "messages.jsonl"
        data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
        outcome = export_sft(
            ExportSource(model=model),
            dataset=data,
            name="sft_01",
            output=root / "sft_01.kiln-hf.tar.gz",
        )
        train(outcome.directory, model)

    key = "hf-import-completed-" + models.digest([ROWS, TRAIN_FLAGS, str(model)])
    root = models.shared_build(tmp_path_factory, key, build, name="hf_import")
    return Completed(model, root / "sft_01.kiln-hf")


def model_and_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(tiny model, completed ``sft_01.kiln-hf``) of :func:`completed_sft_bundle`, for the
    route and evaluation-stage fixtures outside this folder (skipped without the train
    extra)."""
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    pytest.importorskip("trl")
    built = completed_sft_bundle(tmp_path_factory)
    return built.model, built.bundle


def tree(root: Path) -> dict[str, bytes]:
    """Every entry beneath ``root`` with its bytes (directories as b'<dir>')."""
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = b"<dir>" if path.is_dir() else path.read_bytes()
    return out


@pytest.fixture
def bundle_copy(tmp_path: Path, completed: Completed) -> Path:
    return Path(shutil.copytree(completed.bundle, tmp_path / "copy" / completed.bundle.name))


@pytest.fixture(scope="session")
def completed(tmp_path_factory: pytest.TempPathFactory) -> Completed:
    return completed_sft_bundle(tmp_path_factory)
