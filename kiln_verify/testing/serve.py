"""``kiln-verify serve`` as a real child process, for the tests and the control-plane benchmark.

The server prints one line once it listens (``kiln-verify serve: listening on URL ...``);
:data:`READY_LINE` finds the URL in it, so every caller waits for the same sign of life.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

__all__ = ["READY_LINE", "ServeProcess"]

READY_LINE = re.compile(r"listening on (http://\S+)")


class ServeProcess:
    """``kiln-verify serve`` as a real child process (the console script's entry point)."""

    def __init__(self, state_dir: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        command = [
            sys.executable,
            "-c",
            "from kiln_verify.cli import main; main()",
            "serve",
            "--port",
            "0",
            "--state-dir",
            str(state_dir),
            *extra,
        ]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        found = READY_LINE.search(line)
        if found is None:
            self.process.kill()
            _, err = self.process.communicate(timeout=10)
            raise AssertionError(f"kiln-verify serve did not start: {line!r} {err[-2000:]}")
        self.url = found.group(1)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return self.process.returncode
