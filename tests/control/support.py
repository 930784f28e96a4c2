"""Helpers for the control-plane tests: servers in a thread, requests, waiting for a run.

``kiln-verify serve`` as a real child process is :class:`kiln_verify.testing.serve.ServeProcess`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from kiln_verify.control.config import OpenEnvSettings, PolicySpec, ServerConfig
from kiln_verify.server.runner import ServerHandle, start_in_thread

TERMINAL = frozenset({"rollout_ready", "completed", "failed", "cancelled"})


def config(state_dir: Path, **openenv: Any) -> ServerConfig:
    policies = openenv.pop("policies", None)
    settings = dataclasses.replace(OpenEnvSettings(), **openenv)
    base = ServerConfig(host="127.0.0.1", port=0, state_dir=state_dir, openenv=settings)
    if policies is not None:
        base = dataclasses.replace(base, policies={"base": PolicySpec("random"), **policies})
    return base


@contextmanager
def control_server(state_dir: Path, **openenv: Any) -> Iterator[ServerHandle]:
    """The control plane in a thread of this process (real sockets), stopped on exit."""
    with running(config(state_dir, **openenv)) as handle:
        yield handle


def resident_config(state_dir: Path, model: Path) -> ServerConfig:
    """``serve --model DIR``'s configuration on an ephemeral port."""
    from kiln_verify.control.sections.model import ModelSettings

    return ServerConfig(host="127.0.0.1", port=0, state_dir=state_dir, model=ModelSettings(model))


@contextmanager
def running(settings: ServerConfig) -> Iterator[ServerHandle]:
    """Any configuration's control plane in a thread (real sockets), stopped on exit."""
    handle = start_in_thread(settings)
    try:
        yield handle
    finally:
        handle.stop()


@contextmanager
def client_of(handle: ServerHandle, timeout: float = 120) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=handle.base_url, trust_env=False, timeout=timeout) as client:
        yield client


def small_request(environment_url: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "environment_urls": [environment_url],
        "groups": 1,
        "group_size": 2,
        "max_steps": 2,
        "concurrency": 2,
        "capacity_wait_seconds": 5,
    }
    body.update(fields)
    return body


def wait_terminal(http: httpx.Client, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
    return wait_state(http, run_id, TERMINAL, timeout)


def wait_state(
    http: httpx.Client,
    run_id: str,
    states: frozenset[str],
    timeout: float = 60.0,
    poll: float = 0.02,
) -> dict[str, Any]:
    """The run's status once its state is one of ``states``; fails after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        status: dict[str, Any] = http.get(f"/v1/openenv/runs/{run_id}").json()
        if status["state"] in states:
            return status
        assert time.monotonic() < deadline, f"run {run_id} stuck in {status['state']}"
        time.sleep(poll)


def run_to_end(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    created = http.post("/v1/openenv/runs", json=body)
    assert created.status_code == 202, created.text
    return wait_terminal(http, created.json()["run_id"])
