"""One OpenEnv WebSocket session: lock-step exchanges, poisoning, keep-alive.

There are no request ids in the protocol, so the only thing tying a reply to its request
is order. The session therefore keeps exactly one request in flight and owns a single
reader task that sees every inbound message: a message that arrives while no request is
outstanding is unsolicited, and any failure (timeout, transport, binary, oversized,
malformed or mistyped frame, credential reflection) closes the socket and marks the
session poisoned forever. The request is never resent and a late reply can never be read
as the answer to a later request, because nothing is ever read from a poisoned socket.

Error replies: recoverable codes raise :class:`RecoverableProtocolError` and leave the
session usable; terminal codes raise :class:`TerminalProtocolError` and close it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from kiln_verify.errors import (
    EnvironmentTimeout,
    EnvironmentTransport,
    KilnError,
    ProtocolViolation,
    RecoverableProtocolError,
    SessionBusy,
    SessionClosed,
    SessionPoisoned,
    TerminalProtocolError,
)
from kiln_verify.limits import KEEP_ALIVE_MAX_S, KEEP_ALIVE_MIN_S, MAX_SERVER_FRAME_BYTES
from kiln_verify.openenv.credentials import BearerToken, check_reflection
from kiln_verify.openenv.wire import (
    Observation,
    ProtocolError,
    RequestKind,
    ServerFrame,
    StateResult,
    check_response,
    decode_server_frame,
    encode_close,
    encode_reset,
    encode_state,
    encode_step,
)

T = TypeVar("T")


def keep_alive_interval(request_timeout: float) -> float:
    return min(max(request_timeout / 4, KEEP_ALIVE_MIN_S), KEEP_ALIVE_MAX_S)


def protocol_exception(error: ProtocolError) -> RecoverableProtocolError | TerminalProtocolError:
    """The exception for an error reply; ``.error`` carries the typed reply."""
    cls = TerminalProtocolError if error.is_terminal else RecoverableProtocolError
    exc = cls(f"environment answered {error.describe()}")
    exc.error = error
    return exc


class _Exclusive:
    """``async with``: the session's lock, or :class:`SessionBusy` when it is already held.

    A plain class rather than ``contextlib.asynccontextmanager``: it is entered on every
    exchange, and the generator machinery cost more than the exchange's own bookkeeping.
    """

    __slots__ = ("_lock",)

    def __init__(self, lock: asyncio.Lock) -> None:
        self._lock = lock

    async def __aenter__(self) -> None:
        if self._lock.locked():
            raise SessionBusy("another request is already in flight on this session")
        await self._lock.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()


class Session:
    """A connected session; use :meth:`reset`, :meth:`step`, :meth:`state`, :meth:`close`."""

    def __init__(
        self, connection: ClientConnection, *, request_timeout: float, token: BearerToken | None
    ) -> None:
        self._ws = connection
        self.request_timeout = request_timeout
        self._token = token
        self._lock = asyncio.Lock()
        self._exclusive_guard = _Exclusive(self._lock)
        self._waiter: asyncio.Future[str | bytes] | None = None
        self._requests = 0
        #: Why the session is no longer usable; ``_poisoned`` distinguishes the two endings.
        self._ended: KilnError | None = None
        self._poisoned = False
        self._failed = asyncio.Event()
        self._closer: asyncio.Task[None] | None = None
        self._reader = asyncio.get_running_loop().create_task(self._read_loop())

    # -- state -------------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        return self._ended is None

    @property
    def poisoned(self) -> bool:
        return self._poisoned

    def _end(self, cause: KilnError, *, poison: bool) -> None:
        """Mark the session unusable (once) and wake whoever waits on it."""
        if self._ended is None:
            self._ended = cause
            self._poisoned = poison
        self._failed.set()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(cause)

    def _check_usable(self) -> None:
        if self._ended is None:
            return
        cause = self._ended
        if self._poisoned:
            raise SessionPoisoned(f"the session was poisoned earlier ({cause.code}: {cause.rule})")
        if isinstance(cause, TerminalProtocolError):
            raise cause
        raise SessionClosed(f"the session is closed ({cause.code}: {cause.rule})")

    def _poison(self, cause: KilnError) -> KilnError:
        self._end(cause, poison=True)
        self._abort()
        return cause

    def _abort(self) -> None:
        """Close the socket without waiting: nothing more is ever read from it."""
        if not self._reader.done():
            self._reader.cancel()
        if self._closer is None:
            self._closer = asyncio.get_running_loop().create_task(
                self._quiet_close(CloseCode.POLICY_VIOLATION)
            )

    async def _quiet_close(self, code: int) -> None:
        with contextlib.suppress(Exception):
            await self._ws.close(code)

    # -- reading -----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        try:
            while True:
                message = await self._ws.recv()
                waiter = self._waiter
                if waiter is not None and not waiter.done():
                    self._waiter = None
                    waiter.set_result(message)
                    continue
                self._unsolicited(message)
                return
        except ConnectionClosed as exc:
            self._connection_closed(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the library's own failures: report, never crash the loop
            self._poison(EnvironmentTransport(f"WebSocket read failed: {type(exc).__name__}"))

    def _unsolicited(self, message: str | bytes) -> None:
        """A frame nobody asked for. Before the first request, a terminal error frame is
        the server refusing the session (CAPACITY_REACHED, FACTORY_ERROR): surface it on
        the next call. Anything else fails the session closed."""
        if self._requests == 0 and isinstance(message, str):
            try:
                check_reflection(self._token, message, "an unsolicited frame")
                frame = decode_server_frame(message)
            except KilnError as exc:
                self._poison(exc)
                return
            if isinstance(frame, ProtocolError) and frame.is_terminal:
                self._end(protocol_exception(frame), poison=False)
                self._abort()
                return
        self._poison(ProtocolViolation("the server sent a frame while no request was in flight"))

    def _connection_closed(self, exc: ConnectionClosed) -> None:
        if exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG:
            self._poison(
                ProtocolViolation(
                    f"server frame exceeds MAX_SERVER_FRAME_BYTES = {MAX_SERVER_FRAME_BYTES}"
                )
            )
        elif exc.rcvd is None:
            self._poison(EnvironmentTransport("the connection was lost without a close frame"))
        else:
            self._end(
                SessionClosed(f"the server closed the session (code {exc.rcvd.code})"),
                poison=False,
            )

    # -- exchanges ---------------------------------------------------------------------------

    async def _exchange(self, kind: RequestKind, text: str) -> Observation | StateResult:
        """Send one request and read exactly its reply (the lock is already held)."""
        self._check_usable()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[str | bytes] = loop.create_future()
        self._waiter = waiter
        self._requests += 1
        try:
            async with asyncio.timeout(self.request_timeout):
                # On a closed socket the reader delivers what the server said before
                # closing (a CAPACITY_REACHED frame, say) or why it closed.
                with contextlib.suppress(ConnectionClosed):
                    await self._ws.send(text)
                message = await waiter
        except TimeoutError:
            raise self._poison(
                EnvironmentTimeout(
                    f"{kind.value} got no reply within {self.request_timeout:g} s; the session "
                    "is poisoned and the request is not resent"
                )
            ) from None
        except KilnError:
            raise
        except asyncio.CancelledError:
            self._poison(SessionPoisoned(f"{kind.value} was cancelled while in flight"))
            raise
        finally:
            if self._waiter is waiter:
                self._waiter = None
        return self._interpret(kind, message)

    def _interpret(self, kind: RequestKind, message: str | bytes) -> Observation | StateResult:
        try:
            if isinstance(message, bytes):
                raise ProtocolViolation(f"{kind.value} was answered with a binary frame")
            check_reflection(self._token, message, f"the reply to {kind.value}")
            frame: ServerFrame = check_response(kind, decode_server_frame(message))
        except KilnError as exc:
            raise self._poison(exc) from None
        if isinstance(frame, ProtocolError):
            error = protocol_exception(frame)
            if frame.is_terminal:
                self._end(error, poison=False)
                self._abort()
            raise error
        return frame

    def _exclusive(self) -> _Exclusive:
        return self._exclusive_guard

    async def reset(self, data: Mapping[str, Any] | None = None) -> Observation:
        text = encode_reset(data)
        async with self._exclusive():
            result = await self._exchange(RequestKind.RESET, text)
        assert isinstance(result, Observation)
        return result

    async def step(self, action: Mapping[str, Any]) -> Observation:
        text = encode_step(action)
        async with self._exclusive():
            result = await self._exchange(RequestKind.STEP, text)
        assert isinstance(result, Observation)
        return result

    async def state(self) -> Any:
        """The environment's state (any JSON value)."""
        async with self._exclusive():
            result = await self._exchange(RequestKind.STATE, encode_state())
        assert isinstance(result, StateResult)
        return result.data

    async def keep_alive_while(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` (policy inference) while keeping the session alive.

        Pings are answered by the connection's own reader throughout; every
        :func:`keep_alive_interval` a read-only ``state`` exchange renews servers that
        only count application traffic. Any unsolicited frame or close while waiting
        fails closed: the awaitable is cancelled and the session error is raised.
        """
        task = asyncio.ensure_future(awaitable)
        interval = keep_alive_interval(self.request_timeout)
        try:
            async with self._exclusive():
                self._check_usable()
                failed = asyncio.ensure_future(self._failed.wait())
                try:
                    while True:
                        done, _ = await asyncio.wait(
                            {task, failed}, timeout=interval, return_when=asyncio.FIRST_COMPLETED
                        )
                        if task in done:
                            return task.result()
                        if failed in done:
                            self._check_usable()
                        await self._exchange(RequestKind.STATE, encode_state())
                finally:
                    failed.cancel()
        finally:
            if not task.done():
                task.cancel()

    async def close(self) -> None:
        """Send ``{"type":"close"}`` best effort (no reply exists) and close the socket."""
        if self._ended is None:
            self._end(SessionClosed("the session was closed by the client"), poison=False)
            # asyncio.timeout rather than wait_for: the same bound without a task per call.
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await self._ws.send(encode_close())
        if not self._reader.done():
            self._reader.cancel()
        if self._closer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._closer, 2.0)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2.0):
                await self._ws.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
