"""Fixtures every test folder shares (the order of the tests: ``tests/scheduling.py``).

Live oracle servers come from the plugin's own ``openenv_oracle`` factory (``pytest -p
kiln``, loaded through the ``pytest11`` entry point), so the suite starts and stops them
exactly as a user's tests do; ``start`` is that factory under the short name the live-server
tests use (``start("bandit", faults=[...], max_sessions=1, port=...)``).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator

import pytest

# Under pytest-xdist each worker is one process per core: torch's (and OpenMP's) thread pool
# would otherwise also use every core in each worker, so two workers on two cores would run
# four busy threads. Each worker, and every child it starts, gets its share of the cores.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _threads = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, str(_threads))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# Nothing here comes from a hub, and nothing may try: huggingface_hub's telemetry thread
# (started by TRL's trainer) resolves huggingface.co, which on a machine without that
# network waits on DNS and once crashed a worker inside getaddrinfo. Read at import time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

# pytester's in-process runs (the plugin's suites) remove every module first imported during
# the inner run when it ends. httpx imports httpcore lazily, at its first request, and keeps
# httpcore's exception classes in a module-level table: when that first request happened
# inside an inner run, the worker's next `import httpcore` made new classes the table no
# longer matched, and a refused connection escaped as a bare `httpcore.ConnectError` instead
# of `httpx.ConnectError` (a `kiln-verify openenv runs` test failed after a pytester test on
# the same worker). Imported here, before any inner run, httpcore is never removed.
import httpcore  # noqa: F401
from hypothesis import settings

from pytest_kiln.fixtures import OracleFactory
from tests.cli_command import one_click_command
from tests.interop.behaviour_kit import behaviour_urls

# openenv imports its web UI (gradio, 2-3 s of CPU) inside `try: ... except
# ModuleNotFoundError`; no test uses that UI in-process, so the workers start as openenv does
# without gradio installed, like the peer processes (`benchmarks/_common.py`, `_PEER_BOOT`).
# Child processes (the `openenv` CLI, `openenv init`'s server) are not affected.
sys.modules.setdefault("gradio", None)  # type: ignore[arg-type]

#: The control-plane fixtures (oracle environments, a control plane, a ``kiln-verify serve``
#: process) serve five folders: the engine, routes, commands, client and control suite.
#: ``tests.scheduling``: the order of the tests and how xdist's workers share them.
pytest_plugins = ["tests.control.fixtures", "tests.scheduling"]

#: The behaviour peers (one OpenEnv process) for every folder that plays them, defined here
#: once: a module that imported the fixture would own a second definition, and a process.
__all__ = ["behaviour_urls"]

# Hypothesis' default 200 ms deadline is a wall-clock assertion inside a test: with parallel
# workers on a shared 2-core machine a first example can take 450 ms for reasons that have
# nothing to do with the code (seen once in a full run). Speed is measured in benchmarks/,
# so the suite's profile has no deadline; example counts and derandomization stay as set.
settings.register_profile("kiln-suite", deadline=None)
settings.load_profile("kiln-suite")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Collection imported torch, transformers, PEFT and TRL (``importorskip``): hundreds of
    thousands of objects that live as long as the worker. Frozen, they leave the cyclic
    collector's reach, so each full collection walks only what the tests allocated since,
    about half of a worker's gen-2 collection time (docs/performance.md)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def _one_click_command() -> Iterator[None]:
    """``CliRunner.invoke`` builds the CLI's click command once per session, as
    ``kiln-verify`` does once per process (tests/cli_command.py: ~26 ms of CPU a call)."""
    yield from one_click_command()


@pytest.fixture
def start(openenv_oracle: OracleFactory) -> OracleFactory:
    """The plugin's ``openenv_oracle``: every server it started is stopped after the test."""
    return openenv_oracle
