"""The HF/TRL export family: Kiln's export registry routes (docs/hf-http-export.md).

=============================================  ============================================
route                                          answer
=============================================  ============================================
``POST /v1/train/hf/sft/exports``              201 ``ExportSummary``, ``ETag``
``POST /v1/train/hf/grpo/exports``             201 ``ExportSummary``, ``ETag``
``GET /v1/train/hf/exports``                   ``ExportList`` (self-digests only)
``GET /v1/train/hf/exports/{name}``            ``ExportDetail`` (fully verified), ``ETag``
``GET /v1/train/hf/exports/{name}/download``   the ``NAME.kiln-hf`` gzip tar, ``ETag``
``DELETE /v1/train/hf/exports/{name}``         ``DeleteExportResponse``; ``If-Match`` → 412
=============================================  ============================================

Every answer carries ``Cache-Control: private, no-store`` (a deleted name may come back
with other bytes). Routes parse and render; the registry is
:class:`kiln_verify.control.hf_exports.service.ExportService`, created on the first
request and kept on the application's state.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any, Final

from fastapi import APIRouter, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from kiln_verify.control.status import ApiErrorBody
from kiln_verify.core.jsonio import loads
from kiln_verify.errors import ApiHfTrlInvalidRequest, ControlApiError, KilnError, snippet
from kiln_verify.hf.manifest.http_exports import (
    EXPORT_NAME,
    EXPORTS_PATH,
    DeleteExportResponse,
    ExportDetail,
    ExportList,
    ExportSummary,
    GrpoExportRequest,
    SftExportRequest,
)
from kiln_verify.limits import MAX_HF_EXPORT_REQUEST_BYTES
from kiln_verify.records import Record, validate_record
from kiln_verify.server.headers import NO_STORE
from kiln_verify.server.responses import error_response, json_response
from kiln_verify.server.routes.common import registry

if TYPE_CHECKING:
    from kiln_verify.control.hf_exports.service import ExportService

__all__ = ["router"]

SFT_PATH: Final = "/v1/train/hf/sft/exports"
GRPO_PATH: Final = "/v1/train/hf/grpo/exports"

_IF_MATCH: Final = re.compile(r'"(sha256:[0-9a-f]{64})"')

router = APIRouter()

_ERROR = {"model": ApiErrorBody, "description": 'Refused: {"error": {code, message, hint}}'}


def _doc(model: type[Record], status: int, *errors: int, **extra: Any) -> dict[str, Any]:
    return {
        "response_model": None,
        "status_code": status,
        "responses": {
            status: {"model": model, "description": "OK"},
            **{code: _ERROR for code in (*errors, 409, 500)},
        },
        **extra,
    }


_CREATE: Final = (400, 404, 413, 503)


def _body(model: type[Record]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def _service(request: Request) -> ExportService:
    from kiln_verify.control.hf_exports.service import ExportService

    state = request.app.state
    found: ExportService | None = getattr(state, "hf_exports", None)
    if found is None:
        found = ExportService(registry(request).config)
        state.hf_exports = found
    return found


def _name(name: str) -> str:
    if not EXPORT_NAME.fullmatch(name):
        raise ApiHfTrlInvalidRequest(f"{snippet(name)} is not an export name")
    return name


async def _parse(request: Request, model: type[Record]) -> Any:
    raw = await request.body()
    try:
        return validate_record(model, loads(raw, max_bytes=MAX_HF_EXPORT_REQUEST_BYTES))
    except KilnError as exc:
        raise ApiHfTrlInvalidRequest(f"not a {model.__name__}: {exc.code}: {exc.rule}") from None


def _answer(record: Record, status: int = 200, etag: str | None = None) -> Response:
    response = json_response(record, status)
    response.headers["cache-control"] = NO_STORE
    if etag is not None:
        response.headers["etag"] = f'"{etag}"'
    return response


def _if_match(request: Request) -> str | None:
    values = request.headers.getlist("if-match")
    if not values:
        return None
    match = _IF_MATCH.fullmatch(values[0].strip()) if len(values) == 1 else None
    if match is None:
        raise ApiHfTrlInvalidRequest(
            'If-Match must be exactly one strong quoted "sha256:<64 lowercase hex>"'
        )
    return match.group(1)


@router.post(SFT_PATH, **_doc(ExportSummary, 201, *_CREATE, openapi_extra=_body(SftExportRequest)))
async def create_sft(request: Request) -> Response:
    summary = await _service(request).create_sft(await _parse(request, SftExportRequest))
    return _answer(summary, 201, summary.export_sha256)


_GRPO_DOC: Final = _doc(ExportSummary, 201, *_CREATE, openapi_extra=_body(GrpoExportRequest))


@router.post(GRPO_PATH, **_GRPO_DOC)
async def create_grpo(request: Request) -> Response:
    summary = await _service(request).create_grpo(await _parse(request, GrpoExportRequest))
    return _answer(summary, 201, summary.export_sha256)


@router.get(EXPORTS_PATH, **_doc(ExportList, 200))
async def list_exports(request: Request) -> Response:
    return _answer(await _service(request).list())


@router.get(EXPORTS_PATH + "/{name}", **_doc(ExportDetail, 200, 400, 404))
async def export_detail(request: Request, name: str) -> Response:
    detail = await _service(request).detail(_name(name))
    return _answer(detail, 200, detail.summary.export_sha256)


@router.delete(EXPORTS_PATH + "/{name}", **_doc(DeleteExportResponse, 200, 400, 404, 412))
async def delete_export(request: Request, name: str) -> Response:
    expected = _if_match(request)
    await _service(request).delete(_name(name), expected)
    return _answer(DeleteExportResponse(status="deleted", name=name))


class _Download(Response):
    """Verify under the registry lock, then send the archive; the lock is released only
    when the last byte is sent or the connection is gone. A refusal before the first
    byte is the typed error answer; a failure after it aborts the connection, so the
    client sees a short body, never a different complete one."""

    def __init__(self, service: ExportService, name: str) -> None:
        self.service = service
        self.name = name
        self.status_code = 200
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False
        gone = asyncio.Event()
        watcher = asyncio.create_task(_watch(receive, gone))
        try:
            async with self.service.download(self.name) as (summary, chunks):
                start = {"type": "http.response.start", "status": 200, "headers": _headers(summary)}
                started = True
                await send(start)
                async for chunk in chunks:
                    if gone.is_set():
                        return  # the client left: stop compressing, release the lock
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except ControlApiError as exc:
            if started:
                raise
            await error_response(exc)(scope, receive, send)
        finally:
            watcher.cancel()


async def _watch(receive: Receive, gone: asyncio.Event) -> None:
    """Set ``gone`` when the client disconnects (the request body is already read)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


def _headers(summary: ExportSummary) -> list[tuple[bytes, bytes]]:
    pairs = {
        "content-type": "application/gzip",
        "content-disposition": f'attachment; filename="{summary.name}.kiln-hf.tar.gz"',
        "cache-control": NO_STORE,
        "etag": f'"{summary.export_sha256}"',
        "x-content-type-options": "nosniff",
    }
    return [(key.encode("latin-1"), value.encode("latin-1")) for key, value in pairs.items()]


_DOWNLOAD_DOC: Final[dict[str, Any]] = {
    "response_model": None,
    "summary": "Download the verified export as a gzip tar rooted at NAME.kiln-hf",
    "responses": {
        200: {
            "description": "The archive, streamed; ETag the quoted export_sha256",
            "content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}},
        },
        **{code: _ERROR for code in (400, 404, 409, 500)},
    },
}


@router.get(EXPORTS_PATH + "/{name}/download", **_DOWNLOAD_DOC)
async def download_export(request: Request, name: str) -> Response:
    return _Download(_service(request), _name(name))
