"""Fixtures every test folder shares.

Live oracle servers come from the plugin's own ``openenv_oracle`` factory (``pytest -p
kiln``, loaded through the ``pytest11`` entry point), so the suite starts and stops them
exactly as a user's tests do; ``start`` is that factory under the short name the live-server
tests use (``start("bandit", faults=[...], max_sessions=1, port=...)``).
"""

from __future__ import annotations

import os
import sys

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

from hypothesis import settings

from pytest_kiln.fixtures import OracleFactory

#: The control-plane fixtures (oracle environments, a control plane, a ``kiln-verify serve``
#: process) serve five folders: the engine, routes, commands, client and control suite.
pytest_plugins = ["tests.control.fixtures"]

# Hypothesis' default 200 ms deadline is a wall-clock assertion inside a test: with parallel
# workers on a shared 2-core machine a first example can take 450 ms for reasons that have
# nothing to do with the code (seen once in a full run). Speed is measured in benchmarks/,
# so the suite's profile has no deadline; example counts and derandomization stay as set.
settings.register_profile("kiln-suite", deadline=None)
settings.load_profile("kiln-suite")


@pytest.fixture
def start(openenv_oracle: OracleFactory) -> OracleFactory:
    """The plugin's ``openenv_oracle``: every server it started is stopped after the test."""
    return openenv_oracle


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle",
        metavar="SEED",
        type=int,
        default=None,
        help="Run the test modules, and the tests inside each module, in an order shuffled "
        "by SEED (the proof that no test depends on another's order or leftovers).",
    )


#: Seconds each test module took last time (summed over its tests' set-up, call and
#: tear-down), kept in pytest's cache so the next parallel run starts the longest first.
_DURATIONS_KEY = "kiln-verify/module-seconds"
#: A module not yet timed: one marked ``slow`` is assumed long, any other short.
_SLOW_GUESS_S = 60.0


def _module(item_or_nodeid: pytest.Item | str) -> str:
    nodeid = item_or_nodeid if isinstance(item_or_nodeid, str) else item_or_nodeid.nodeid
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The order tests are handed to pytest-xdist's workers (scripts/check.sh runs them
    ``--dist loadfile``: each module on one worker, so its fixtures are built once).

    By default the longest modules go first (longest-processing-time-first scheduling: the
    last module to finish is a short one), by the times of the last run in pytest's cache,
    or, for a module never timed (a fresh clone), by its ``slow`` marker.

    ``--shuffle SEED`` instead runs the modules, and the tests inside each module, in an
    order shuffled by SEED: the proof that no test depends on another's order or leftovers.
    Tests stay grouped by module (as pytest-randomly does), so a module's fixtures are still
    built once. Either order is a function of the cache and SEED alone, so every worker
    collects the same list, as xdist requires.
    """
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(_module(item), []).append(item)
    groups = list(modules.values())
    seed = config.getoption("--shuffle")
    if seed is not None:
        import random

        shuffler = random.Random(seed)
        shuffler.shuffle(groups)
        for group in groups:
            shuffler.shuffle(group)
    else:
        cache = getattr(config, "cache", None)
        known: dict[str, float] = cache.get(_DURATIONS_KEY, {}) if cache is not None else {}

        def seconds(group: list[pytest.Item]) -> float:
            name = _module(group[0])
            if isinstance(known.get(name), (int, float)):
                return float(known[name])
            slow = any(item.get_closest_marker("slow") is not None for item in group)
            return _SLOW_GUESS_S if slow else 0.0

        groups.sort(key=seconds, reverse=True)  # stable: ties keep pytest's order
    items[:] = [item for group in groups for item in group]


_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[_module(report.nodeid)] = _seconds.get(_module(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller (never an xdist worker) keeps each module's time for the next run;
    a module that ran only in part keeps its longer earlier time."""
    config = session.config
    cache = getattr(config, "cache", None)
    if cache is None or hasattr(config, "workerinput") or not _seconds:
        return
    known = cache.get(_DURATIONS_KEY, {})
    merged = dict(known) if isinstance(known, dict) else {}
    for name, spent in _seconds.items():
        previous = merged.get(name)
        merged[name] = max(spent, previous) if isinstance(previous, (int, float)) else spent
    cache.set(_DURATIONS_KEY, {name: round(value, 2) for name, value in merged.items()})


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--shuffle")
    return None if seed is None else f"test order shuffled with --shuffle {seed}"
