"""Control-plane fixtures shared by every folder that talks to one (registered for the whole
suite by tests/conftest.py): tests/control (the engine), tests/server (the routes),
tests/cli (the commands), tests/control_client (downloads) and tests/pytest_kiln (the
control suite). Oracle environments and the real ``kiln-verify serve`` process are built
once per session (per xdist worker); a control plane in a thread is built per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import httpx

    from kiln_verify.server.runner import ServerHandle
    from kiln_verify.testing.serve import ServeProcess
    from oracle.runner import ServerHandle as OracleHandle

# The imports are inside the fixtures: this plugin is loaded by every pytest process of
# the suite (tests/conftest.py), most of which never start a control plane (0.7 s saved).


@pytest.fixture(scope="session")
def bandit() -> Iterator[OracleHandle]:
    from oracle.runner import start_server

    handle = start_server("bandit")
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def slow_bandit() -> Iterator[OracleHandle]:
    """Each step answered 0.1 s late: runs that stay active long enough to be observed."""
    from oracle.runner import ServerConfig, start_servers

    (handle,) = start_servers([ServerConfig("bandit", faults=("delay-step=0.1",))])
    yield handle
    handle.stop()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerHandle]:
    from tests.control.support import control_server

    with control_server(tmp_path / "state") as handle:
        yield handle


@pytest.fixture
def http(server: ServerHandle) -> Iterator[httpx.Client]:
    import httpx

    with httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as client:
        yield client


@pytest.fixture(scope="session")
def serve_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One real `kiln-verify serve` process shared by the tests that need a process."""
    from kiln_verify.testing.serve import ServeProcess

    process = ServeProcess(tmp_path_factory.mktemp("serve") / "state")
    yield process
    assert process.stop() == 0  # SIGTERM is a clean stop
