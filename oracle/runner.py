"""Start oracle servers in-process (tests, fixtures) or in the foreground (the CLI).

Every server gets its own uvicorn instance, event loop and daemon thread, listening on a
socket bound here before uvicorn starts, so port 0 yields a free port with no race. A
handle is returned only after uvicorn reports `started` *and* `/health` answers, so a
caller can connect immediately.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType

import uvicorn

from oracle.app import OracleApp
from oracle.base import Environment
from oracle.context import DEFAULT_MAX_SESSIONS
from oracle.faults import Faults, parse_faults
from oracle.inventory import environment_class

#: Inbound WebSocket frame limit (uvicorn's default, as OpenEnv serves it): close 1009 above.
WS_MAX_SIZE = 16 * 1024 * 1024
#: The uvicorn WebSocket implementation; see `oracle/README.md` ("Serving") for the numbers.
WS_IMPLEMENTATION = "websockets-sansio"
STARTUP_TIMEOUT_S = 15.0
SHUTDOWN_TIMEOUT_S = 5.0


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """One server; `faults` takes a parsed `Faults` or command-line profile strings."""

    name: str
    host: str = "127.0.0.1"
    port: int = 0
    max_sessions: int = DEFAULT_MAX_SESSIONS
    faults: Faults | Sequence[str] = ()
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    #: Negotiate RFC 7692 compression when a client offers it (OpenEnv's uvicorn default).
    #: Off by default: observation frames are small, and deflating them costs both the
    #: server and its client more CPU than the bytes saved are worth on loopback.
    per_message_deflate: bool = False
    #: Serve this class instead of the inventory's `name` (tests use throwaway classes).
    environment: type[Environment] | None = None

    def parsed_faults(self) -> Faults:
        return self.faults if isinstance(self.faults, Faults) else parse_faults(self.faults)

    def environment_class(self) -> type[Environment]:
        return self.environment or environment_class(self.name)


class ServerHandle:
    """A running server; `stop()` is idempotent."""

    def __init__(
        self,
        config: ServerConfig,
        app: OracleApp,
        server: _Server,
        thread: threading.Thread,
        port: int,
    ) -> None:
        self.config = config
        self.name = config.name
        self.app = app
        self.port = port
        self.base_url = f"http://{_url_host(config.host)}:{port}"
        self.ws_url = f"ws://{_url_host(config.host)}:{port}/ws"
        self._server = server
        self._thread = thread

    @property
    def active_sessions(self) -> int:
        return self.app.active_sessions

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._server.request_exit()
        self._thread.join(SHUTDOWN_TIMEOUT_S)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(SHUTDOWN_TIMEOUT_S)

    def __repr__(self) -> str:
        return f"ServerHandle({self.name!r}, {self.base_url!r})"


def start_server(spec: str | ServerConfig) -> ServerHandle:
    return start_servers([spec])[0]


def start_servers(specs: Sequence[str | ServerConfig]) -> list[ServerHandle]:
    """Start all servers concurrently; on any failure the ones already started are stopped."""
    configs = [ServerConfig(spec) if isinstance(spec, str) else spec for spec in specs]
    launched: list[ServerHandle] = []
    try:
        for config in configs:
            launched.append(_launch(config))
        for handle in launched:
            _wait_ready(handle)
    except BaseException:
        for handle in launched:
            handle.stop()
        raise
    return launched


@contextlib.contextmanager
def serve(specs: str | ServerConfig | Sequence[str | ServerConfig]) -> Iterator[list[ServerHandle]]:
    """`with serve(["counter", "bandit"]) as (counter, bandit): ...`; stops all on exit."""
    if isinstance(specs, str | ServerConfig):
        specs = [specs]
    handles = start_servers(specs)
    try:
        yield handles
    finally:
        for handle in handles:
            handle.stop()


def serve_forever(
    config: ServerConfig, on_ready: Callable[[ServerHandle], None] | None = None
) -> ServerHandle:
    """Serve until SIGINT or SIGTERM reaches the main thread, then stop cleanly.

    `on_ready` runs once `/health` answers (the CLI prints the base URL there). Must be
    called from the main thread, which owns signal handling.
    """
    stop = threading.Event()

    def _signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        handle = start_server(config)
        try:
            if on_ready is not None:
                on_ready(handle)
            while not stop.wait(0.2) and handle.running:
                pass
        finally:
            handle.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return handle


def _launch(config: ServerConfig) -> ServerHandle:
    app = OracleApp(
        config.environment_class(), max_sessions=config.max_sessions, faults=config.parsed_faults()
    )
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit this: uvicorn writes HTTP headers and body separately,
        # and Nagle plus delayed ACK would add 40 ms to every HTTP response.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((config.host, config.port))
    except OSError:
        sock.close()
        raise
    port = sock.getsockname()[1]
    uv_config = uvicorn.Config(
        app,
        ws=WS_IMPLEMENTATION,
        ws_max_size=WS_MAX_SIZE,
        ws_ping_interval=config.ping_interval,
        ws_ping_timeout=config.ping_timeout,
        ws_per_message_deflate=config.per_message_deflate,
        lifespan="off",
        log_config=None,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    server = _Server(uv_config)
    _quiet_uvicorn()

    def _run() -> None:
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()

    thread = threading.Thread(target=_run, name=f"oracle-{config.name}", daemon=True)
    thread.start()
    return ServerHandle(config, app, server, thread, port)


class _Server(uvicorn.Server):
    """uvicorn's server, woken by `request_exit()` at once instead of polling for it.

    uvicorn's own loop ticks every 100 ms and notices `should_exit` only then; polling
    every 10 ms instead cost each idle server 1.5 % of a core (a gate runs 23 of them at
    once). Here the loop keeps uvicorn's 100 ms tick and waits on an event between ticks,
    so a stop is still noticed at once and an idle server sleeps.
    """

    _loop: asyncio.AbstractEventLoop | None = None
    _wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)
            counter = (counter + 1) % 864000
            should_exit = await self.on_tick(counter)

    def request_exit(self) -> None:
        """Set `should_exit` and wake the loop (from any thread)."""
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(wake.set)


def _wait_ready(handle: ServerHandle) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not handle._server.started:
        if not handle.running or time.monotonic() > deadline:
            raise RuntimeError(f"oracle server {handle.name!r} failed to start")
        time.sleep(0.005)
    token = handle.app.ctx.token
    request = b"GET /health HTTP/1.1\r\nHost: %s:%d\r\n" % (
        _url_host(handle.config.host).encode("ascii"),
        handle.port,
    )
    if token:
        request += b"Authorization: Bearer " + token + b"\r\n"
    request += b"Connection: close\r\n\r\n"
    while True:
        if _health_answers(handle.config.host, handle.port, request):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"oracle server {handle.name!r} never answered /health")
        time.sleep(0.01)


def _health_answers(host: str, port: int, request: bytes) -> bool:
    """One GET /health over a plain socket: True when the status line says 200.

    A socket rather than `http.client`: that module (with the email parser and, through
    `getaddrinfo`, the IDNA codec) was imported for this one probe by every server start.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.settimeout(2)
            probe.connect((host, port))
            probe.sendall(request)
            head = b""
            while b"\r\n" not in head and len(head) < 64:
                chunk = probe.recv(64)
                if not chunk:
                    break
                head += chunk
    except OSError:
        return False
    return head.split(b"\r\n", 1)[0].split(b" ")[1:2] == [b"200"]


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class _ClientNoise(logging.Filter):
    """Drops uvicorn's tracebacks for things a hostile client did on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Invalid UTF-8 sequence")


_NOISE = _ClientNoise()


def _quiet_uvicorn() -> None:
    logger = logging.getLogger("uvicorn.error")
    if _NOISE not in logger.filters:
        logger.addFilter(_NOISE)
