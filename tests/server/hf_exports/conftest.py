"""One ``serve --model`` (the session's tiny model) per module, and the export inputs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kiln_verify.server.runner import ServerHandle
from tests import models
from tests.control.support import client_of, resident_config, running
from tests.hf.export.conftest import ROWS

pytest.importorskip("torch")
pytest.importorskip("jinja2")
pytest.importorskip("tokenizers")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return models.tiny_model(tmp_path_factory)


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("state")


@pytest.fixture(scope="module")
def server(state_dir: Path, tiny_model: Path) -> Iterator[ServerHandle]:
    with running(resident_config(state_dir, tiny_model)) as handle:
        yield handle


@pytest.fixture
def http(server: ServerHandle) -> Iterator[httpx.Client]:
    with client_of(server) as client:
        yield client


@pytest.fixture
def registry(state_dir: Path, http: httpx.Client) -> Iterator[Path]:
    """The registry directory, emptied through the API after each test."""
    root = state_dir / "hf-exports"
    yield root
    for entry in http.get("/v1/train/hf/exports").json().get("data", []):
        http.delete(f"/v1/train/hf/exports/{entry['name']}")


@pytest.fixture(scope="module")
def sft_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "messages.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return path
