"""``Cache-Control: private, no-store`` on every answer of the HF/TRL hand-off routes.

An export or import answer names training data and adapters by digest, and a deleted export
name may come back with other bytes: no cache between client and server may keep any of
them. The routes set the header on what they render; a refusal is rendered by the app's
error handlers (or by :class:`~kiln_verify.server.limits.BodyLimit` before any route
runs), so this middleware adds it to every answer under the family's prefix, refusals
included (the HF/TRL HTTP conformance suite found 400 and 404 answers without it).
"""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["NO_STORE", "PrivateAnswers"]

NO_STORE: Final = "private, no-store"
_PREFIXES: Final = ("/v1/train/hf/",)


class PrivateAnswers:
    """Pure ASGI: adds the header to a response start on a hand-off path that lacks one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(_PREFIXES):
            await self.app(scope, receive, send)
            return

        async def send_private(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"cache-control" for name, _ in headers):
                    headers.append((b"cache-control", NO_STORE.encode("ascii")))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_private)
