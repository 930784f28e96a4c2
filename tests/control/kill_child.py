"""The child process of the SIGKILL test, preloaded into a fork server.

Importing this module imports everything a control-plane process needs before its first
request (uvicorn imports its protocol, loop and lifespan modules lazily), so a forked
child starts serving in tens of milliseconds and the restart loop measures restarts, not
imports.
"""

from __future__ import annotations

from multiprocessing.connection import Connection
from pathlib import Path

import uvicorn.lifespan.on
import uvicorn.loops.asyncio
import uvicorn.protocols.http.h11_impl

from kiln_verify.control import executor
from kiln_verify.server import runner
from tests.control.support import config

PRELOADED = (uvicorn.lifespan.on, uvicorn.loops.asyncio, uvicorn.protocols.http.h11_impl, executor)


def serve_child(state_dir: str, ready: Connection) -> None:
    """The same foreground server `kiln-verify serve` runs, on ``state_dir``."""
    runner.serve_forever(
        config(Path(state_dir), max_active_runs=2, max_tracked_runs=1024),
        lambda url: ready.send(url),
    )
