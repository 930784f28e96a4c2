"""The PEFT import family: ``POST /v1/train/hf/peft/imports/{name}`` (Kiln's route).

The body is a gzip tar of ``NAME.kiln-hf-import/``, streamed (never buffered: the
:class:`~kiln_verify.server.limits.BodyLimit` middleware lets this path through) into the
engine, :func:`kiln_verify.control.hf_imports.receive.receive_import` (imported on the
first request, never at start-up), which admits, verifies and installs it. The answer is
201 ``ImportPeftResponse`` with ``ETag: "<import_sha256>"`` (docs/hf-http-import.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from kiln_verify.control.status import ApiErrorBody
from kiln_verify.errors import ApiHfImportInvalid
from kiln_verify.hf.manifest.http_imports import ImportPeftResponse
from kiln_verify.server.responses import json_response
from kiln_verify.server.routes.common import registry

__all__ = ["IMPORT_PREFIX", "router"]

IMPORT_PREFIX = "/v1/train/hf/peft/imports/"

router = APIRouter()

_ERROR = {"model": ApiErrorBody, "description": 'Refused: {"error": {code, message, hint}}'}
_OPENAPI: dict[str, Any] = {
    "response_model": None,
    "status_code": 201,
    "summary": "Import a completed HF/TRL PEFT result (a gzip tar of NAME.kiln-hf-import/)",
    "responses": {
        201: {
            "model": ImportPeftResponse,
            "description": 'Installed; ETag: "<import_sha256>"',
        },
        **{status: _ERROR for status in (400, 408, 409, 500)},
    },
    "openapi_extra": {
        "requestBody": {
            "required": True,
            "content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
}


async def _body(request: Request) -> AsyncIterator[bytes]:
    try:
        async for chunk in request.stream():
            if chunk:
                yield chunk
    except ClientDisconnect:
        raise ApiHfImportInvalid("the client disconnected before the body ended") from None


@router.post(IMPORT_PREFIX + "{name}", **_OPENAPI)
async def import_peft(name: str, request: Request) -> Response:
    from kiln_verify.control.hf_imports.receive import receive_import

    headers = request.headers
    answer = await receive_import(
        registry(request).config,
        name,
        content_type=headers.getlist("content-type"),
        content_encoding=headers.getlist("content-encoding"),
        content_length=headers.getlist("content-length"),
        body=_body(request),
    )
    response = json_response(answer, 201)
    response.headers["etag"] = f'"{answer.import_sha256}"'
    return response
