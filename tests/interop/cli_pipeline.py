"""Drive the ``kiln-verify`` CLI against a live server: inspect, tasks, rollout, verify, replay.

Each command runs in its own process (``python -c "from kiln_verify.cli import main"``, the
console script's entry point), in a working directory of the test's, with default options
unless the test adds some: exit codes, stdout and files are what a user would get. The
commands of one pipeline are forked from one interpreter that has imported the CLI stack
once (``cli_forkserver.py``): a fresh process per command, without paying for the same
imports five times.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import child_environment

SUMMARY = "openenv.rollout-summary.json"
#: A default rollout (8 groups x 4 candidates x 8 steps) on a one-session server queues its
#: 32 episodes behind one slot; about a minute on a busy 2-core box.
COMMAND_TIMEOUT_S = 600.0
FORKSERVER = Path(__file__).resolve().parent / "cli_forkserver.py"
#: What the pipeline's commands import (``kiln_verify.cli`` loads a subcommand's stack only
#: when it is named); a module missing here is imported by the command's own process.
PRELOAD = (
    "kiln_verify.cli.openenv_cmd",
    "kiln_verify.cli.openenv_rollout",
    "kiln_verify.cli.openenv_verify",
    "kiln_verify.cli.openenv_replay",
    "kiln_verify.openenv.protocol.client",
    "kiln_verify.openenv.protocol.tasks",
    "kiln_verify.openenv.collect.run",
    "kiln_verify.openenv.verify.engine",
    "kiln_verify.openenv.replay.engine",
    "httpx",
    "websockets.asyncio.client",
    "jsonschema",
    "httpcore",
    "anyio._backends._asyncio",
    "certifi",
    "typer._adapters",
)


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
        return (
            f"kiln-verify {' '.join(self.argv)} -> {self.returncode}\n"
            f"{self.stdout[-3000:]}\n{self.stderr[-3000:]}"
        )


class Forkserver:
    """``cli_forkserver.py`` in ``cwd``: :meth:`kiln` runs one command in a process forked
    from it, with what ``python -c "from kiln_verify.cli import main; main()" ARGS`` in
    ``cwd`` gives (exit code, stdout, stderr, files in ``cwd``) at a fifth of a cheap
    command's CPU."""

    def __init__(self, cwd: Path, preload: Sequence[str] = PRELOAD) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="kiln-forkserver-")
        self._log = Path(self._scratch.name) / "forkserver.log"
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, str(FORKSERVER), *preload],
                cwd=cwd,
                env=child_environment(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        self._count = 0

    def kiln(self, *args: str, timeout: float = COMMAND_TIMEOUT_S) -> CliRun:
        process = self._process
        assert process.stdin is not None
        assert process.stdout is not None
        self._count += 1
        out = Path(self._scratch.name) / f"{self._count}.stdout"
        err = Path(self._scratch.name) / f"{self._count}.stderr"
        request = {"args": list(args), "stdout": str(out), "stderr": str(err)}
        process.stdin.write(json.dumps(request).encode() + b"\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        if not ready:
            self.close(kill=True)
            raise subprocess.TimeoutExpired(["kiln-verify", *args], timeout)
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"cli_forkserver.py died:\n{self._log.read_text()[-4000:]}")
        return CliRun(tuple(args), int(line), out.read_text(), err.read_text())

    def close(self, *, kill: bool = False) -> None:
        if kill and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        self._process.wait(timeout=60)
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._scratch.cleanup()

    def __enter__(self) -> Forkserver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(kill=exc[0] is not None)


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """The five commands' runs, in the order they ran."""

    inspect: CliRun
    tasks: CliRun
    rollout: CliRun
    verify: CliRun
    replay: CliRun


def inspect_collect_verify_replay(
    url: str, workdir: Path, rollout_options: Sequence[str] = ()
) -> Pipeline:
    """Every command with ``--json``; rollout writes its default file names in ``workdir``
    and verify and replay read them back. Later commands run even if earlier ones failed
    (each test asserts what it expects of each)."""
    workdir.mkdir(parents=True, exist_ok=True)
    with Forkserver(workdir) as server:
        return Pipeline(
            inspect=server.kiln("openenv", "inspect", "--environment", url, "--json"),
            tasks=server.kiln("openenv", "tasks", "--environment", url, "--json"),
            rollout=server.kiln(
                "openenv", "rollout", "--environment", url, *rollout_options, "--json"
            ),
            verify=server.kiln("openenv", "verify", "--summary", SUMMARY, "--json"),
            replay=server.kiln("openenv", "replay", "--summary", SUMMARY, "--json"),
        )


def expect_clean_replay(run: CliRun) -> tuple[dict[str, Any], dict[str, Any]]:
    """Kiln's replay report of a clean replay and our notes beside it (a fresh uuid
    ``episode_id`` per reset is session identity, not drift:
    ``kiln_verify/openenv/volatile.py``)."""
    assert run.returncode == 0, run.explain()
    printed: dict[str, Any] = run.json()
    assert list(printed) == ["report", "kiln_verify"]
    return printed["report"], printed["kiln_verify"]
