"""The behaviour, state and seed peers (`session_peers.py`) as a session fixture, any peer
module's child process (`peers_process`), and a suite runner.

One child process hosts every peer (the openenv import is paid once); it exits with this
process (its stdin is a pipe from here). The fixture is
defined once, in ``tests/conftest.py`` (a test module that imported it would get a process
of its own), and every module that uses it runs on one xdist worker (see there).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from benchmarks._common import PEER_START_TIMEOUT_S, peer_command, start_server_process

ROOT = Path(__file__).resolve().parents[2]
#: Run as a module from the repository root: the script imports `tests.interop`, which is
#: not installed, and a script's own directory (not the root) heads `sys.path`.
MODULE = "tests.interop.session_peers"
#: The behaviour peers: peer name -> `max_concurrent_envs` (`slow-single` ignores it:
#: openenv's default of 1).
BEHAVIOURS: dict[str, int] = {
    "slow-single": 1,
    "uuid-episodes": 4,
    "min-items": 4,
    "hidden-state": 4,
    "toolbox": 4,
}
#: Everything the session process serves: the behaviours, the late-state peer
#: (`state_peers.py`) and the seed peers (`seed_peers.py`).
LINE_UP: dict[str, int] = {
    **BEHAVIOURS,
    "late-state": 4,
    "ignored-seed": 4,
    "ignored-episode-id": 4,
}


@contextmanager
def peers_process(
    module: str, line_up: Mapping[str, int], label: str, timeout_s: float = PEER_START_TIMEOUT_S * 2
) -> Iterator[dict[str, str]]:
    """`python -m MODULE --exit-on-stdin-eof NAME:MAX_SESSIONS ...` (a peer module that
    extends `openenv_peers`; through `peer_command`: no web UI) in one child that exits with
    this process (its stdin is a pipe from here); the peers' base URLs, keyed as in
    `line_up`."""
    argv = peer_command("-m", module, "--exit-on-stdin-eof",
                        *(f"{name}:{limit}" for name, limit in line_up.items()))  # fmt: skip
    server = start_server_process(
        argv, label=label, expected_urls=len(line_up), timeout_s=timeout_s, keep_stdin_open=True
    )
    try:
        yield dict(zip(line_up, server.urls, strict=True))
    finally:
        server.stop()


@pytest.fixture(scope="session")
def behaviour_urls() -> Iterator[dict[str, str]]:
    """Every session peer's base URL, keyed as in `LINE_UP` (one process, `session_peers`)."""
    with peers_process(MODULE, LINE_UP, "openenv-behaviours") as urls:
        yield urls


def run_suite(urls: Sequence[str], report: Path, *extra: str,
              timeout: float = 600) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`pytest -p kiln --kiln-openenv-url ... --pyargs pytest_kiln.conformance`, in a child."""
    command = [sys.executable, "-m", "pytest", "-p", "kiln", "-p", "no:cacheprovider", "-q",
               "--kiln-report", str(report), *extra]
    for url in urls:
        command += ["--kiln-openenv-url", url]
    command += ["--pyargs", "pytest_kiln.conformance"]
    process = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                             check=False)
    assert report.is_file(), process.stdout[-4000:] + process.stderr[-4000:]
    data: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return process, data


def rows_by_endpoint(report: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """endpoint url -> case id -> report row."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for row in report["results"]:
        found.setdefault(row["url"], {})[row["case"]] = row
    return found
