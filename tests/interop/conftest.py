"""Session-wide servers for the interop suite: our oracle (in-process) and openenv peers.

The openenv peers are slow to start (importing `openenv.core.env_server` imports gradio),
so one child process hosts all of them, started once per test session. Our oracle servers
run in-process through `oracle.runner`. Every server is stopped on teardown, whatever
happened in between; the peer process also exits by itself if this process dies (its stdin
is a pipe from here, see `openenv_peers.py --exit-on-stdin-eof`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Iterator

import pytest

from benchmarks._common import PeerSpec, start_openenv_peers
from oracle.runner import ServerConfig, serve

#: key -> (our oracle server, the openenv peer hosting the same game): the same line-up on
#: both sides, each side in its own process.
LINE_UP: dict[str, tuple[ServerConfig, PeerSpec]] = {
    "counter": (ServerConfig("counter", max_sessions=8), PeerSpec("counter", 8)),
    "bandit": (ServerConfig("bandit", max_sessions=8), PeerSpec("bandit", 8)),
    # max sessions 1, as Kiln's interop gate serves the bandit
    "capacity": (ServerConfig("bandit", max_sessions=1), PeerSpec("bandit", 1)),
    "algebra": (ServerConfig("algebra", max_sessions=8), PeerSpec("algebra", 8)),
    "factory-error": (
        ServerConfig("counter", max_sessions=8, faults=("factory-error",)),
        PeerSpec("counter-factory-error", 8),
    ),
    # uvicorn's default for openenv; our runner's opt-in
    "deflate": (
        ServerConfig("counter", max_sessions=8, per_message_deflate=True),
        PeerSpec("counter", 8),
    ),
}


@dataclasses.dataclass(frozen=True)
class Pair:
    """The base URLs of our oracle server and the openenv peer hosting the same game."""

    key: str
    ours: str
    openenv: str


def openenv_available() -> bool:
    return importlib.util.find_spec("openenv") is not None


@pytest.fixture(scope="session")
def oracle_urls() -> Iterator[dict[str, str]]:
    """Our oracle servers, in-process via `oracle.runner`, keyed as in `LINE_UP`."""
    with serve([config for config, _ in LINE_UP.values()]) as handles:
        yield {key: handle.base_url for key, handle in zip(LINE_UP, handles, strict=True)}


@pytest.fixture(scope="session")
def openenv_urls() -> Iterator[dict[str, str]]:
    """The openenv 0.10.0 peers, one child process, keyed as in `LINE_UP`."""
    if not openenv_available():
        pytest.skip("openenv (the interop extra) is not installed")
    server = start_openenv_peers([peer for _, peer in LINE_UP.values()])
    try:
        yield {key: url for key, url in zip(LINE_UP, server.urls, strict=True)}
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pairs(oracle_urls: dict[str, str], openenv_urls: dict[str, str]) -> dict[str, Pair]:
    return {key: Pair(key, oracle_urls[key], openenv_urls[key]) for key in LINE_UP}
