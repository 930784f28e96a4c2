"""The trainer as a child process: the exported bundle's own ``train.py``, watched and stoppable.

The run never imports the ML training stack: it starts ``python -I BUNDLE/train.py BUNDLE
--base-model MODEL ...`` (the pinned runner the export wrote, exactly as an operator runs
it; docs/hf-contract.md) with the contract's options
(:func:`~kiln_verify.control.training.effective.runner_options`) and reads what it prints:

- stdout carries one JSON status line (the runner's own contract) and is kept, bounded;
- stderr carries the trainer's logs: every ``{'loss': ..., 'epoch': ...}`` dictionary the
  Hugging Face trainer logs (``logging_steps=1``) is parsed (:func:`parse_progress`) and
  reported, and the last lines are kept for a failure's message.

The child runs in a session of its own, so a cancellation (or a server shutdown) stops the
whole process group (``SIGKILL``, then waits for it); on Linux the child also receives
``SIGKILL`` if the server process dies first (``PR_SET_PDEATHSIG``), so a killed server
leaves no trainer behind writing into a run the restart fails as interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "INTERPRETER",
    "Progress",
    "TrainerExit",
    "parse_progress",
    "run_trainer",
    "trainer_argv",
]

INTERPRETER: str = sys.executable
"""The interpreter that runs ``train.py`` (the server's own, as ``hf export`` assumes)."""

_TAIL_LINES: Final = 40
_MAX_LINE: Final = 4096
_MAX_STDOUT: Final = 1 << 20
_NUMBER: Final = r"'?(-?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|nan|inf))'?"
_LOSS: Final = re.compile(r"'loss':\s*" + _NUMBER)
_EPOCH: Final = re.compile(r"'epoch':\s*" + _NUMBER)
_DROPPED_ENV: Final = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
_OFFLINE_ENV: Final = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "PYTHONUNBUFFERED": "1",
}

Progress = Callable[[float | None, float | None], None]
"""``(epoch, loss)`` from one log line of the trainer (either may be absent)."""


@dataclass(frozen=True, slots=True)
class TrainerExit:
    """How the child ended: its status (negative: the signal), timing and output."""

    exit_code: int
    started_unix_ms: int
    finished_unix_ms: int
    duration_ms: int
    stdout: bytes
    stderr_tail: str


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_progress(line: str) -> tuple[float | None, float | None]:
    """``(epoch, loss)`` of one trainer log line; ``(None, None)`` for any other line."""
    if "'epoch'" not in line and "'loss'" not in line:
        return None, None
    epoch = _EPOCH.search(line)
    loss = _LOSS.search(line)
    return (
        _float(epoch.group(1)) if epoch else None,
        _float(loss.group(1)) if loss else None,
    )


def trainer_argv(bundle: Path, model: Path, options: Sequence[str], *, device: str) -> list[str]:
    """The child's command line: the bundle's ``train.py`` with the contract's options.
    On a CPU device the weights are trained in float32 without gradient checkpointing
    (the resident model plays in float32 too)."""
    server = ["--dtype", "float32", "--no-gradient-checkpointing"] if device == "cpu" else []
    script = bundle / "train.py"
    return [INTERPRETER, "-I", str(script), str(bundle), "--base-model", str(model),
            *server, *options]  # fmt: skip


def _environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _DROPPED_ENV}
    env.update(_OFFLINE_ENV)
    return env


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    if sys.platform == "linux":
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


async def _stderr(stream: asyncio.StreamReader, tail: deque[str], progress: Progress) -> None:
    pending = b""
    while chunk := await stream.read(65536):
        pending += chunk
        *lines, pending = re.split(rb"[\r\n]", pending)
        if len(pending) > _MAX_LINE:
            pending = pending[-_MAX_LINE:]
        for raw in lines:
            line = raw[:_MAX_LINE].decode("utf-8", "replace").strip()
            if not line:
                continue
            tail.append(line)
            epoch, loss = parse_progress(line)
            if epoch is not None or loss is not None:
                progress(epoch, loss)


async def _stdout(stream: asyncio.StreamReader, sink: bytearray) -> None:
    while chunk := await stream.read(65536):
        if len(sink) < _MAX_STDOUT:
            sink += chunk[: _MAX_STDOUT - len(sink)]


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def run_trainer(argv: Sequence[str], *, cwd: Path, progress: Progress) -> TrainerExit:
    """Run the trainer to its end. A cancellation kills its process group, waits for it
    and propagates (the caller records the outcome)."""
    started = time.time_ns() // 1_000_000
    clock = time.monotonic_ns()
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=_environment(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    out = bytearray()
    readers = asyncio.gather(_stderr(process.stderr, tail, progress), _stdout(process.stdout, out))
    try:
        await readers
        code = await process.wait()
    except BaseException:
        _kill_group(process)
        readers.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.shield(process.wait())
        raise
    _kill_group(process)  # anything the runner left running in its group
    return TrainerExit(
        exit_code=code,
        started_unix_ms=started,
        finished_unix_ms=max(started, time.time_ns() // 1_000_000),
        duration_ms=(time.monotonic_ns() - clock) // 1_000_000,
        stdout=bytes(out),
        stderr_tail="\n".join(tail),
    )
