"""The ``kiln`` fixtures: oracle servers, endpoints under test, a client and a session.

Only pytest and the standard library are imported here; the oracle runner, the OpenEnv
client and websockets are imported inside the fixtures that need them. The client is
asynchronous and pytest-asyncio is not required: every test gets a private event loop
(:func:`kiln_run`) that runs the client's coroutines, so ``kiln_run(client.inspect())``
works from a plain ``def test_...``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pytest

from pytest_kiln.settings import EndpointSpec, kiln_settings

if TYPE_CHECKING:
    from kiln_verify.openenv.protocol.client import OpenEnvClient
    from kiln_verify.openenv.protocol.session import Session
    from oracle.runner import ServerHandle

T = TypeVar("T")

#: The kwargs ``@pytest.mark.kiln(...)`` accepts; anything else is a usage error.
MARKER_KWARGS: frozenset[str] = frozenset({"oracle", "max_sessions", "faults"})


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A running endpoint: ``url`` is its base URL; ``oracle`` names an oracle server."""

    id: str
    url: str
    oracle: str | None = None
    faults: tuple[str, ...] = ()


class OracleFactory(Protocol):
    def __call__(
        self,
        name: str,
        *,
        max_sessions: int | None = None,
        faults: Sequence[str] = (),
        **config: Any,
    ) -> ServerHandle: ...


class KilnRun(Protocol):
    def __call__(self, coro: Coroutine[Any, Any, T]) -> T: ...


def _start(
    name: str, max_sessions: int | None, faults: Sequence[str], **config: Any
) -> ServerHandle:
    from oracle.runner import ServerConfig, start_server

    kwargs: dict[str, Any] = {"faults": tuple(faults), **config}
    if max_sessions is not None:
        kwargs["max_sessions"] = max_sessions
    return start_server(ServerConfig(name, **kwargs))


class OraclePool:
    """Oracle servers started on first use and stopped together."""

    def __init__(self) -> None:
        self._handles: dict[tuple[str, int | None, tuple[str, ...]], ServerHandle] = {}

    def get(self, spec: EndpointSpec) -> ServerHandle:
        assert spec.oracle is not None
        key = (spec.oracle, spec.max_sessions, spec.faults)
        handle = self._handles.get(key)
        if handle is None:
            handle = _start(spec.oracle, spec.max_sessions, spec.faults)
            self._handles[key] = handle
        return handle

    def stop(self) -> None:
        handles, self._handles = list(self._handles.values()), {}
        for handle in handles:
            handle.stop()


@pytest.fixture(scope="session")
def kiln_oracle_pool() -> Iterator[OraclePool]:
    """The session's shared oracle servers (those named by ``--kiln-oracle``)."""
    pool = OraclePool()
    yield pool
    pool.stop()


@pytest.fixture
def openenv_oracle() -> Iterator[OracleFactory]:
    """``openenv_oracle("bandit", max_sessions=1, faults=["delay-step=0.1"])`` starts an
    oracle server in-process and returns its handle (``.base_url``); every server this
    factory started is stopped at teardown. Any other keyword is a field of
    ``oracle.runner.ServerConfig`` (``port``, ``ping_interval``, ``ping_timeout``,
    ``per_message_deflate``, ``environment``: serve that ``Environment`` class instead)."""
    handles: list[ServerHandle] = []

    def factory(
        name: str,
        *,
        max_sessions: int | None = None,
        faults: Sequence[str] = (),
        **config: Any,
    ) -> ServerHandle:
        if isinstance(faults, str):
            raise TypeError("faults must be a list of profile strings, not one string")
        handle = _start(name, max_sessions, faults, **config)
        handles.append(handle)
        return handle

    try:
        yield factory
    finally:
        for handle in handles:
            handle.stop()


@pytest.fixture
def kiln_run() -> Iterator[KilnRun]:
    """Run a coroutine on this test's private event loop: ``kiln_run(client.inspect())``."""
    with asyncio.Runner() as runner:

        def run(coro: Coroutine[Any, Any, T]) -> T:
            return runner.run(coro)

        yield run


@pytest.fixture
def openenv_endpoint(
    request: pytest.FixtureRequest, kiln_oracle_pool: OraclePool
) -> Iterator[Endpoint]:
    """The endpoint under test (parametrized over ``--kiln-openenv-url`` and
    ``--kiln-oracle``, or the server a ``@pytest.mark.kiln(oracle=...)`` marker names)."""
    spec: EndpointSpec | None = getattr(request, "param", None)
    if spec is None:
        pytest.skip(
            "no OpenEnv endpoint under test: pass --kiln-openenv-url URL or --kiln-oracle NAMES "
            "(or mark the test with @pytest.mark.kiln(oracle=NAME))"
        )
    if spec.url is not None:
        yield Endpoint(spec.id, spec.url)
        return
    assert spec.oracle is not None
    if not spec.per_test:
        handle = kiln_oracle_pool.get(spec)
        yield Endpoint(spec.id, handle.base_url, spec.oracle, spec.faults)
        return
    handle = _start(spec.oracle, spec.max_sessions, spec.faults)
    try:
        yield Endpoint(spec.id, handle.base_url, spec.oracle, spec.faults)
    finally:
        handle.stop()


@pytest.fixture
def kiln_capacity_probe(request: pytest.FixtureRequest) -> int | None:
    """``--kiln-capacity-probe`` (``None``: the suite's default of 64 sessions)."""
    return kiln_settings(request.config).capacity_probe


@pytest.fixture
def kiln_credential_env(request: pytest.FixtureRequest) -> str | None:
    """The name of the environment variable holding the bearer token, if configured."""
    return kiln_settings(request.config).credential_env


@pytest.fixture
def openenv_client(
    openenv_endpoint: Endpoint, kiln_run: KilnRun, kiln_credential_env: str | None
) -> Iterator[OpenEnvClient]:
    """An :class:`~kiln_verify.openenv.protocol.client.OpenEnvClient` for the endpoint;
    drive it with ``kiln_run(...)``. Closed at teardown."""
    from kiln_verify.openenv.protocol.client import OpenEnvClient

    async def make() -> OpenEnvClient:
        return OpenEnvClient(openenv_endpoint.url, credential_env=kiln_credential_env)

    client = kiln_run(make())
    try:
        yield client
    finally:
        kiln_run(client.aclose())


@pytest.fixture
def openenv_session(openenv_client: OpenEnvClient, kiln_run: KilnRun) -> Iterator[Session]:
    """An open :class:`~kiln_verify.openenv.protocol.session.Session` (not yet reset); closed at
    teardown. Drive it with ``kiln_run(openenv_session.reset())``."""
    session = kiln_run(openenv_client.open_session())
    try:
        yield session
    finally:
        kiln_run(session.close())


Recorder = Callable[[Endpoint, Any], None]
