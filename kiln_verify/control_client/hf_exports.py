"""The export registry's client: create, list and delete exports; read a download's bytes.

JSON calls go through :class:`~kiln_verify.control_client.client.ControlClient`'s
transport (redirects never followed: ``control_redirect``; refusals ``control_http_status``
with the server's ``error.code``), with the CLI's 120 s idle timeout, and every answer is
read through a 4 MiB cap and validated as Kiln's record (``hf_export_response_invalid``
otherwise). A create answer must be 201 with exactly one strong ``ETag`` equal to the
quoted ``export_sha256`` of the summary it carries, for the name that was asked.

A download is one raw ``GET`` (:func:`~kiln_verify.control_client.rawget.raw_get`) on its
own connection, read to the server's close, so a body longer than its ``Content-Length``
is seen, never silently dropped. Only the name-bound path is ever requested (the answer's
``download_url`` is not trusted). Before the body: status 200, ``application/gzip``, no
content coding, exactly one strong ``ETag`` equal to the identity the create answer bound,
and either a ``Content-Length`` or chunked framing (decoded strictly). The body is handed
out chunk by chunk within ``MAX_ARCHIVE_COMPRESSED_BYTES``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, Literal, TypeVar

import httpx

from kiln_verify import limits
from kiln_verify.control_client.client import ControlClient, error_from_body
from kiln_verify.control_client.rawget import RawResponse, raw_get
from kiln_verify.core.jsonio import loads
from kiln_verify.errors import (
    ControlRedirect,
    ControlResponseInvalid,
    ControlTransport,
    HfExportDownloadInvalid,
    HfExportResponseInvalid,
    KilnError,
    snippet,
)
from kiln_verify.hf.manifest.http_exports import (
    EXPORTS_PATH,
    DeleteExportResponse,
    ExportList,
    ExportSummary,
    download_path,
    export_path,
)
from kiln_verify.limits import (
    HTTP_EXPORT_IDLE_TIMEOUT_S,
    MAX_HF_EXPORT_RESPONSE_BYTES,
)
from kiln_verify.records import Record, validate_record

__all__ = ["HfExportClient", "strong_etag"]

R = TypeVar("R", bound=Record)
_STRONG: Final = re.compile(r'"(sha256:[0-9a-f]{64})"')
_CREATE: Final = {"sft": "/v1/train/hf/sft/exports", "grpo": "/v1/train/hf/grpo/exports"}
MAX_CHUNK_LINE: Final = 1024
MAX_TRAILER_LINES: Final = 64


def strong_etag(values: list[str], where: str, error: type[KilnError]) -> str:
    """The one strong quoted ``sha256:`` ETag of an answer, else ``error``."""
    if len(values) != 1:
        raise error(f"{where} carries {len(values)} ETag headers, not exactly one")
    match = _STRONG.fullmatch(values[0].strip())
    if match is None:
        raise error(f'{where}: ETag {snippet(values[0])} is not a strong "sha256:<64 hex>"')
    return match.group(1)


class HfExportClient:
    """One export server; use as ``with HfExportClient(url) as c``."""

    def __init__(self, base_url: str, *, transport: httpx.BaseTransport | None = None) -> None:
        self.control = ControlClient(
            base_url, timeout=HTTP_EXPORT_IDLE_TIMEOUT_S, transport=transport
        )
        self.base_url = self.control.base_url

    def __enter__(self) -> HfExportClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.control.close()

    def _call(
        self,
        model: type[R],
        method: str,
        path: str,
        *,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[R, httpx.Response]:
        where = f"{method} {path}"
        with self.control.stream(method, path, body=body, headers=headers) as response:
            data = bytearray()
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > MAX_HF_EXPORT_RESPONSE_BYTES:
                    raise HfExportResponseInvalid(
                        f"{where}: the answer exceeds MAX_HF_EXPORT_RESPONSE_BYTES"
                    )
        try:
            value = loads(bytes(data), max_bytes=MAX_HF_EXPORT_RESPONSE_BYTES)
            return validate_record(model, value), response
        except KilnError as exc:
            raise HfExportResponseInvalid(
                f"{where}: not Kiln's {model.__name__} ({exc.code}: {exc.rule})"
            ) from None

    def create(self, task: Literal["sft", "grpo"], body: dict[str, Any]) -> ExportSummary:
        """``POST`` the export request; the summary, bound to its strong ETag and name."""
        path = _CREATE[task]
        summary, response = self._call(ExportSummary, "POST", path, body=body)
        if response.status_code != 201:
            raise HfExportResponseInvalid(f"POST {path} answered {response.status_code}, not 201")
        etags = response.headers.get_list("etag")
        etag = strong_etag(etags, f"POST {path}", HfExportResponseInvalid)
        if etag != summary.export_sha256:
            raise HfExportResponseInvalid(
                f"POST {path}: ETag {etag} is not the summary's export_sha256 "
                f"{summary.export_sha256}"
            )
        if summary.name != body["name"] or summary.task != task:
            raise HfExportResponseInvalid(
                f"POST {path}: asked for {task} export {body['name']}, the answer describes "
                f"{summary.task} export {snippet(summary.name)}"
            )
        return summary

    def list(self) -> ExportList:
        return self._call(ExportList, "GET", EXPORTS_PATH)[0]

    def delete(self, name: str, export_sha256: str | None) -> DeleteExportResponse:
        """``DELETE`` with ``If-Match: "<export_sha256>"`` (unconditioned when ``None``)."""
        headers = None if export_sha256 is None else {"If-Match": f'"{export_sha256}"'}
        answer = self._call(DeleteExportResponse, "DELETE", export_path(name), headers=headers)[0]
        if answer.name != name:
            raise HfExportResponseInvalid(f"asked to delete {name}, the answer names {answer.name}")
        return answer

    @contextmanager
    def download(self, name: str, export_sha256: str) -> Iterator[Iterator[bytes]]:
        """The archive's body, chunk by chunk, after its headers are checked."""
        path = download_path(name)
        headers = {"Accept-Encoding": "identity", "Accept": "application/gzip"}
        try:
            with raw_get(self.base_url, path, headers, timeout=HTTP_EXPORT_IDLE_TIMEOUT_S) as raw:
                announced = _checked(raw, path, export_sha256)
                if announced is None:
                    yield _dechunked(raw.iter_body(limits.MAX_ARCHIVE_COMPRESSED_BYTES + 1))
                else:
                    yield _counted(raw.iter_body(announced), announced)
        except ControlTransport as exc:
            raise HfExportDownloadInvalid(f"GET {path}: {exc.rule}") from None


def _checked(raw: RawResponse, path: str, export_sha256: str) -> int | None:
    """The announced length (``None`` for chunked framing) of an acceptable answer."""
    where = f"GET {path}"
    if 300 <= raw.status < 400:
        raise ControlRedirect(
            f"{where} answered {raw.status} (a redirect to "
            f"{snippet(raw.headers.get('location', ''))}), never followed"
        )
    if raw.status != 200:
        body = b"".join(bytes(chunk) for chunk in _bounded(raw))
        raise error_from_body(where, raw.status, body)
    headers = raw.headers
    if headers.get("content-type", "").split(";")[0].strip().lower() != "application/gzip":
        raise HfExportDownloadInvalid(f"{where}: Content-Type is not application/gzip")
    if headers.get("content-encoding", "identity").strip().lower() != "identity":
        raise HfExportDownloadInvalid(f"{where}: a content coding was applied")
    etag = [headers["etag"]] if "etag" in headers else []
    if strong_etag(etag, where, HfExportDownloadInvalid) != export_sha256:
        raise HfExportDownloadInvalid(
            f"{where}: ETag {headers['etag'][:80]} is not the created export {export_sha256}"
        )
    framing = headers.get("transfer-encoding", "").strip().lower()
    length = headers.get("content-length")
    if framing == "chunked" and length is None:
        return None
    if framing or length is None or not length.isdigit():
        raise HfExportDownloadInvalid(
            f"{where}: the body needs exactly one framing (Content-Length or chunked)"
        )
    if int(length) > limits.MAX_ARCHIVE_COMPRESSED_BYTES:
        raise HfExportDownloadInvalid(
            f"{where}: Content-Length {length} exceeds MAX_ARCHIVE_COMPRESSED_BYTES"
        )
    return int(length)


def _bounded(raw: RawResponse) -> Iterator[bytes]:
    size = 0
    for chunk in raw.iter_body(MAX_HF_EXPORT_RESPONSE_BYTES):
        size += len(chunk)
        if size > MAX_HF_EXPORT_RESPONSE_BYTES:
            raise ControlResponseInvalid("the error answer exceeds MAX_HF_EXPORT_RESPONSE_BYTES")
        yield bytes(chunk)


def _counted(body: Iterator[bytes | memoryview], announced: int) -> Iterator[bytes]:
    received = 0
    for chunk in body:
        received += len(chunk)
        if received > announced:
            raise HfExportDownloadInvalid(
                f"the body is longer than its Content-Length of {announced} bytes"
            )
        yield bytes(chunk)
    if received != announced:
        raise HfExportDownloadInvalid(
            f"the body ended after {received} of its {announced} announced bytes"
        )


class _Reader:
    """Exact reads over the raw body's chunks (for chunked framing)."""

    def __init__(self, body: Iterator[bytes | memoryview]) -> None:
        self._body = body
        self._buffer = bytearray()

    def _fill(self) -> bool:
        chunk = next(self._body, None)
        if chunk is None:
            return False
        self._buffer += chunk
        return True

    def line(self) -> bytes:
        while b"\r\n" not in self._buffer:
            if len(self._buffer) > MAX_CHUNK_LINE or not self._fill():
                raise HfExportDownloadInvalid("the chunked body is truncated or malformed")
        line, _, rest = bytes(self._buffer).partition(b"\r\n")
        self._buffer = bytearray(rest)
        return line

    def take(self, count: int) -> Iterator[bytes]:
        while count > 0:
            if not self._buffer and not self._fill():
                raise HfExportDownloadInvalid("the chunked body is truncated")
            piece = bytes(self._buffer[:count])
            del self._buffer[: len(piece)]
            count -= len(piece)
            yield piece

    def rest(self) -> bool:
        """Whether anything follows the end of the body."""
        return bool(self._buffer) or self._fill()


def _dechunked(body: Iterator[bytes | memoryview]) -> Iterator[bytes]:
    reader = _Reader(body)
    total = 0
    while True:
        size_text = reader.line().split(b";")[0].strip()
        if not size_text or len(size_text) > 16 or not re.fullmatch(rb"[0-9A-Fa-f]+", size_text):
            raise HfExportDownloadInvalid("a chunk size line is malformed")
        size = int(size_text, 16)
        if size == 0:
            break
        total += size
        if total > limits.MAX_ARCHIVE_COMPRESSED_BYTES:
            raise HfExportDownloadInvalid("the archive exceeds MAX_ARCHIVE_COMPRESSED_BYTES")
        yield from reader.take(size)
        if reader.line() != b"":
            raise HfExportDownloadInvalid("a chunk is longer than its size line")
    for _ in range(MAX_TRAILER_LINES):  # trailer fields, then the empty line
        if reader.line() == b"":
            break
    else:
        raise HfExportDownloadInvalid("the chunked body's trailer does not end")
    if reader.rest():
        raise HfExportDownloadInvalid("bytes follow the end of the chunked body")
