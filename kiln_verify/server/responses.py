"""The server's response types: exact JSON bytes, typed errors, and a verified descriptor.

JSON answers are written by our own writer (:func:`~kiln_verify.core.jsonenc.dumps_compact`
of :meth:`Record.to_json`), so a status read over HTTP has the same keys and order as its
``run.json``. Errors are always ``{"error": {"code", "message", "hint"}}`` with the code's
own HTTP status (and ``Retry-After`` on 503).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from kiln_verify.core.jsonenc import dumps_compact
from kiln_verify.errors import ControlApiError, snippet
from kiln_verify.limits import HASH_CHUNK_BYTES
from kiln_verify.records import Record

__all__ = ["DescriptorResponse", "error_response", "json_response"]

RETRY_AFTER_S = 5


def json_response(record: Record | dict[str, Any], status: int = 200) -> Response:
    value = record.to_json() if isinstance(record, Record) else record
    return Response(dumps_compact(value), status_code=status, media_type="application/json")


def error_response(exc: ControlApiError) -> Response:
    body = {"error": {"code": exc.code, "message": exc.rule, "hint": exc.hint or ""}}
    response = json_response(body, exc.http_status)
    if exc.http_status == 503:
        response.headers["retry-after"] = str(RETRY_AFTER_S)
    return response


class DescriptorResponse(Response):
    """Stream exactly ``length`` bytes of an already-verified descriptor, then close it.

    The headers (including ``Content-Length``) are sent first; if the file is truncated
    underneath us the connection is aborted rather than padded or completed, so a client
    sees a short body, never a different one of the announced length.
    """

    def __init__(self, fd: int, length: int, headers: Sequence[tuple[str, str]]) -> None:
        self.fd = fd
        self.length = length
        self.status_code = 200
        self.background = None
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            remaining = self.length
            if remaining == 0:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            while remaining > 0:
                chunk = os.read(self.fd, min(HASH_CHUNK_BYTES, remaining))
                if not chunk:
                    raise OSError(
                        f"artifact truncated while streaming ({snippet(remaining)} bytes short)"
                    )
                remaining -= len(chunk)
                await send(
                    {"type": "http.response.body", "body": chunk, "more_body": remaining > 0}
                )
        finally:
            os.close(self.fd)
