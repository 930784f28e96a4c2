"""Drive the ``kiln-verify`` CLI against a live server: inspect, tasks, rollout, verify, replay.

Each command runs in its own process (``python -c "from kiln_verify.cli import main"``, the
console script's entry point), in a working directory of the test's, with default options
unless the test adds some: exit codes, stdout and files are what a user would get.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import child_environment

SUMMARY = "openenv.rollout-summary.json"
#: A default rollout (8 groups x 4 candidates x 8 steps) on a one-session server queues its
#: 32 episodes behind one slot; about a minute on a busy 2-core box.
COMMAND_TIMEOUT_S = 600.0


@dataclasses.dataclass(frozen=True)
class CliRun:
    """One ``kiln-verify`` invocation and what it printed."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def explain(self) -> str:
        return f"kiln-verify {' '.join(self.argv)} -> {self.returncode}\n" \
               f"{self.stdout[-3000:]}\n{self.stderr[-3000:]}"


def kiln(*args: str, cwd: Path, timeout: float = COMMAND_TIMEOUT_S) -> CliRun:
    command = [sys.executable, "-c", "from kiln_verify.cli import main; main()", *args]
    process = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                             env=child_environment(), check=False)
    return CliRun(tuple(args), process.returncode, process.stdout, process.stderr)


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """The five commands' runs, in the order they ran."""

    inspect: CliRun
    tasks: CliRun
    rollout: CliRun
    verify: CliRun
    replay: CliRun


def inspect_collect_verify_replay(url: str, workdir: Path,
                                  rollout_options: Sequence[str] = ()) -> Pipeline:
    """Every command with ``--json``; rollout writes its default file names in ``workdir``
    and verify and replay read them back. Later commands run even if earlier ones failed
    (each test asserts what it expects of each)."""
    workdir.mkdir(parents=True, exist_ok=True)
    return Pipeline(
        inspect=kiln("openenv", "inspect", "--environment", url, "--json", cwd=workdir),
        tasks=kiln("openenv", "tasks", "--environment", url, "--json", cwd=workdir),
        rollout=kiln("openenv", "rollout", "--environment", url, *rollout_options, "--json",
                     cwd=workdir),
        verify=kiln("openenv", "verify", "--summary", SUMMARY, "--json", cwd=workdir),
        replay=kiln("openenv", "replay", "--summary", SUMMARY, "--json", cwd=workdir),
    )


def expect_clean_replay(run: CliRun) -> tuple[dict[str, Any], dict[str, Any]]:
    """Kiln's replay report of a clean replay and our notes beside it (a fresh uuid
    ``episode_id`` per reset is session identity, not drift:
    ``kiln_verify/openenv/volatile.py``)."""
    assert run.returncode == 0, run.explain()
    printed: dict[str, Any] = run.json()
    assert list(printed) == ["report", "kiln_verify"]
    return printed["report"], printed["kiln_verify"]
