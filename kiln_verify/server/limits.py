"""The request body bound, enforced before any route runs (§12: "body limit 1 MiB").

A body with a larger ``Content-Length`` is refused without reading it; a chunked or
unannounced body is read only up to the bound plus one byte. Either way the answer is
``openenv_request_too_large`` (413) and the route never sees a partial body: the
middleware buffers the bounded body and replays it to the application.
"""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kiln_verify.errors import ApiRequestTooLarge
from kiln_verify.limits import MAX_HF_EXPORT_REQUEST_BYTES
from kiln_verify.server.responses import error_response

__all__ = ["STREAMED_PREFIXES", "BodyLimit"]

STREAMED_PREFIXES = ("/v1/train/hf/peft/imports/",)
"""Routes whose bodies are streamed by the route itself under its own caps (the PEFT import:
up to 2 GiB, never buffered; docs/hf-http-import.md), so this bound does not apply."""


ROUTE_LIMITS: Final = {
    "/v1/train/hf/sft/exports": MAX_HF_EXPORT_REQUEST_BYTES,
    "/v1/train/hf/grpo/exports": MAX_HF_EXPORT_REQUEST_BYTES,
}
"""Routes with their own bound instead of the default (the HF export requests' inline rows:
256 MiB, Kiln's bound; docs/hf-http-export.md)."""


class BodyLimit:
    """Pure ASGI middleware: at most ``limit`` body bytes per HTTP request."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(STREAMED_PREFIXES):
            await self.app(scope, receive, send)
            return
        limit = ROUTE_LIMITS.get(scope["path"], self.limit)
        refused = ApiRequestTooLarge(
            f"the request body exceeds {limit} bytes", hint=f"this route takes at most {limit}"
        )
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and (not value.isdigit() or int(value) > limit):
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
            if size > limit:
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
