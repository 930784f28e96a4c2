"""Helpers for the control-plane tests: servers (in a thread or a real process), requests."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from kiln_verify.control.config import OpenEnvSettings, PolicySpec, ServerConfig
from kiln_verify.server.runner import ServerHandle, start_in_thread

TERMINAL = frozenset({"rollout_ready", "completed", "failed", "cancelled"})
READY_LINE = re.compile(r"listening on (http://\S+)")


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
    handle = start_in_thread(config(state_dir, **openenv))
    try:
        yield handle
    finally:
        handle.stop()


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
    deadline = time.monotonic() + timeout
    while True:
        status: dict[str, Any] = http.get(f"/v1/openenv/runs/{run_id}").json()
        if status["state"] in TERMINAL:
            return status
        assert time.monotonic() < deadline, f"run {run_id} stuck in {status['state']}"
        time.sleep(0.02)


def run_to_end(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    created = http.post("/v1/openenv/runs", json=body)
    assert created.status_code == 202, created.text
    return wait_terminal(http, created.json()["run_id"])


class ServeProcess:
    """``kiln-verify serve`` as a real child process (the console script's entry point)."""

    def __init__(self, state_dir: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        command = [
            sys.executable,
            "-c",
            "from kiln_verify.cli import main; main()",
            "serve",
            "--port",
            "0",
            "--state-dir",
            str(state_dir),
            *extra,
        ]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        found = READY_LINE.search(line)
        if found is None:
            self.process.kill()
            _, err = self.process.communicate(timeout=10)
            raise AssertionError(f"kiln-verify serve did not start: {line!r} {err[-2000:]}")
        self.url = found.group(1)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return self.process.returncode
