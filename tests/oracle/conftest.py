"""Fixtures for the oracle server-framework tests: live servers, stopped after each test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from oracle.base import Environment
from oracle.runner import ServerConfig, ServerHandle, start_server
from tests.oracle.serverkit import Start, TinyEnvironment


@pytest.fixture
def start() -> Iterator[Start]:
    """`start(environment=TinyEnvironment, **ServerConfig fields)`; all stopped afterwards."""
    handles: list[ServerHandle] = []

    def _start(environment: type[Environment] = TinyEnvironment, **kwargs: Any) -> ServerHandle:
        name = kwargs.pop("name", environment.server_name)
        handle = start_server(ServerConfig(name, environment=environment, **kwargs))
        handles.append(handle)
        return handle

    yield _start
    for handle in handles:
        handle.stop()


@pytest.fixture(scope="module")
def tiny() -> Iterator[ServerHandle]:
    """One shared TinyEnvironment server per module; tests leave no session open."""
    handle = start_server(ServerConfig("tiny", environment=TinyEnvironment))
    yield handle
    handle.stop()
