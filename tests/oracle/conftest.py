"""Fixtures for the oracle server-framework tests: live servers, stopped after each test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from oracle.base import Environment
from oracle.runner import ServerConfig, ServerHandle, start_server
from pytest_kiln.fixtures import OracleFactory
from tests.oracle.serverkit import Start, TinyEnvironment


@pytest.fixture
def start(openenv_oracle: OracleFactory) -> Start:
    """`start(environment=TinyEnvironment, **ServerConfig fields)`: the framework tests serve
    throwaway `Environment` classes, so the class comes first; the plugin's `openenv_oracle`
    starts the server and stops it after the test."""

    def _start(environment: type[Environment] = TinyEnvironment, **kwargs: Any) -> ServerHandle:
        name = kwargs.pop("name", environment.server_name)
        return openenv_oracle(name, environment=environment, **kwargs)

    return _start


@pytest.fixture(scope="module")
def tiny() -> Iterator[ServerHandle]:
    """One shared TinyEnvironment server per module; tests leave no session open."""
    handle = start_server(ServerConfig("tiny", environment=TinyEnvironment))
    yield handle
    handle.stop()
