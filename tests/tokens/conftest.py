"""The tiny Qwen3.5 model the token-stream tests render and replay through."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import models

pytest.importorskip("torch")
pytest.importorskip("jinja2")
pytest.importorskip("tokenizers")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory)
