"""A writer killed with SIGKILL at any moment leaves the target absent or complete.

The child publishes 20 files of 64 KiB as one directory. It is killed either at a chosen
``fsync`` (every stage of the protocol, deterministically) or after a random delay within
the measured duration of a publication. After every kill the target must be missing or
byte-for-byte complete; only ``.NAME.incomplete-*`` staging residue may remain beside it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHILD = r"""
import os, signal, sys
kill_at = int(os.environ.get("KILN_KILL_AT_FSYNC", "0"))
if kill_at:
    real_fsync = os.fsync
    calls = [0]
    def fsync(fd):
        calls[0] += 1
        if calls[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        real_fsync(fd)
    os.fsync = fsync
from kiln_verify.core.publish import publish_directory
files = {f"d{i % 3}/f{i:02d}.bin": bytes([i]) * 65536 for i in range(20)}
sys.stdout.write("go\n")
sys.stdout.flush()
publish_directory(sys.argv[1], files)
"""

EXPECTED = {f"d{i % 3}/f{i:02d}.bin": bytes([i]) * 65536 for i in range(20)}
FSYNCS_PER_RUN = 20 + 4 + 1 + 1  # files, directories, staging root, parent
RANDOM_TRIALS = 50


def _spawn(target: Path, kill_at: int = 0) -> subprocess.Popen[bytes]:
    env = dict(os.environ, KILN_KILL_AT_FSYNC=str(kill_at))
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(target)], stdout=subprocess.PIPE, env=env
    )
    assert process.stdout is not None
    assert process.stdout.readline() == b"go\n"
    return process


def _reap(process: subprocess.Popen[bytes]) -> int:
    returncode = process.wait(timeout=30)
    assert process.stdout is not None
    process.stdout.close()
    return returncode


def _state(parent: Path) -> str:
    """'absent' or 'complete'; fails on anything partial or unexpected."""
    for name in os.listdir(parent):
        assert name == "out" or name.startswith(".out.incomplete-"), name
    target = parent / "out"
    if not os.path.lexists(target):
        return "absent"
    found = {
        path.relative_to(target).as_posix(): path.read_bytes()
        for path in target.rglob("*")
        if path.is_file()
    }
    assert found.keys() == EXPECTED.keys()
    for name, data in EXPECTED.items():
        assert found[name] == data, name
    assert sorted(p.name for p in target.iterdir()) == ["d0", "d1", "d2"]
    return "complete"


@pytest.mark.slow
def test_kill_at_every_fsync(tmp_path: Path) -> None:
    outcomes = []
    for kill_at in range(1, FSYNCS_PER_RUN + 2):
        parent = tmp_path / f"k{kill_at}"
        parent.mkdir()
        process = _spawn(parent / "out", kill_at)
        returncode = _reap(process)
        state = _state(parent)
        outcomes.append(state)
        if kill_at <= FSYNCS_PER_RUN:
            assert returncode == -signal.SIGKILL, kill_at
        else:
            assert returncode == 0
        # Before the rename nothing is visible; the rename happens just before the
        # last fsync (the parent's), so from there on the target is complete.
        assert state == ("complete" if kill_at >= FSYNCS_PER_RUN else "absent"), kill_at


@pytest.mark.slow
def test_kill_at_random_moments(tmp_path: Path) -> None:
    calibration = tmp_path / "calibrate"
    calibration.mkdir()
    process = _spawn(calibration / "out")
    started = time.perf_counter()  # from "go": the publication itself
    assert _reap(process) == 0
    duration = time.perf_counter() - started
    assert _state(calibration) == "complete"

    rng = random.Random(20240611)
    seen = set()
    for trial in range(RANDOM_TRIALS):
        parent = tmp_path / f"r{trial}"
        parent.mkdir()
        process = _spawn(parent / "out")
        time.sleep(rng.uniform(0, duration * 1.2))
        process.send_signal(signal.SIGKILL)
        _reap(process)
        seen.add(_state(parent))
    assert seen <= {"absent", "complete"}
