"""What a control-plane case works with: the target, raw HTTP, small requests, waiting.

Checks talk plain HTTP (``httpx``, redirects never followed) so that status codes and
headers are observed exactly as a server sends them; nothing here trusts the server.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from kiln_verify.openenv.protocol.urls import verifies_tls
from pytest_kiln.cases.model import CheckFailed
from pytest_kiln.cases.outcome import answer_json

__all__ = ["TERMINAL", "ControlContext", "ControlTarget", "open_target"]

TERMINAL = frozenset({"rollout_ready", "completed", "failed", "cancelled"})
#: Seconds a run the suite starts may take to reach a terminal state.
RUN_TIMEOUT_S = 90.0
#: Seconds between status polls.
POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class ControlTarget:
    """The server under test and three environments: working, slow, and unreachable."""

    url: str
    environment_url: str
    slow_environment_url: str
    dead_environment_url: str


def _dead_loopback_url() -> str:
    """A loopback port nothing listens on (bound, then released)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


@contextmanager
def open_target(url: str, environment: str | None) -> Iterator[ControlTarget]:
    """Start the loopback oracles the cases need unless ``environment`` is given."""
    base = url.rstrip("/")
    if environment is not None:
        yield ControlTarget(base, environment, environment, _dead_loopback_url())
        return
    from oracle.runner import ServerConfig, serve

    configs = [ServerConfig("bandit"), ServerConfig("bandit", faults=("delay-step=0.2",))]
    with serve(configs) as (fast, slow):
        yield ControlTarget(base, fast.base_url, slow.base_url, _dead_loopback_url())


class ControlContext:
    """One case's HTTP client and helpers; close with :meth:`close`."""

    def __init__(self, target: ControlTarget) -> None:
        self.target = target
        self.http = httpx.Client(
            base_url=target.url,
            follow_redirects=False,
            trust_env=False,
            timeout=60.0,
            verify=verifies_tls(target.url),
        )

    def close(self) -> None:
        self.http.close()

    @staticmethod
    def key() -> str:
        return f"kiln-conformance:{uuid.uuid4().hex}"

    def request(self, **fields: Any) -> dict[str, Any]:
        """A small rollout request against the working environment, fields overridden."""
        body: dict[str, Any] = {
            "environment_urls": [self.target.environment_url],
            "groups": 1,
            "group_size": 2,
            "max_steps": 2,
            "concurrency": 2,
            "capacity_wait_seconds": 10,
        }
        body.update(fields)
        return body

    def create(self, body: dict[str, Any], *, expect: int | None = 202) -> dict[str, Any]:
        response = self.http.post("/v1/openenv/runs", json=body)
        if expect is not None and response.status_code != expect:
            raise CheckFailed(
                f"POST /v1/openenv/runs answered {response.status_code}, expected {expect}: "
                f"{response.text[:200]}"
            )
        document = self.json(response)
        if not isinstance(document, dict):
            raise CheckFailed("POST /v1/openenv/runs did not answer a JSON object")
        return document

    json = staticmethod(answer_json)

    def status(self, run_id: str) -> dict[str, Any]:
        response = self.http.get(f"/v1/openenv/runs/{run_id}")
        if response.status_code != 200:
            raise CheckFailed(f"GET status of {run_id} answered {response.status_code}")
        document = self.json(response)
        if not isinstance(document, dict):
            raise CheckFailed("a run status is not a JSON object")
        return document

    def wait_terminal(self, run_id: str, timeout: float = RUN_TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            status = self.status(run_id)
            if status.get("state") in TERMINAL:
                return status
            if time.monotonic() > deadline:
                raise CheckFailed(
                    f"run {run_id} did not end within {timeout:g} s (state {status.get('state')})"
                )
            time.sleep(POLL_S)

    def error_code(self, response: httpx.Response) -> str | None:
        """The ``error.code`` of a typed error body (``None`` if the body is not one)."""
        try:
            document = response.json()
        except ValueError:
            return None
        error = document.get("error") if isinstance(document, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        return code if isinstance(code, str) else None
