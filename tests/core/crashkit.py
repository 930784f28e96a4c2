"""Kill a child process with SIGKILL at its N-th file-system step.

The child imports :data:`HOOK` first: it wraps the primitives every publication is made
of (``fsync``, ``mkdir``, ``rmdir``, ``unlink``, ``open`` of a new file, the no-replace
rename) so that the ``KILN_KILL_AT_STEP``-th call kills the process just before doing it.
With ``KILN_KILL_AT_STEP=0`` nothing is killed and, at exit, the child prints
``steps=<total> marks=<step,...>``: the number of steps and the step counts at which each
``mark(...)`` call happened (to find where a phase begins).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

HOOK = r"""
import atexit, os, shutil, signal, sys  # shutil first: it checks os's dir_fd support once
from kiln_verify.core import rename
_kill_at = int(os.environ.get("KILN_KILL_AT_STEP", "0"))
_count = [0]
_marks = []
def _step():
    _count[0] += 1
    if _count[0] == _kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
def _wrap(owner, name):
    real = getattr(owner, name)
    def wrapped(*args, **kwargs):
        _step()
        return real(*args, **kwargs)
    setattr(owner, name, wrapped)
    if real in os.supports_dir_fd:
        os.supports_dir_fd.add(wrapped)
for _name in ("fsync", "mkdir", "rmdir", "unlink"):
    _wrap(os, _name)
_wrap(rename, "between")
_real_open = os.open
def _open(path, flags, *args, **kwargs):
    if flags & os.O_CREAT:
        _step()
    return _real_open(path, flags, *args, **kwargs)
os.open = _open
def mark():
    _marks.append(_count[0])
if not _kill_at:
    atexit.register(lambda: print(f"steps={_count[0]} marks={','.join(map(str, _marks))}"))
"""


def run_child(script: str, *args: str, kill_at: int = 0, cwd: Path | None = None) -> str:
    """Run ``HOOK + script`` with ``args``; return stdout. Killed runs must die by SIGKILL,
    others must succeed."""
    env = dict(os.environ, KILN_KILL_AT_STEP=str(kill_at))
    proc = subprocess.run(
        [sys.executable, "-c", HOOK + script, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    if kill_at:
        assert proc.returncode in (-signal.SIGKILL, 0), proc.stderr[-2000:]
    else:
        assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def calibrate(script: str, *args: str) -> tuple[int, list[int]]:
    """(total steps, mark positions) of an uninterrupted run."""
    out = run_child(script, *args)
    found = re.search(r"steps=(\d+) marks=([\d,]*)", out)
    assert found is not None, out
    marks = [int(m) for m in found[2].split(",") if m]
    return int(found[1]), marks


def spawn(script: str, *args: str) -> subprocess.Popen[str]:
    """Start an uninterrupted child (for kills at random moments)."""
    env = dict(os.environ, KILN_KILL_AT_STEP="0")
    return subprocess.Popen(
        [sys.executable, "-c", HOOK + script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
