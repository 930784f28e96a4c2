"""Fixtures for the export/verify tests: the tiny Qwen3.5 model (built once) and datasets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests import models

pytest.importorskip("torch")
pytest.importorskip("jinja2")
pytest.importorskip("tokenizers")

ROWS = [
    {
        "messages": [
            {"role": "user", "content": "two plus two"},
            {"role": "assistant", "content": "the answer is four"},
        ]
    },
    {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "the arm"},
            {"role": "assistant", "content": "pull the arm"},
        ]
    },
]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory)


@pytest.fixture
def model_dir(tmp_path: Path, tiny_model: Path) -> Path:
    """A private copy, so a test may change the model's files."""
    return Path(shutil.copytree(tiny_model, tmp_path / "model"))


@pytest.fixture
def sft_file(tmp_path: Path) -> Path:
    path = tmp_path / "messages.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return path


@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    """One pristine SFT export (directory), shared read-only; copy before tampering."""
    from kiln_verify.hf.export import export_sft
    from kiln_verify.hf.export.source import ExportSource

    out = tmp_path_factory.mktemp("exported")
    data = out / "messages.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    outcome = export_sft(
        ExportSource(model=tiny_model),
        dataset=data,
        name="base_01",
        output=out / "base_01.kiln-hf.tar.gz",
    )
    return outcome.directory
