"""Fixtures of the route tests that need a trained adapter."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def completed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(tiny model, completed ``sft_01.kiln-hf``): the import tests' shared build."""
    from tests.hf.importer.conftest import model_and_bundle

    return model_and_bundle(tmp_path_factory)
