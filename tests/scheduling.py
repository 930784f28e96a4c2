"""How the suite's tests are ordered and handed to pytest-xdist's workers (a pytest plugin,
loaded from ``tests/conftest.py``).

``scripts/check.sh`` runs ``--dist loadfile``: each work unit goes whole to one worker, so
its module- and session-scoped fixtures are built once there. A work unit is a test module,
or a *worker group*: every module that uses one of the session fixtures in
:data:`WORKER_GROUPS`. Those fixtures start OpenEnv peer processes (each imports openenv and
its web stack: seconds of CPU), and a session fixture is per worker, so modules spread over
three workers started three copies; grouped, one worker starts one. Each worker writes the
module -> group table of its collection to a file the controller named
(``pytest_configure_node``), and the controller's scheduler (``GroupedFileScheduling``)
reads it once every worker has collected. (xdist's own ``loadgroup`` marks node ids instead,
and spreads every unmarked test of a module over the workers, one test at a time.)

Order: the longest work units first (longest-processing-time-first: the last unit to finish
is a short one), by each module's time in the last run (pytest's cache,
``kiln-verify/module-seconds``) or, never timed (a fresh clone), by its ``slow`` marker.
``--shuffle SEED`` instead shuffles the units, and the tests inside each module, by SEED:
the proof that no test depends on another's order or leftovers. Either order is a function
of the cache and SEED alone, so every worker collects the same list, as xdist requires.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any, Final

import pytest

#: session fixture -> worker group: every module that uses it runs on one worker.
#: Two groups, not one: each starts one process, and two can run side by side.
WORKER_GROUPS: Final[dict[str, str]] = {
    "openenv_urls": "openenv-line-up",  # tests/interop/conftest.py: the oracle's games
    "behaviour_urls": "openenv-behaviours",  # tests/interop/behaviour_kit.py: the rest
}
#: Each test module's seconds (its tests' set-up, call and tear-down) and test count, the
#: last time it ran whole.
DURATIONS_KEY: Final = "kiln-verify/module-seconds"
#: A module not yet timed: one marked ``slow`` is assumed long, any other short.
_SLOW_GUESS_S: Final = 60.0


def module_of(nodeid: str) -> str:
    """The test module a node id names."""
    return nodeid.split("::", 1)[0]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle",
        metavar="SEED",
        type=int,
        default=None,
        help="Run the test modules, and the tests inside each module, in an order shuffled "
        "by SEED (the proof that no test depends on another's order or leftovers).",
    )


def _group_of(module: list[pytest.Item]) -> str | None:
    for item in module:
        for fixture in getattr(item, "fixturenames", ()):
            if fixture in WORKER_GROUPS:
                return WORKER_GROUPS[fixture]
    return None


_WORKER_INPUT: Final = "kiln_worker_groups"
_GROUPS_FILE: Final = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Under ``--dist loadfile``, give each worker the file for its module -> group table."""
    config = node.config
    if config.getoption("dist") != "loadfile":
        return
    if _GROUPS_FILE not in config.stash:
        config.stash[_GROUPS_FILE] = Path(tempfile.mkdtemp(prefix="kiln-worker-groups-")) / "t"
    node.workerinput[_WORKER_INPUT] = str(config.stash[_GROUPS_FILE])


def pytest_unconfigure(config: pytest.Config) -> None:
    if _GROUPS_FILE in config.stash:
        shutil.rmtree(config.stash[_GROUPS_FILE].parent, ignore_errors=True)


def _write_groups(config: pytest.Config, table: dict[str, str]) -> None:
    """A worker's module -> group table, for the controller's scheduler (every worker
    collects the same items, so every worker writes the same table; each one whole)."""
    workerinput = getattr(config, "workerinput", None)
    if not isinstance(workerinput, dict) or not isinstance(workerinput.get(_WORKER_INPUT), str):
        return
    target = Path(workerinput[_WORKER_INPUT])
    staged = target.with_name(f".{workerinput.get('workerid', 'worker')}.partial")
    staged.write_text(json.dumps(table, sort_keys=True), encoding="utf-8")
    os.replace(staged, target)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the items by work unit (see the module); a worker writes the group table."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(module_of(item.nodeid), []).append(item)
    units: dict[str, list[list[pytest.Item]]] = {}
    for name, module in modules.items():
        units.setdefault(_group_of(module) or name, []).append(module)
    ordered = list(units.values())
    seed = config.getoption("--shuffle")
    if seed is not None:
        shuffler = random.Random(seed)
        shuffler.shuffle(ordered)
        for unit in ordered:
            shuffler.shuffle(unit)
            for module in unit:
                shuffler.shuffle(module)
    else:
        cache = getattr(config, "cache", None)
        known: dict[str, Any] = cache.get(DURATIONS_KEY, {}) if cache is not None else {}

        def seconds(module: list[pytest.Item]) -> float:
            spent = _timed(known.get(module_of(module[0].nodeid)))
            if spent is not None:
                return spent[0]
            slow = any(item.get_closest_marker("slow") is not None for item in module)
            return _SLOW_GUESS_S if slow else 0.0

        for unit in ordered:
            unit.sort(key=seconds, reverse=True)
        ordered.sort(key=lambda unit: sum(map(seconds, unit)), reverse=True)  # stable
    items[:] = [item for unit in ordered for module in unit for item in module]
    _write_groups(
        config,
        {module_of(m[0].nodeid): name for name, unit in units.items() if name not in modules
         for m in unit},
    )  # fmt: skip


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with worker groups; any other mode is xdist's own."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class GroupedFileScheduling(LoadFileScheduling):  # type: ignore[misc]
        """A module is a work unit, unless the workers' table puts it in a worker group."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # first called once every worker has collected
                path = config.stash.get(_GROUPS_FILE, None)
                try:
                    table = json.loads(path.read_text(encoding="utf-8")) if path else {}
                except (OSError, ValueError):
                    table = {}
                self.groups = table if isinstance(table, dict) else {}
            module = module_of(nodeid)
            group = self.groups.get(module)
            return f"worker-group:{group}" if isinstance(group, str) else module

    return GroupedFileScheduling(config, log)


_seconds: dict[str, float] = {}
_tests: dict[str, int] = {}


def _timed(value: object) -> tuple[float, int] | None:
    """A cache entry as (seconds, tests that ran); a bare number is an older entry's."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value), 0
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(part, (int, float)) and not isinstance(part, bool) for part in value)
    ):
        return float(value[0]), int(value[1])
    return None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = module_of(report.nodeid)
    _seconds[module] = _seconds.get(module, 0.0) + report.duration
    if report.when == "setup":
        _tests[module] = _tests.get(module, 0) + 1


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller (never an xdist worker) keeps each module's time for the next run:
    the time of this run where at least as many of its tests ran as in the run it has,
    else (a selection that ran part of it) the longer of the two."""
    config = session.config
    cache = getattr(config, "cache", None)
    if cache is None or hasattr(config, "workerinput") or not _seconds:
        return
    known = cache.get(DURATIONS_KEY, {})
    merged: dict[str, Any] = dict(known) if isinstance(known, dict) else {}
    for name, spent in _seconds.items():
        ran = _tests.get(name, 0)
        previous = _timed(merged.get(name))
        if previous is not None and ran < previous[1]:
            spent, ran = max(spent, previous[0]), previous[1]
        merged[name] = [round(spent, 2), ran]
    cache.set(DURATIONS_KEY, merged)


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--shuffle")
    return None if seed is None else f"test order shuffled with --shuffle {seed}"
