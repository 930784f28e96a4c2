"""``kiln-verify hf import-peft --url``: a completed bundle imported over HTTP, trusted only
once the server's answer is exactly the receipt predicted locally (kiln-hf-trl-contract §5.8).

Before any request: the completed bundle is verified in full and its ten-file envelope
materialized and verified again in a private temporary directory
(:func:`kiln_verify.hf.envelope.materialized_envelope`, with the import per-file and 4 GiB
caps), so a partial, changed, linked or over-limit result never contacts the server. The
answer is predicted from the envelope alone: a server that accepts it has recomputed a
resident identity equal to the export's field by field, so its ``kiln.hf-trl-import.v1``
receipt, ``import_sha256``, content revision, installed size (the receipt's pretty bytes
plus the five copied files) and file count are known in advance.

The body is the deterministic ``NAME.kiln-hf-import`` USTAR + gzip archive
(:func:`kiln_verify.core.safe_tar.write_tar_gz`, the bytes ``hf envelope`` writes), made by
a worker thread and handed to the connection through a queue of at most
``HTTP_IMPORT_UPLOAD_QUEUE_CHUNKS`` chunks of ``HTTP_IMPORT_UPLOAD_CHUNK_BYTES``, within
``MAX_IMPORT_COMPRESSED_BYTES``: neither the adapter nor the archive is ever held whole.

The answer decides one of three outcomes. HTTP 201 with one JSON content type, one strong
``ETag`` equal to the predicted ``import_sha256`` and a body equal to the prediction is
success. A structured API error (``{"error": {"code", ...}}``) is a refusal: nothing was
installed (``control_http_status`` with the server's code). Anything else after the body
went out (a dropped connection, a timeout, another status, a different answer) leaves the
outcome unknown: ``hf_import_outcome_unknown`` or ``hf_import_answer_invalid``, both saying
that the adapter may already be installed. Redirects are never followed; the bundle is
never modified; the private envelope is removed on every path.
"""

from __future__ import annotations

import os
import queue
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Final, cast

import httpx

from kiln_verify.control_client.client import error_from_body
from kiln_verify.core.digest import Sha256Digest
from kiln_verify.core.jsonio import loads
from kiln_verify.core.safe_tar import write_tar_gz
from kiln_verify.errors import (
    ControlTransport,
    ControlUrlInvalid,
    HfImportAnswerInvalid,
    HfImportOutcomeUnknown,
    KilnError,
    LimitExceeded,
    snippet,
)
from kiln_verify.hf.digests import adapter_content_revision
from kiln_verify.hf.envelope import (
    IMPORT_ARCHIVE_LIMITS,
    EnvelopeReport,
    check_import_name,
    materialized_envelope,
)
from kiln_verify.hf.importer import IMPORT_MANIFEST, INSTALLED_FILES
from kiln_verify.hf.manifest import ImportReceipt, ResidentModelIdentity, document_bytes
from kiln_verify.hf.manifest.http_imports import ImportPeftResponse
from kiln_verify.limits import (
    HTTP_CONNECT_TIMEOUT_S,
    HTTP_IMPORT_RESPONSE_IDLE_TIMEOUT_S,
    HTTP_IMPORT_UPLOAD_CHUNK_BYTES,
    HTTP_IMPORT_UPLOAD_QUEUE_CHUNKS,
    MAX_HTTP_IMPORT_RESPONSE_BYTES,
    MAX_IMPORT_COMPRESSED_BYTES,
)
from kiln_verify.openenv.protocol.urls import normalize_base_url, verifies_tls
from kiln_verify.records import validate_record

__all__ = ["import_over_http", "predict_answer"]

_END: Final = object()


def predict_answer(envelope: Path, report: EnvelopeReport, name: str) -> ImportPeftResponse:
    """The 201 answer a server that accepts this verified envelope must give."""
    export, result = report.export, report.result
    receipt = ImportReceipt.create(
        adapter_name=name,
        task=export.task,
        export_sha256=export.export_sha256,
        result_sha256=result.result_sha256,
        resident_model=ResidentModelIdentity.from_export(export.model),
        used_exported_reference_script=report.used_exported_reference_script,
    )
    copied = [file for file in INSTALLED_FILES if file != IMPORT_MANIFEST]
    size = len(document_bytes(receipt)) + sum(os.lstat(envelope / f).st_size for f in copied)
    weights, config = result.output_adapter.model, result.output_adapter.config
    return ImportPeftResponse(
        status="imported",
        name=name,
        task=export.task,
        export_sha256=export.export_sha256,
        result_sha256=result.result_sha256,
        import_sha256=receipt.import_sha256,
        content_revision=adapter_content_revision(
            Sha256Digest.parse(weights.sha256),
            weights.size_bytes,
            Sha256Digest.parse(config.sha256),
        ),
        used_exported_reference_script=receipt.used_exported_reference_script,
        size_bytes=size,
        files=len(INSTALLED_FILES),
    )


class _Stopped(Exception):
    """The connection stopped taking chunks; the producer gives up."""


class _Channel:
    """The archive writer's output: cut into chunks and queued for the connection."""

    def __init__(self) -> None:
        self.chunks: queue.Queue[object] = queue.Queue(maxsize=HTTP_IMPORT_UPLOAD_QUEUE_CHUNKS)
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self._pending = bytearray()
        self._total = 0

    def _put(self, item: object) -> None:
        while not self.stop.is_set():
            try:
                self.chunks.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _Stopped

    def write(self, data: bytes) -> int:
        self._total += len(data)
        if self._total > MAX_IMPORT_COMPRESSED_BYTES:
            raise LimitExceeded(
                "the compressed import body",
                limit="MAX_IMPORT_COMPRESSED_BYTES",
                bound=MAX_IMPORT_COMPRESSED_BYTES,
                observed=self._total,
            )
        self._pending += data
        while len(self._pending) >= HTTP_IMPORT_UPLOAD_CHUNK_BYTES:
            self._put(bytes(self._pending[:HTTP_IMPORT_UPLOAD_CHUNK_BYTES]))
            del self._pending[:HTTP_IMPORT_UPLOAD_CHUNK_BYTES]
        return len(data)

    def flush(self) -> None:
        """Chunks leave when full (gzip flushes its file object on close)."""

    def produce(self, envelope: Path) -> None:
        """The worker thread: archive the envelope, then the end marker (or the failure)."""
        try:
            write_tar_gz(
                envelope,
                cast(IO[bytes], self),
                root_name=envelope.name,
                limits=IMPORT_ARCHIVE_LIMITS,
            )
            if self._pending:
                self._put(bytes(self._pending))
        except _Stopped:
            return
        except BaseException as exc:
            self.failure = exc
        try:
            self._put(_END)
        except _Stopped:
            return

    def body(self, sent: list[bool]) -> Iterator[bytes]:
        """What the connection sends; ``sent[0]`` turns true with the first chunk."""
        while True:
            item = self.chunks.get()
            if item is _END:
                if self.failure is not None:
                    raise self.failure
                return
            sent[0] = True
            yield cast(bytes, item)


def _unknown(name: str, what: str) -> HfImportOutcomeUnknown:
    return HfImportOutcomeUnknown(
        f"{what} after the import request was sent: the outcome is unknown and adapter "
        f"{name!r} may already be installed; inspect GET /v1/adapters (the server's adapter "
        "list) before retrying"
    )


def _invalid(name: str, what: str) -> HfImportAnswerInvalid:
    return HfImportAnswerInvalid(
        f"the server answered the import with {what}; adapter {name!r} may already be "
        "installed: inspect GET /v1/adapters before retrying"
    )


def _read(response: httpx.Response, name: str) -> bytes:
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) > MAX_HTTP_IMPORT_RESPONSE_BYTES:
            raise _invalid(name, f"more than MAX_HTTP_IMPORT_RESPONSE_BYTES = {len(data)} bytes")
    return bytes(data)


def _judge(
    status: int, headers: httpx.Headers, body: bytes, name: str, predicted: ImportPeftResponse
) -> dict[str, Any]:
    """The verified answer, or the typed error this answer is."""
    if status >= 400:
        refusal = error_from_body(f"POST /v1/train/hf/peft/imports/{name}", status, body)
        if refusal.server_code is not None:
            raise refusal
        raise _invalid(name, f"HTTP {status} without a structured error")
    if status != 201:
        raise _invalid(name, f"HTTP {status} instead of HTTP 201")
    kinds = headers.get_list("content-type")
    if len(kinds) != 1 or kinds[0].split(";")[0].strip().lower() != "application/json":
        raise _invalid(name, f"Content-Type {snippet(kinds)} instead of one application/json")
    etags = headers.get_list("etag")
    expected = f'"{predicted.import_sha256}"'
    if etags != [expected]:
        raise _invalid(
            name, f"ETag {snippet(etags)} instead of exactly one strong {expected} (predicted)"
        )
    try:
        answer = validate_record(
            ImportPeftResponse, loads(body, max_bytes=MAX_HTTP_IMPORT_RESPONSE_BYTES)
        )
    except KilnError as exc:
        raise _invalid(name, f"a body that is not Kiln's ImportPeftResponse ({exc.code})") from None
    want, got = predicted.to_json(), answer.to_json()
    if got != want:
        differing = sorted(key for key in want if got.get(key) != want[key])
        raise _invalid(name, f"an answer whose {', '.join(differing)} differ from the prediction")
    return got


def import_over_http(bundle: str | os.PathLike[str], name: str, url: str) -> dict[str, Any]:
    """Import the completed ``bundle`` as adapter ``name`` on the server at ``url``; the
    verified answer (Kiln's ``ImportPeftResponse``, equal to the local prediction)."""
    check_import_name(name)
    try:
        base = normalize_base_url(url).base_url
    except KilnError as exc:
        raise ControlUrlInvalid(exc.rule.replace("environment URL", "--url")) from None
    with (
        tempfile.TemporaryDirectory(prefix=".kiln-hf-import-upload-") as scratch,
        materialized_envelope(bundle, name, scratch) as (envelope, report, _),
    ):
        predicted = predict_answer(envelope, report, name)
        channel = _Channel()
        worker = threading.Thread(target=channel.produce, args=(envelope,), daemon=True)
        sent = [False]
        timeout = httpx.Timeout(HTTP_IMPORT_RESPONSE_IDLE_TIMEOUT_S, connect=HTTP_CONNECT_TIMEOUT_S)
        headers = {"content-type": "application/gzip", "accept": "application/json"}
        worker.start()
        try:
            with (
                httpx.Client(
                    follow_redirects=False,
                    trust_env=False,
                    timeout=timeout,
                    verify=verifies_tls(base),
                ) as http,
                http.stream(
                    "POST",
                    f"{base}/v1/train/hf/peft/imports/{name}",
                    content=channel.body(sent),
                    headers=headers,
                ) as response,
            ):
                body = _read(response, name)
                status, answer_headers = response.status_code, response.headers
        except httpx.HTTPError as exc:
            if isinstance(channel.failure, KilnError):
                raise channel.failure from None
            what = f"{type(exc).__name__}: {snippet(str(exc))}"
            if not sent[0]:
                raise ControlTransport(f"POST {base}: {what}; nothing was sent") from None
            raise _unknown(name, what) from None
        finally:
            channel.stop.set()
            worker.join()
        if channel.failure is not None:
            raise channel.failure
        return _judge(status, answer_headers, body, name, predicted)
