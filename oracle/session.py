"""One WebSocket session on `/ws`, with OpenEnv 0.10.0's exact semantics.

Accept first, then reserve a slot (capacity and factory failures are reported as the only
frame, then close 1000); afterwards strictly one reply per request, in order. The slot is
released in a `finally`, so no ending (close message, disconnect, terminal error, fault,
cancellation at shutdown) can leak it. Environment calls run inline: they are tiny, and
skipping OpenEnv's executor hop is most of why the oracle is faster.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from uvicorn.protocols.utils import ClientDisconnected

from oracle import jsonrpc
from oracle.base import Environment
from oracle.context import AttachRefused, CapacityRefused, ServerContext
from oracle.validation import envelope_errors
from oracle.wire import (
    CAPACITY_REACHED,
    EXECUTION_ERROR,
    FACTORY_ERROR,
    INVALID_JSON,
    SESSION_ERROR,
    UNKNOWN_TYPE,
    VALIDATION_ERROR,
    UnencodableFrame,
    dumps,
    error_frame,
    observation_frame,
)

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class _Terminal(Exception):
    """A `SESSION_ERROR`: reply once, then close 1000."""


class WebSocketSession:
    def __init__(self, ctx: ServerContext, receive: Receive, send: Send,
                 authorization: str | None) -> None:
        self.ctx = ctx
        self.receive = receive
        self._send = send
        self.authorization = authorization
        self.env: Environment | None = None
        self.steps = 0
        #: What `openenv/session/create` names over this socket's `mcp` messages.
        self.session_id = str(uuid.uuid4())
        #: A receive already started by `unsolicited-frame` while it watched for idleness.
        self._pending: asyncio.Future[dict[str, Any]] | None = None

    async def send(self, frame: dict[str, Any]) -> None:
        try:
            text = dumps(frame)
        except UnencodableFrame as exc:
            raise _Terminal(str(exc)) from None
        await self._send({"type": "websocket.send", "text": text})

    async def run(self, session_id: str | None) -> None:
        await self._send({"type": "websocket.accept"})
        try:
            if session_id:
                await self._attached(session_id)
            else:
                await self._admitted()
        except ClientDisconnected:
            return
        await self.close()

    async def close(self) -> None:
        with contextlib.suppress(ClientDisconnected, RuntimeError, OSError):
            await self._send({"type": "websocket.close", "code": 1000})

    async def _admitted(self) -> None:
        ctx = self.ctx
        try:
            ctx.acquire()
        except CapacityRefused as exc:
            await self.send(error_frame(CAPACITY_REACHED, str(exc), active_sessions=exc.active,
                                        max_sessions=exc.maximum))
            return
        try:
            try:
                self.env = ctx.make_env()
            except Exception:
                name = ctx.env.__name__
                await self.send(error_frame(
                    FACTORY_ERROR, f"Environment factory '{name}' failed to create instance.",
                    factory_name=name))
                return
            try:
                await self._loop()
            except _Terminal as exc:
                await self.send(error_frame(SESSION_ERROR, str(exc)))
        finally:
            ctx.release()
            if self._pending is not None:
                self._pending.cancel()

    async def _attached(self, session_id: str) -> None:
        """`/ws?session_id=`: use an HTTP MCP session's environment and slot (no new one);
        when the socket ends, the session stays unless a close arrived meanwhile."""
        ctx = self.ctx
        try:
            self.env = ctx.attach(session_id)
        except AttachRefused as exc:
            await self.send(error_frame(SESSION_ERROR, str(exc)))
            return
        self.session_id = session_id
        try:
            try:
                await self._loop()
            except _Terminal as exc:
                await self.send(error_frame(SESSION_ERROR, str(exc)))
        finally:
            ctx.detach(session_id)
            if self._pending is not None:
                self._pending.cancel()

    async def _next_event(self) -> dict[str, Any] | None:
        """The next client event; ``None`` once `idle-close` closed the idle session."""
        if self._pending is not None:
            event, self._pending = await self._pending, None
            return event
        idle = self.ctx.faults.idle_close
        if idle is None:
            return await self.receive()
        pending = asyncio.ensure_future(self.receive())
        done, _ = await asyncio.wait((pending,), timeout=idle)
        if done:
            return pending.result()
        self._pending = pending  # cancelled when the session ends
        await self._send({"type": "websocket.close", "code": 1001})
        return None

    async def _loop(self) -> None:
        while True:
            event = await self._next_event()
            if event is None or event["type"] == "websocket.disconnect":
                return
            text = event.get("text")
            if text is None:
                raise _Terminal("'text'")
            try:
                message = json.loads(text)
            except json.JSONDecodeError as exc:
                await self.send(error_frame(INVALID_JSON, f"Invalid JSON: {exc}"))
                continue
            except RecursionError as exc:
                raise _Terminal(str(exc)) from None
            if not isinstance(message, dict):
                raise _Terminal(f"'{type(message).__name__}' object has no attribute 'get'")
            if await self._handle(message) is False:
                return

    async def _handle(self, message: dict[str, Any]) -> bool:
        """Answer one message; False ends the session (a valid `close`)."""
        kind = message.get("type", "")
        try:
            if kind == "step":
                await self._step(message)
            elif kind == "reset":
                await self._reset(message)
            elif kind == "state":
                _check(envelope_errors(message, data="forbidden"))
                await self.send({"type": "state", "data": self._env().state()})
            elif kind == "close":
                _check(envelope_errors(message, data="forbidden"))
                return False
            elif kind == "mcp":
                _check(envelope_errors(message, data="required"))
                reply = jsonrpc.answer(message["data"], session_id=self.session_id,
                                       ctx=self.ctx, env=self.env)
                await self.send({"type": "mcp", "data": reply})
            else:
                await self.send(error_frame(UNKNOWN_TYPE, f"Unknown message type: {kind}"))
        except _Invalid as exc:
            await self.send(error_frame(VALIDATION_ERROR, "Invalid message", errors=exc.errors))
        except (_Terminal, ClientDisconnected, asyncio.CancelledError):
            raise
        except Exception as exc:
            await self.send(error_frame(EXECUTION_ERROR, str(exc)))
        return True

    def _env(self) -> Environment:
        assert self.env is not None
        return self.env

    async def _reset(self, message: dict[str, Any]) -> None:
        _check(envelope_errors(message, data="optional"))
        ctx = self.ctx
        outcome = ctx.reset(self._env(), message.get("data", {}))
        observation = dict(outcome.observation)
        ctx.decorate_reset(observation, self.authorization)
        ctx.count_reset()
        frame = observation_frame(observation, outcome.reward, outcome.done)
        await self.send(frame)
        if ctx.faults.unsolicited_frame is not None:
            await self._push_when_idle(frame, ctx.faults.unsolicited_frame)

    async def _step(self, message: dict[str, Any]) -> None:
        faults = self.ctx.faults
        if faults.drop_after_steps is not None and self.steps >= faults.drop_after_steps:
            raise ClientDisconnected  # uvicorn closes the TCP connection, no close frame
        _check(envelope_errors(message, data="required"))
        data: dict[str, Any] = message["data"]
        _check(self.ctx.action_errors(data))
        if faults.delay_step is not None:
            await asyncio.sleep(faults.delay_step)
        if "metadata" in data:
            data = {key: value for key, value in data.items() if key != "metadata"}
        outcome = self._env().step(data)
        self.steps += 1
        frame = observation_frame(outcome.observation, outcome.reward, outcome.done)
        if faults.wrong_response_type:
            frame = {"type": "state", "data": self._env().state()}
        if faults.oversized_frame is not None:
            body = frame["data"].get("observation", frame["data"])
            body["padding"] = "x" * faults.oversized_frame
        if faults.binary_frame:
            await self._send({"type": "websocket.send", "bytes": dumps(frame).encode()})
        else:
            await self.send(frame)

    async def _push_when_idle(self, frame: dict[str, Any], seconds: float) -> None:
        """`unsolicited-frame`: a second copy of the reset reply if no request arrives."""
        pending = asyncio.ensure_future(self.receive())
        self._pending = pending
        done, _ = await asyncio.wait((pending,), timeout=seconds)
        if not done:
            await self.send(frame)


def _check(errors: list[dict[str, Any]]) -> None:
    if errors:
        raise _Invalid(errors)


class _Invalid(Exception):
    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__("Invalid message")
        self.errors = errors
