"""A real OpenAI-compatible server for the ``openai`` policy: ``transformers serve``.

``transformers serve`` (transformers' own FastAPI server, the ``train`` extra's
``fastapi``/``uvicorn``/``openai`` packages) serves the tiny local Qwen3.5 model on a free
loopback port in a child process, once per test session. A random tiny model never emits
a valid action, so the model is first warm-started on valid bandit actions from a seeded
random-policy rollout (the qualification workload's own tool), and the bandit oracle it is
warm-started on is served in-process for the whole session too.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import models

pytest.importorskip("torch")
pytest.importorskip("fastapi")

STARTUP_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class LlmServer:
    """The served model: its OpenAI base URL (with ``/v1``), model id and directory."""

    base_url: str
    model: str
    directory: Path
    log: Path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _transformers_cli() -> str:
    found = Path(sys.executable).with_name("transformers")
    if found.exists():
        return str(found)
    located = shutil.which("transformers")
    if located is None:
        pytest.skip("the transformers console script is not installed (the train extra)")
    return located


@pytest.fixture(scope="session")
def bandit_url() -> Iterator[str]:
    from oracle.runner import ServerConfig, serve

    with serve([ServerConfig("bandit", max_sessions=8)]) as handles:
        yield handles[0].base_url


@pytest.fixture(scope="session")
def warm_model(tmp_path_factory: pytest.TempPathFactory, bandit_url: str) -> Path:
    """Built once per test session, shared by the modules of every worker (tests/models.py)."""
    return models.warm_bandit_model(tmp_path_factory, bandit_url)


@pytest.fixture(scope="session")
def llm_server(
    tmp_path_factory: pytest.TempPathFactory, warm_model: Path
) -> Iterator[LlmServer]:
    port = _free_port()
    log = tmp_path_factory.mktemp("serve-log") / "transformers-serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    argv = [_transformers_cli(), "serve", str(warm_model), "--host", "127.0.0.1",
            "--port", str(port), "--device", "cpu", "--dtype", "float32"]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"transformers serve exited {process.returncode}: "
                            f"{log.read_text(errors='replace')[-3000:]}")  # fmt: skip
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail("transformers serve did not answer /health in time")
                time.sleep(0.25)
        yield LlmServer(f"http://127.0.0.1:{port}/v1", str(warm_model), warm_model, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
