"""Serve one ASGI app (``module:attribute``) from a package directory on a free loopback port.

This is ``uvicorn server.app:app`` run from the package directory, as OpenEnv's generated
README says to serve an ``openenv init`` environment, with two changes a test needs: the
socket is bound to port 0 here (no race for a "free" port), and the base URL is printed
once uvicorn listens (the line ``benchmarks._common.start_server_process`` waits for).
uvicorn keeps its defaults otherwise (permessage-deflate on, like a deployment).

It imports only the standard library and uvicorn, so any interpreter can run it by path
-- the test suite's own, or a separate virtual environment holding another OpenEnv
release (``tests/interop/legacy_openenv.py``):

    python tests/interop/serve_app.py --exit-on-stdin-eof APP_DIR server.app:app

It exits on SIGTERM/SIGINT and, with ``--exit-on-stdin-eof``, when its stdin reaches EOF.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import uvicorn


class _Server(uvicorn.Server):
    """uvicorn, with signals left to :func:`serve` (which also watches stdin)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def load_app(app_dir: Path, target: str) -> Any:
    """Import ``module:attribute`` with ``app_dir`` first on ``sys.path`` (as uvicorn's
    ``--app-dir``); this script's own directory is taken off the path first, so nothing
    beside it can shadow a module of the served package."""
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [entry for entry in sys.path if entry and Path(entry).resolve() != Path(here)]
    sys.path.insert(0, str(app_dir))
    os.chdir(app_dir)
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute or "app")


async def serve(app: Any, *, watch_stdin: bool) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = _Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=3))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(0, 65536):
                pass
        loop.call_soon_threadsafe(stop.set)

    if watch_stdin:
        threading.Thread(target=watch, daemon=True).start()
    while not server.started:
        if task.done():
            await task  # surfaces the start-up error
            raise SystemExit("the server stopped during start-up")
        await asyncio.sleep(0.01)
    host, port = sock.getsockname()[:2]
    print(f"http://{host}:{port}", flush=True)
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait([waiter, task], return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    waiter.cancel()
    await asyncio.gather(task, return_exceptions=True)


def main(argv: Sequence[str]) -> int:
    watch = "--exit-on-stdin-eof" in argv
    positional = [argument for argument in argv if not argument.startswith("--")]
    if len(positional) != 2:
        print("usage: serve_app.py [--exit-on-stdin-eof] APP_DIR MODULE:ATTRIBUTE")
        return 2
    os.environ.pop("ENABLE_WEB_INTERFACE", None)  # the API app only, as in every peer here
    app = load_app(Path(positional[0]).resolve(), positional[1])
    asyncio.run(serve(app, watch_stdin=watch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
