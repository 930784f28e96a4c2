"""A train run end to end over a real socket: collect with the resident model, select,
export, the bundle's own ``train.py`` in a child, verify, keep the evidence, install."""

from __future__ import annotations

import httpx

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.resident.store import adapters_root
from oracle.runner import ServerHandle as OracleHandle
from tests.control.support import wait_terminal

from .conftest import OUTPUT, train_request


def test_a_train_run_completes_and_installs_its_adapter(
    http: httpx.Client, config: ServerConfig, bandit: OracleHandle
) -> None:
    created = http.post("/v1/openenv/runs", json=train_request(bandit.base_url))
    assert created.status_code == 202, created.text
    status = wait_terminal(http, created.json()["run_id"], timeout=300)
    assert status["state"] == "completed", status
    assert (adapters_root(config) / OUTPUT).is_dir()
