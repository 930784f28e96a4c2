"""One control plane with a resident model for the train-run tests (docs/training-runs.md).

The resident model is the session-shared tiny model warm-started on valid bandit actions
(the same shared build as tests/llm_server's: a random tiny model never emits a valid
action, so every reward would be the same penalty and training selection would keep
nothing). The server runs in a thread of this process over real sockets, once per module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")

from kiln_verify.control.config import ServerConfig
from kiln_verify.server.runner import ServerHandle
from oracle.runner import ServerHandle as OracleHandle
from tests import models
from tests.control import support
from tests.control.support import TERMINAL, client_of, resident_config, running

OUTPUT = "bandit-grpo.v1"

#: How often a train test asks for its run's status. A train run takes 10-30 s (collection,
#: a trainer child importing torch, an evaluation), and each ask is a request this process
#: both sends and serves (~1 ms of CPU, measured on a rollout's status):
#: ``tests.control.support.wait_terminal``'s 20 ms poll asked up to ~50 times a second.
POLL_S = 0.25


def wait_terminal(http: httpx.Client, run_id: str, timeout: float = 600.0) -> dict[str, Any]:
    """The run's terminal status (``tests.control.support.wait_terminal`` at ``POLL_S``)."""
    return wait_state(http, run_id, TERMINAL, timeout)


def wait_state(
    http: httpx.Client, run_id: str, states: frozenset[str], timeout: float = 300.0
) -> dict[str, Any]:
    """``tests.control.support.wait_state`` at ``POLL_S``."""
    return support.wait_state(http, run_id, states, timeout, poll=POLL_S)


def train_request(bandit_url: str, **fields: Any) -> dict[str, Any]:
    """The smallest train run that trains: 4 groups of 2 one-step episodes."""
    body: dict[str, Any] = {
        "kind": "train",
        "environment_urls": [bandit_url],
        "output_adapter": OUTPUT,
        "groups": 4,
        "group_size": 2,
        "max_steps": 1,
        "concurrency": 1,
        "max_action_tokens": 16,
        "thinking": False,
        "capacity_wait_seconds": 5,
        "training_config": {"learning_rate": 0.01, "lora_rank": 2, "lora_alpha": 4},
    }
    body.update(fields)
    return body


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory, bandit: OracleHandle) -> Path:
    return models.warm_bandit_model(tmp_path_factory, bandit.base_url)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, model: Path) -> ServerConfig:
    state = tmp_path_factory.mktemp("train") / "state"
    return resident_config(state, model)


@pytest.fixture(scope="module")
def server(config: ServerConfig) -> Iterator[ServerHandle]:
    with running(config) as handle:
        yield handle


@pytest.fixture(scope="module")
def http(server: ServerHandle) -> Iterator[httpx.Client]:
    with client_of(server) as client:
        yield client
