"""Kill a child process with SIGKILL at its N-th file-system step.

The child imports :data:`HOOK` first: it wraps the primitives every publication is made
of (``fsync``, ``mkdir``, ``rmdir``, ``unlink``, ``open`` of a new file, the no-replace
rename) so that the ``KILN_KILL_AT_STEP``-th call kills the process just before doing it.
With ``KILN_KILL_AT_STEP=0`` nothing is killed and, at exit, the child prints
``steps=<total> marks=<step,...>``: the number of steps and the step counts at which each
``mark(...)`` call happened (to find where a phase begins).

A kill test runs the same script dozens of times, and a fresh interpreter importing the
library costs far more than the publication it kills (0.4 s against a few ms). So
:func:`run_child` forks each child from a *zygote*: one interpreter per script (and
environment) that has imported the script's top-level imports and then forks a child per
run. The child installs :data:`HOOK` after the fork, exactly as a fresh interpreter would
before the script, and the library reaches the wrapped primitives through their modules
(``os.fsync``, ``rename.between``) at call time, so every step is counted either way;
:func:`spawn` (kills at random moments) still starts a fresh interpreter.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
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


ZYGOTE = r"""
import ast, atexit, json, os, sys, traceback
source = json.loads(sys.stdin.readline())
for node in ast.parse(source["script"]).body:  # the script's imports, loaded once
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        exec(compile(ast.Module([node], []), "<preload>", "exec"), {})
import shutil, signal  # the hook's own imports (shutil before any wrapping, as in HOOK)
from kiln_verify.core import rename
code = compile(source["hook"] + source["script"], "<string>", "exec")
print("ready", flush=True)
for line in sys.stdin:
    run = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        for fd, path in ((1, run["stdout"]), (2, run["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_TRUNC), fd)
        os.environ["KILN_KILL_AT_STEP"] = str(run["kill_at"])
        if run["cwd"]:
            os.chdir(run["cwd"])
        sys.argv = ["-c", *run["args"]]
        status = 0
        try:
            exec(code, {"__name__": "__main__"})
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except BaseException:
            traceback.print_exc()
            status = 1
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    print(json.dumps(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])), flush=True)
"""

_ZYGOTES: dict[tuple[str, tuple[tuple[str, str], ...]], subprocess.Popen[str]] = {}
_CHILD_TIMEOUT_S = 300


def _zygote(script: str) -> subprocess.Popen[str]:
    """The zygote of ``script`` under the current environment (started on first use)."""
    env = {k: v for k, v in os.environ.items() if k != "KILN_KILL_AT_STEP"}
    key = (script, tuple(sorted(env.items())))
    found = _ZYGOTES.get(key)
    if found is not None and found.poll() is None:
        return found
    proc = subprocess.Popen(
        [sys.executable, "-c", ZYGOTE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(env, KILN_KILL_AT_STEP="0"),
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(json.dumps({"script": script, "hook": HOOK}) + "\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "ready\n", "the crash-test zygote did not start"
    _ZYGOTES[key] = proc
    return proc


@atexit.register
def _stop_zygotes() -> None:
    for proc in _ZYGOTES.values():
        proc.kill()
        proc.wait()


def run_child(script: str, *args: str, kill_at: int = 0, cwd: Path | None = None) -> str:
    """Run ``HOOK + script`` with ``args`` in a child forked from the script's zygote;
    return its stdout. Killed runs must die by SIGKILL, others must succeed."""
    proc = _zygote(script)
    assert proc.stdin is not None
    assert proc.stdout is not None
    with tempfile.TemporaryDirectory(prefix="kiln-crash-") as scratch:
        out, err = Path(scratch, "stdout"), Path(scratch, "stderr")
        out.touch()
        err.touch()
        run = {
            "args": list(args),
            "kill_at": kill_at,
            "cwd": os.fspath(cwd) if cwd is not None else None,
            "stdout": os.fspath(out),
            "stderr": os.fspath(err),
        }
        proc.stdin.write(json.dumps(run) + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], _CHILD_TIMEOUT_S)
        if not ready:
            proc.kill()
            raise AssertionError(f"a crash-test child ran over {_CHILD_TIMEOUT_S} s")
        returncode = int(proc.stdout.readline())
        stdout, stderr = out.read_text(), err.read_text()
    if kill_at:
        assert returncode in (-signal.SIGKILL, 0), stderr[-2000:]
    else:
        assert returncode == 0, stderr[-2000:]
    return stdout


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
