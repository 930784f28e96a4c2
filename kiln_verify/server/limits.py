"""The request body bound, enforced before any route runs (§12: "body limit 1 MiB").

A body with a larger ``Content-Length`` is refused without reading it; a chunked or
unannounced body is read only up to the bound plus one byte. Either way the answer is
``openenv_request_too_large`` (413) and the route never sees a partial body: the
middleware buffers the bounded body and replays it to the application.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kiln_verify.errors import ApiRequestTooLarge
from kiln_verify.server.responses import error_response

__all__ = ["BodyLimit"]


class BodyLimit:
    """Pure ASGI middleware: at most ``limit`` body bytes per HTTP request."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = ApiRequestTooLarge(f"the request body exceeds {self.limit} bytes")
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and (not value.isdigit() or int(value) > self.limit):
                await error_response(refused)(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await error_response(refused)(scope, receive, send)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
