"""Shared helpers for the ``kiln`` plugin tests (pytester runs in subprocesses).

``pytester`` is enabled per module (``pytest_plugins = ["pytester"]``): a
``pytest_plugins`` declaration is only allowed in the top-level conftest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from oracle.runner import ServerConfig, ServerHandle, start_server


@pytest.fixture
def fault_server() -> Iterator[Any]:
    """``fault_server(name, faults)`` in this process; stopped after the test."""
    handles: list[ServerHandle] = []

    def start(name: str, faults: list[str], max_sessions: int = 64) -> ServerHandle:
        handle = start_server(ServerConfig(name, faults=faults, max_sessions=max_sessions))
        handles.append(handle)
        return handle

    yield start
    for handle in handles:
        handle.stop()
