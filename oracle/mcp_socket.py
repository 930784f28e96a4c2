"""`WS /mcp`: OpenEnv's JSON-RPC-over-WebSocket route, on the socket's own environment.

Same lifecycle as `/ws` (accept, then a session slot; capacity and factory failures are
one JSON-RPC -32000 error, then close), then one JSON-RPC response per text frame. OpenEnv
writes these frames with `json.dumps` defaults (`", "`/`": "` separators, ASCII escapes),
unlike every other frame it sends, and the oracle keeps that difference.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any

from uvicorn.protocols.utils import ClientDisconnected

from oracle import jsonrpc
from oracle.base import Environment
from oracle.context import CapacityRefused, ServerContext
from oracle.session import Receive, Send


class _Terminal(Exception):
    """An error outside the per-frame handling: one -32000 response, then close."""


class McpSocket:
    def __init__(self, ctx: ServerContext, receive: Receive, send: Send) -> None:
        self.ctx = ctx
        self.receive = receive
        self._send = send
        self.session_id = str(uuid.uuid4())
        self.env: Environment | None = None

    async def send(self, value: dict[str, Any]) -> None:
        await self._send({"type": "websocket.send", "text": json.dumps(value)})

    async def run(self) -> None:
        await self._send({"type": "websocket.accept"})
        try:
            await self._admitted()
        except ClientDisconnected:
            return
        with contextlib.suppress(ClientDisconnected, RuntimeError, OSError):
            await self._send({"type": "websocket.close", "code": 1000})

    async def _admitted(self) -> None:
        ctx = self.ctx
        try:
            ctx.acquire()
        except CapacityRefused as exc:
            await self.send(jsonrpc.response(
                jsonrpc.SERVER_ERROR, str(exc),
                data={"active_sessions": exc.active, "max_sessions": exc.maximum}))
            return
        try:
            try:
                self.env = ctx.make_env()
            except Exception:
                name = ctx.env.__name__
                await self.send(jsonrpc.response(
                    jsonrpc.SERVER_ERROR,
                    f"Environment factory '{name}' failed to create instance.",
                    data={"factory_name": name}))
                return
            try:
                await self._loop()
            except _Terminal as exc:
                await self.send(jsonrpc.response(jsonrpc.SERVER_ERROR, str(exc)))
        finally:
            ctx.release()

    async def _loop(self) -> None:
        while True:
            event = await self.receive()
            if event["type"] == "websocket.disconnect":
                return
            text = event.get("text")
            if text is None:
                raise _Terminal("'text'")
            try:
                request = json.loads(text)
            except json.JSONDecodeError as exc:
                await self.send(jsonrpc.response(jsonrpc.PARSE_ERROR, f"Parse error: {exc}"))
                continue
            except RecursionError as exc:
                raise _Terminal(str(exc)) from None
            if not isinstance(request, dict):
                raise _Terminal(
                    "openenv.core.env_server.mcp_types.JsonRpcRequest() argument after ** "
                    f"must be a mapping, not {type(request).__name__}")
            await self.send(jsonrpc.answer(request, session_id=self.session_id, ctx=self.ctx,
                                           env=self.env))
