"""The oracle's raw ASGI application: one environment class, HTTP routes and `WS /ws`.

No framework sits between uvicorn and the protocol code. OpenEnv's FastAPI stack costs a
routing pass, pydantic models and an executor hop per WebSocket message; here a step is a
`json.loads`, a few dictionary checks, the environment call and a `json.dumps`, which is
what lets the oracle serve well over twice OpenEnv's steps per second.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from oracle import httpapi
from oracle.base import Environment
from oracle.context import DEFAULT_MAX_SESSIONS, ServerContext
from oracle.faults import Faults
from oracle.mcp_socket import McpSocket
from oracle.session import WebSocketSession
from oracle.wire import dumps_bytes

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

#: HTTP request bodies above this are refused with 413 (OpenEnv sets no limit at all).
MAX_HTTP_BODY = 1024 * 1024


class OracleApp:
    """ASGI 3 callable serving one oracle environment."""

    def __init__(self, env: type[Environment], *, max_sessions: int = DEFAULT_MAX_SESSIONS,
                 faults: Faults | None = None) -> None:
        self.ctx = ServerContext(env, max_sessions=max_sessions, faults=faults)

    @property
    def active_sessions(self) -> int:
        return self.ctx.active_sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket":
            await self._websocket(scope, receive, send)
        elif kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await _lifespan(receive, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        await receive()  # websocket.connect
        if scope["path"] not in ("/ws", "/mcp"):
            await send({"type": "websocket.close", "code": 1000})  # uvicorn answers 403
            return
        headers = dict(scope["headers"])
        refusal = self._refuse(headers)
        if refusal is not None:
            await send({"type": "websocket.http.response.start", "status": refusal.status,
                        "headers": _headers(refusal)})
            await send({"type": "websocket.http.response.body", "body": refusal.body})
            return
        if scope["path"] == "/mcp":
            await McpSocket(self.ctx, receive, send).run()
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        raw_auth = headers.get(b"authorization")
        authorization = raw_auth.decode("latin-1") if raw_auth is not None else None
        session = WebSocketSession(self.ctx, receive, send, authorization)
        await session.run(query.get("session_id"))

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        response = self._refuse(headers)
        if response is None:
            body = await _read_body(receive, headers)
            if body is None:
                response = httpapi.json_response(413, {"detail": "Request body too large"})
            else:
                request = httpapi.Request(scope["method"], scope["path"], headers, body)
                response = httpapi.handle(self.ctx, request)
        await send({"type": "http.response.start", "status": response.status,
                    "headers": _headers(response)})
        await send({"type": "http.response.body", "body": response.body})

    def _refuse(self, headers: dict[bytes, bytes]) -> httpapi.Response | None:
        """`require-bearer`: 401 before any route, so nothing leaks to the unauthenticated."""
        if self.ctx.authorized(headers):
            return None
        detail = ("Invalid authentication credentials" if b"authorization" in headers
                  else "Not authenticated")
        return httpapi.Response(401, dumps_bytes({"detail": detail}),
                                headers=((b"www-authenticate", b"Bearer"),))


def _headers(response: httpapi.Response) -> list[tuple[bytes, bytes]]:
    headers = [(b"content-length", str(len(response.body)).encode())]
    if response.content_type is not None:
        headers.append((b"content-type", response.content_type))
    headers.extend(response.headers)
    return headers


async def _read_body(receive: Receive, headers: dict[bytes, bytes]) -> bytes | None:
    """The request body, or None once it exceeds `MAX_HTTP_BODY` (the rest is not read)."""
    declared = headers.get(b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_HTTP_BODY:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > MAX_HTTP_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
