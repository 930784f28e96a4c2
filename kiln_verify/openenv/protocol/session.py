"""One OpenEnv WebSocket session: lock-step exchanges, poisoning, keep-alive.

There are no request ids in the protocol, so the only thing tying a reply to its request
is order. The session therefore keeps exactly one request in flight, and every inbound
message is accounted for: an exchange reads its reply itself, right after sending (no
reader task, no hand-over through a future: that hop cost a loop turn per exchange); a
message that arrived while no request was outstanding is still queued in the connection
when the next exchange starts, and that exchange refuses it as unsolicited before
sending; while the policy thinks under :meth:`Session.keep_alive_while` a pump task
reads instead, so an unsolicited frame or a close fails the wait at once. Any failure
(timeout, transport, binary, oversized, malformed or mistyped frame, credential
reflection) closes the socket and marks the session poisoned forever. The request is
never resent and a late reply can never be read as the answer to a later request,
because nothing is ever read from a poisoned socket.

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
from websockets.protocol import State

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
from kiln_verify.openenv.protocol.credentials import BearerToken, read_guarded
from kiln_verify.openenv.protocol.wire import (
    Observation,
    ProtocolError,
    RequestKind,
    ServerFrame,
    StateResult,
    check_response,
    classify_server_frame,
    decode_server_frame,
    encode_close,
    encode_reset,
    encode_state,
    encode_step,
    parse_server_frame,
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
    """``with``: the session's one-request-in-flight mark, or :class:`SessionBusy` when it
    is already set.

    Nothing ever waits for it (a second caller is refused, never queued), so a flag does
    what an ``asyncio.Lock`` did here, without the two coroutines its ``async with``
    created on every exchange.
    """

    __slots__ = ("busy",)

    def __init__(self) -> None:
        self.busy = False

    def __enter__(self) -> None:
        if self.busy:
            raise SessionBusy("another request is already in flight on this session")
        self.busy = True

    def __exit__(self, *exc_info: object) -> None:
        self.busy = False


class _Watchdog:
    """A session's request timeout: ``asyncio.timeout`` semantics, one timer for many
    exchanges.

    ``asyncio.timeout`` creates, schedules and cancels a timer per exchange (about 7 us,
    some 10 % of an exchange on the collector's path). Here an exchange only records its
    deadline; the timer armed by an earlier exchange stays armed and, when it fires
    early, re-arms itself at the current deadline (it is re-armed at once only if it
    would fire late, after ``request_timeout`` was lowered). What happens at expiry is exactly
    ``asyncio.timeout``'s: the timer for the current exchange's deadline cancels the
    exchange's task, and on the way out the ``CancelledError`` becomes ``TimeoutError``
    when no other cancellation was requested meanwhile (``Task.uncancel``; called, as
    there, whenever the timer has fired, whatever the exchange raised). A timer that
    fires while no exchange is in flight does nothing and is not re-armed.

    Kept over ``asyncio.timeout`` for a measured reason (docs/performance.md, "Issue 15":
    "The request timeout"): the collect benchmark run in one process, alternating
    this and an ``async with asyncio.timeout(...)`` per exchange round by round (9 rounds,
    twice), used 5-6 % more client CPU with ``asyncio.timeout`` (1.61/1.68 s against
    1.53/1.59 s per round) and 1.43-1.45x a raw websockets loop's wall time against
    1.17-1.19x with this watchdog, which is the difference between meeting the 1.3x
    target and missing it.
    """

    __slots__ = ("_cancelling", "_deadline", "_expiring", "_handle", "_loop", "_task", "_when")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.Handle | None = None
        self._when = 0.0  # when the armed timer fires
        self._task: asyncio.Task[Any] | None = None
        self._deadline = 0.0
        self._cancelling = 0
        self._expiring = False

    def begin(self, delay: float) -> None:
        """``asyncio.timeout(delay).__aenter__()`` for the running task."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("Timeout should be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._deadline = deadline
        self._expiring = False
        handle = self._handle
        if handle is None:
            self._arm(loop)
        elif self._when > deadline:  # a shorter request_timeout than before
            handle.cancel()
            self._arm(loop)

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        when = self._deadline
        self._when = when
        if when <= loop.time():
            self._handle = loop.call_soon(self._fire)
        else:
            self._handle = loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle = None
        task = self._task
        if task is None:
            return
        if self._when != self._deadline:  # armed for an earlier exchange
            assert self._loop is not None
            self._arm(self._loop)
            return
        task.cancel()
        self._expiring = True

    def end(self, exc_type: type[BaseException] | None) -> bool:
        """``__aexit__``: whether the exchange's ``CancelledError`` is its timeout."""
        task, self._task = self._task, None
        if not self._expiring:
            return False
        self._expiring = False
        assert task is not None
        return task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError

    def stop(self) -> None:
        """Disarm (the session is over), unless an exchange still runs under it (a close
        from another task leaves that exchange its deadline, as its own timeout was)."""
        handle = self._handle
        if handle is not None and self._task is None:
            self._handle = None
            handle.cancel()


class _KeepAlivePump:
    """The keep-alive beside a caller that awaits policy inference in its own task.

    The pump starts only once the caller has yielded to the event loop: its task is
    created by a ``call_soon`` callback, so a policy that answers without waiting (a
    scripted or random one) costs one scheduled handle, cancelled when the answer is
    there, and no task, no extra loop turn and no keep-alive exchange. Its task watches
    the connection (a cancel-safe ``recv``) for one interval at a time and sends a
    read-only ``state`` between intervals. When the session fails (an unsolicited frame,
    a close, a failed keep-alive exchange, a close from elsewhere) it records why and
    cancels the caller, but only while the caller still awaits the awaitable: the caller
    clears :attr:`awaiting` synchronously as soon as the awaitable has finished, so a
    cancellation is never left pending for a later, unrelated await. Stopping waits for
    a keep-alive exchange already in flight (cancelling it would poison a healthy
    session) and cancels only the idle watch.
    """

    __slots__ = (
        "_caller",
        "_cancelled",
        "_cancelling",
        "_exchanging",
        "_session",
        "_start",
        "_task",
        "awaiting",
        "failure",
        "stopping",
    )

    def __init__(self, session: Session, caller: asyncio.Task[Any]) -> None:
        self._session = session
        self._caller = caller
        self._cancelling = caller.cancelling()
        self._cancelled = False
        self._exchanging = False
        self.awaiting = True
        self.stopping = False
        self.failure: KilnError | None = None
        self._task: asyncio.Task[None] | None = None
        self._start: asyncio.Handle | None = asyncio.get_running_loop().call_soon(self._begin)

    def _begin(self) -> None:
        """The caller is waiting: start watching, unless the session already ended."""
        self._start = None
        session = self._session
        if not session.usable:
            self._fail(session._why_unusable())
            return
        self._task = asyncio.get_running_loop().create_task(self._run())
        session._watcher = self._task

    def _fail(self, cause: KilnError) -> None:
        if self.failure is None:
            self.failure = cause
        if self.awaiting and not self._cancelled:
            self._cancelled = True
            self._caller.cancel()

    async def _run(self) -> None:
        session = self._session
        interval = keep_alive_interval(session.request_timeout)
        try:
            while not self.stopping:
                try:
                    async with asyncio.timeout(interval):
                        # Returns only when something arrived: that always ends the session.
                        await session._read_idle()
                except TimeoutError:
                    pass
                else:
                    self._fail(session._why_unusable())
                    return
                if self.stopping:
                    return
                self._exchanging = True
                try:
                    await session._exchange(RequestKind.STATE, encode_state())
                finally:
                    self._exchanging = False
        except asyncio.CancelledError:
            if not self.stopping:  # stopped from elsewhere (the session was closed)
                self._fail(session._why_unusable())
            raise
        except KilnError as exc:
            self._fail(exc)

    def settle(self) -> bool:
        """Called by the caller right after its await ends: stop cancelling it, and say
        whether this pump's cancellation is the one that ended the await (``uncancel``)."""
        self.awaiting = False
        if not self._cancelled:
            return False
        self._cancelled = False
        return self._caller.uncancel() <= self._cancelling

    def failure_or_closed(self) -> KilnError:
        return self.failure or SessionClosed("the session ended while the policy was thinking")

    async def stop(self) -> None:
        self.awaiting = False
        self.stopping = True
        start, task = self._start, self._task
        if start is not None:  # the caller never waited: nothing was started
            self._start = None
            start.cancel()
            return
        if task is None:  # _begin found the session ended
            return
        if self._session._watcher is task:
            self._session._watcher = None
        if not task.done() and not self._exchanging:
            task.cancel()
        await asyncio.wait((task,))


class Session:
    """A connected session; use :meth:`reset`, :meth:`step`, :meth:`state`, :meth:`close`."""

    def __init__(
        self, connection: ClientConnection, *, request_timeout: float, token: BearerToken | None
    ) -> None:
        self._ws = connection
        self.request_timeout = request_timeout
        self._token = token
        self._exclusive_guard = _Exclusive()
        self._requests = 0
        #: Why the session is no longer usable; ``_poisoned`` distinguishes the two endings.
        self._ended: KilnError | None = None
        self._poisoned = False
        self._closer: asyncio.Task[None] | None = None
        #: The keep-alive pump's task while :meth:`keep_alive_while` waits (and only then).
        self._watcher: asyncio.Task[None] | None = None
        self._watchdog = _Watchdog()

    # -- state -------------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        return self._ended is None

    @property
    def poisoned(self) -> bool:
        return self._poisoned

    @property
    def ended(self) -> KilnError | None:
        """Why the session is no longer usable (``None`` while it is)."""
        return self._ended

    async def ready(self) -> bool:
        """Whether the session can take a request now, sending nothing: what arrived while
        it was idle (the server's close, an unsolicited frame) is read first and ends it,
        exactly as the next exchange would. A client that keeps one session across
        episodes asks before the next reset, so a session the server closed while idle is
        replaced instead of failing the episode."""
        with self._exclusive():
            if self._ended is None and self._idle_input():
                await self._read_idle()
        return self._ended is None

    def _end(self, cause: KilnError, *, poison: bool) -> None:
        """Mark the session unusable (once)."""
        if self._ended is None:
            self._ended = cause
            self._poisoned = poison

    def _check_usable(self) -> None:
        if self._ended is not None:
            raise self._why_unusable()

    def _why_unusable(self) -> KilnError:
        """What a call on the ended session raises (``SessionClosed`` if it has not ended)."""
        cause = self._ended
        if cause is None:
            return SessionClosed("the session was closed")
        if self._poisoned:
            return SessionPoisoned(f"the session was poisoned earlier ({cause.code}: {cause.rule})")
        if isinstance(cause, TerminalProtocolError):
            return cause
        return SessionClosed(f"the session is closed ({cause.code}: {cause.rule})")

    def _poison(self, cause: KilnError) -> KilnError:
        self._end(cause, poison=True)
        self._abort()
        return cause

    def _abort(self) -> None:
        """Close the socket without waiting: nothing more is ever read from it."""
        self._stop_watching()
        if self._closer is None:
            self._closer = asyncio.get_running_loop().create_task(
                self._quiet_close(CloseCode.POLICY_VIOLATION)
            )

    async def _quiet_close(self, code: int) -> None:
        with contextlib.suppress(Exception):
            await self._ws.close(code)

    # -- reading -----------------------------------------------------------------------------

    def _idle_input(self) -> bool:
        """Whether something arrived while no request was in flight: a queued frame, or
        the end of the connection (which the next read reports)."""
        if self._ws.state is State.CLOSED:
            return True
        # The connection's inbound queue (websockets' Assembler): a whole or partial
        # message that nobody has read yet.
        return len(self._ws.recv_messages.frames) > 0

    async def _read_idle(self) -> None:
        """Read one inbound event while no request is in flight; it always ends the
        session (an unsolicited frame, or the connection's end)."""
        try:
            message = await self._ws.recv()
        except ConnectionClosed as exc:
            self._connection_closed(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the library's own failures: report, never crash
            self._poison(EnvironmentTransport(f"WebSocket read failed: {type(exc).__name__}"))
        else:
            self._unsolicited(message)

    def _stop_watching(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None and not watcher.done() and watcher is not asyncio.current_task():
            watcher.cancel()

    def _unsolicited(self, message: str | bytes) -> None:
        """A frame nobody asked for. Before the first request, a terminal error frame is
        the server refusing the session (CAPACITY_REACHED, FACTORY_ERROR): surface it on
        the next call. Anything else fails the session closed."""
        if self._requests == 0 and isinstance(message, str):
            try:
                frame = self._decode(message, "an unsolicited frame")
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
        watchdog = self._watchdog
        try:
            # The request timeout, as ``async with asyncio.timeout(self.request_timeout)``
            # (see _Watchdog).
            watchdog.begin(self.request_timeout)
            try:
                if self._idle_input():
                    # What the server said before this request (a CAPACITY_REACHED frame
                    # before the first one, say) or why it closed: never a reply.
                    await self._read_idle()
                    self._check_usable()
                self._requests += 1
                # On a socket the server has just closed the read below reports why.
                # (try/except: contextlib.suppress costs an object per exchange)
                try:  # noqa: SIM105
                    await self._ws.send(text)
                except ConnectionClosed:
                    pass
                try:
                    message = await self._ws.recv()
                except ConnectionClosed as exc:
                    self._connection_closed(exc)
                    raise self._closed_cause() from None
                except (asyncio.CancelledError, KilnError):
                    raise
                except Exception as exc:  # the library's own failures
                    raise self._poison(
                        EnvironmentTransport(f"WebSocket read failed: {type(exc).__name__}")
                    ) from None
            except BaseException as exc:
                if watchdog.end(type(exc)):
                    raise TimeoutError from exc
                raise
            watchdog.end(None)
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
        return self._interpret(kind, message)

    def _closed_cause(self) -> KilnError:
        """Why the session ended, after the connection closed under an exchange."""
        cause = self._ended
        assert cause is not None
        return cause

    def _interpret(self, kind: RequestKind, message: str | bytes) -> Observation | StateResult:
        try:
            if isinstance(message, bytes):
                raise ProtocolViolation(f"{kind.value} was answered with a binary frame")
            if self._token is None:  # (nothing to reflect: the plain, fastest path)
                frame: ServerFrame = decode_server_frame(message)
            else:
                frame = self._decode(message, f"the reply to {kind.value}")
            frame = check_response(kind, frame)
        except KilnError as exc:
            raise self._poison(exc) from None
        if isinstance(frame, ProtocolError):
            error = protocol_exception(frame)
            if frame.is_terminal:
                self._end(error, poison=False)
                self._abort()
            raise error
        return frame

    def _decode(self, message: str, where: str) -> ServerFrame:
        """A text frame's typed reply, refused as ``credential_reflected`` when the token
        is in it in any spelling (raw, or JSON-escaped in any key or string), before any
        part of it can reach an error message or a record."""
        return classify_server_frame(read_guarded(self._token, message, where, parse_server_frame))

    def _exclusive(self) -> _Exclusive:
        return self._exclusive_guard

    async def reset(self, data: Mapping[str, Any] | None = None) -> Observation:
        text = encode_reset(data)
        with self._exclusive():
            result = await self._exchange(RequestKind.RESET, text)
        assert isinstance(result, Observation)
        return result

    async def step(self, action: Mapping[str, Any]) -> Observation:
        text = encode_step(action)
        with self._exclusive():
            result = await self._exchange(RequestKind.STEP, text)
        assert isinstance(result, Observation)
        return result

    async def state(self) -> Any:
        """The environment's state (any JSON value)."""
        with self._exclusive():
            result = await self._exchange(RequestKind.STATE, encode_state())
        assert isinstance(result, StateResult)
        return result.data

    async def keep_alive_while(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` (policy inference) while keeping the session alive.

        The awaitable runs in the caller's own task, from its first step to its last:
        HTTP clients built on anyio (httpx, httpcore) bind their cancel scopes and locks to
        the task that entered them, so re-hosting a half-run call in another task breaks
        them on the first real server. The keep-alive runs beside it instead, in a pump
        task (:class:`_KeepAlivePump`): pings are answered by the connection's own reader
        throughout; every :func:`keep_alive_interval` a read-only ``state`` exchange renews
        servers that only count application traffic; any unsolicited frame or close while
        waiting fails closed: the caller's await is cancelled (as ``asyncio.timeout``
        cancels, and with its ``uncancel`` rule) and the session error is raised instead.
        """
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("keep_alive_while must run inside a task")
        with self._exclusive():
            self._check_usable()
            pump = _KeepAlivePump(self, task)
            try:
                result = await awaitable
            except asyncio.CancelledError:
                if pump.settle():
                    raise pump.failure_or_closed() from None
                raise
            except BaseException:
                if pump.settle() or pump.failure is not None:
                    raise pump.failure_or_closed() from None
                raise
            finally:
                await pump.stop()
            if pump.settle() or pump.failure is not None:
                raise pump.failure_or_closed()
            return result

    async def close(self) -> None:
        """Send ``{"type":"close"}`` best effort (no reply exists) and close the socket."""
        if self._ended is None:
            self._end(SessionClosed("the session was closed by the client"), poison=False)
            # asyncio.timeout rather than wait_for: the same bound without a task per call.
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await self._ws.send(encode_close())
        self._stop_watching()
        self._watchdog.stop()
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
