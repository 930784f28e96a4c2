"""Live oracle servers for the client tests, started in-process on free loopback ports.

Well-behaved servers are shared per session; fault servers are started per test through
the `start` factory and stopped afterwards, so no fault leaks into another test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from oracle.runner import ServerConfig, ServerHandle, start_server, start_servers
from tests.openenv.oekit import Start


@pytest.fixture(scope="session")
def servers() -> Iterator[dict[str, ServerHandle]]:
    handles = start_servers(["counter", "bandit", "measure"])
    yield {handle.name: handle for handle in handles}
    for handle in handles:
        handle.stop()


@pytest.fixture
def start() -> Iterator[Start]:
    """`start(name, faults=[...], max_sessions=N)`; every server is stopped after the test."""
    handles: list[ServerHandle] = []

    def _start(name: str = "counter", **kwargs: Any) -> ServerHandle:
        handle = start_server(ServerConfig(name, **kwargs))
        handles.append(handle)
        return handle

    yield _start
    for handle in handles:
        handle.stop()
