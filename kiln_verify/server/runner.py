"""Running the control plane on uvicorn: in the foreground (the CLI) or in a thread (tests).

The listening socket is bound here (``port = 0`` picks a free one, reported by
:class:`ServerHandle`), with ``TCP_NODELAY`` so that small JSON answers are not delayed by
Nagle and delayed ACKs. In the foreground uvicorn handles SIGINT and SIGTERM: active runs
are stopped without recording an outcome, so the next start fails them with
``run_interrupted``, exactly as after a crash.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from types import FrameType

import uvicorn

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.kind import KindTable
from kiln_verify.control.kinds import KINDS
from kiln_verify.server.app import create_app

__all__ = ["ServerHandle", "bind", "serve_forever", "start_in_thread"]

STARTUP_TIMEOUT_S = 30.0
SHUTDOWN_TIMEOUT_S = 15.0


def bind(host: str, port: int) -> socket.socket:
    """A bound (not yet listening) TCP socket for ``host:port``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class _Server(uvicorn.Server):
    """uvicorn's server that reports readiness once its lifespan has started."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None] | None) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # uvicorn re-raises a captured signal after its graceful shutdown, so the process
        # would die of it; a requested stop is a clean exit with status 0 instead.
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list):
            captured.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self._on_ready is not None and not self.should_exit:
            self._on_ready()


def _uvicorn_config(config: ServerConfig, kinds: KindTable) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(config, kinds),
        lifespan="on",
        log_config=None,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
        ws="none",
    )


class ServerHandle:
    """A control plane serving in a daemon thread; ``stop()`` is idempotent."""

    def __init__(self, server: _Server, thread: threading.Thread, host: str, port: int) -> None:
        self._server = server
        self._thread = thread
        self.port = port
        self.base_url = _url(host, port)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(SHUTDOWN_TIMEOUT_S)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(SHUTDOWN_TIMEOUT_S)


def start_in_thread(config: ServerConfig, kinds: KindTable = KINDS) -> ServerHandle:
    """Serve ``config`` in a daemon thread; returns once the lifespan has restored state.

    ``kinds`` are the run kinds served (tests plug one in without touching the server)."""
    sock = bind(config.host, config.port)
    ready = threading.Event()
    server = _Server(_uvicorn_config(config, kinds), ready.set)

    def run() -> None:
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
            ready.set()

    thread = threading.Thread(target=run, name="kiln-verify-serve", daemon=True)
    thread.start()
    handle = ServerHandle(server, thread, config.host, sock.getsockname()[1])
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not ready.wait(0.01):
        if time.monotonic() > deadline:
            handle.stop()
            raise RuntimeError("the control plane did not start in time")
    if not server.started:
        raise RuntimeError("the control plane failed to start (see the log output)")
    return handle


def serve_forever(config: ServerConfig, on_ready: Callable[[str], None] | None = None) -> bool:
    """Serve in the foreground until SIGINT/SIGTERM; ``on_ready(base_url)`` once listening.

    Returns whether the server started at all (``False``: its start-up failed and was
    logged, e.g. an unreadable state directory)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
    sock = bind(config.host, config.port)
    url = _url(config.host, sock.getsockname()[1])
    server = _Server(_uvicorn_config(config, KINDS), (lambda: on_ready(url)) if on_ready else None)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return bool(server.started)
