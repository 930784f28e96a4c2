"""SIGINT and SIGTERM during a real ``kiln-verify openenv rollout`` process.

The collector runs in a child process against a slowed oracle (``delay-step``); the signal
arrives mid-collection. The command must say in one line what it stopped, how many groups
had completed and that nothing was published, exit 130, and leave no file at all (no
bundle file, no staging residue) in the output directory.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.openenv.collect.conftest import Start

pytestmark = pytest.mark.slow

_LINE = re.compile(
    r"error: interrupted: rollout stopped by (SIGINT|SIGTERM) after (\d+) of 40 groups had "
    r"completed; nothing was published \(fix: run the command again to collect from the start\)"
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_collection_with_nothing_published(
    start: Start, tmp_path: Path, signum: signal.Signals
) -> None:
    handle = start("counter", faults=["delay-step=0.05"])
    out = tmp_path / "out"
    out.mkdir()
    argv = [sys.executable, "-c", "from kiln_verify.cli import main; main()",
            "openenv", "rollout", "--environment", handle.base_url, "--groups", "40",
            "--group-size", "2", "--max-steps", "4", "--output", str(out / "d.jsonl"),
            "--replay-output", str(out / "r.json"),
            "--summary-output", str(out / "s.json")]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    # Wait until the child has sessions open (groups are under way), then signal it.
    while handle.active_sessions == 0:
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(1.0)
    os.kill(child.pid, signum)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 130, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    match = _LINE.fullmatch(lines[0])
    assert match is not None, lines[0]
    assert match.group(1) == signum.name
    assert 1 <= int(match.group(2)) < 40
    assert stdout == ""
    assert sorted(os.listdir(out)) == []
    # The server saw every session closed.
    for _ in range(200):
        if handle.active_sessions == 0:
            break
        time.sleep(0.01)
    assert handle.active_sessions == 0
