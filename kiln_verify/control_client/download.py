"""``openenv artifact RUN_ID KIND --output PATH``: a verified download (contract §11).

1. Read the run's status first; accept only a manifest entry with exactly ``kind``, whose
   ``url`` is the relative same-origin ``/v1/openenv/runs/<run-id>/artifacts/<kind>``,
   with a well-formed lower-case digest and at most ``MAX_OPENENV_DATASET_BYTES``.
2. Refuse an existing ``--output`` before any download unless ``--force``.
3. ``GET`` that URL with ``Accept-Encoding: identity`` (redirects are never followed) and
   require, before reading the body: status 200, ``Content-Length`` equal to the manifest,
   a strong ``ETag`` equal to the quoted manifest digest, ``Cache-Control`` with
   ``private`` and ``no-store``, ``X-Content-Type-Options: nosniff``, no content coding.
4. Stream the raw body into a private staging file beside the destination, counting
   (never past the manifest's size) and hashing; a short, long or different body fails.
5. Only then fsync and publish: no-clobber, or an atomic replacement with ``--force``.
   Any failure leaves no output and removes the staging file. (Writeback of the staging
   file starts during the download, so the final fsync does not add a second pass.)

The receipt (``kiln.openenv-artifact-download.v1``) names the run, kind, relative URL,
output path, digest and size; never the server's base URL.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import IO, Final

from kiln_verify.control.status import OpenEnvRunStatus, RunArtifact
from kiln_verify.control_client.client import ControlClient, check_run_id, error_from_body
from kiln_verify.control_client.rawget import RawResponse, raw_get
from kiln_verify.core.publish import publish_stream
from kiln_verify.errors import (
    ArtifactBodyInvalid,
    ArtifactHeadersInvalid,
    ArtifactManifestInvalid,
    ControlHttpStatus,
    ControlRedirect,
    ControlTransport,
    PathNotDirectory,
    SymlinkRefused,
    TargetExists,
    snippet,
)
from kiln_verify.limits import MAX_OPENENV_DATASET_BYTES
from kiln_verify.openenv.records.reports import ARTIFACT_DOWNLOAD_SCHEMA, ArtifactDownloadReceipt

__all__ = ["checked_entry", "download_artifact", "expected_url", "fetch_into"]

_IDENTITY: Final = {"Accept-Encoding": "identity"}
MAX_ERROR_BODY_BYTES: Final = 64 * 1024
WRITEBACK_EVERY_BYTES: Final = 16 * 1024 * 1024


def expected_url(run_id: str, kind: str) -> str:
    return f"/v1/openenv/runs/{run_id}/artifacts/{kind}"


def _entry(client: ControlClient, run_id: str, kind: str) -> RunArtifact:
    return checked_entry(client.status(run_id), run_id, kind)


def checked_entry(status: OpenEnvRunStatus, run_id: str, kind: str) -> RunArtifact:
    """The manifest entry of ``kind`` in ``status`` that step 1 accepts."""
    entry = status.artifact(kind)
    if entry is None:
        listed = ", ".join(item.kind for item in status.artifacts or ()) or "none"
        raise ArtifactManifestInvalid(
            f"run {run_id} lists no artifact of kind {snippet(kind)} (listed: {listed}; "
            f"state {status.state})"
        )
    if entry.url != expected_url(status.run_id, kind) or status.run_id != run_id:
        raise ArtifactManifestInvalid(
            f"the manifest URL of {kind} is {snippet(entry.url)}, not the relative "
            f"same-origin {expected_url(run_id, kind)}"
        )
    if entry.bytes > MAX_OPENENV_DATASET_BYTES:
        raise ArtifactManifestInvalid(
            f"the manifest declares {entry.bytes} bytes, more than MAX_OPENENV_DATASET_BYTES = "
            f"{MAX_OPENENV_DATASET_BYTES}"
        )
    return entry


def _check_destination(output: str, force: bool) -> None:
    parent = os.path.dirname(os.path.abspath(output)) or "."
    if os.path.islink(parent) or not os.path.isdir(parent):
        raise PathNotDirectory("the output's directory must exist and be a directory", path=output)
    if os.path.islink(output):
        raise SymlinkRefused("the output is a symbolic link", path=output)
    if os.path.lexists(output) and not force:
        raise TargetExists(
            "the output already exists and is never replaced without --force", path=output
        )


def _check_headers(response: RawResponse, entry: RunArtifact) -> None:
    headers = response.headers
    problems: list[str] = []
    length = headers.get("content-length")
    if length is None or not length.isdigit() or int(length) != entry.bytes:
        problems.append(f"Content-Length {snippet(length)} is not the manifest's {entry.bytes}")
    if "transfer-encoding" in headers:
        problems.append("a Transfer-Encoding was used")
    etag = headers.get("etag")
    if etag != f'"{entry.sha256}"':
        problems.append(f"ETag {snippet(etag)} is not the strong quoted manifest digest")
    directives = {part.strip().lower() for part in headers.get("cache-control", "").split(",")}
    if not {"private", "no-store"} <= directives:
        problems.append("Cache-Control lacks private and no-store")
    if headers.get("x-content-type-options", "").strip().lower() != "nosniff":
        problems.append("X-Content-Type-Options is not nosniff")
    coding = headers.get("content-encoding", "identity").strip().lower()
    if coding not in ("", "identity"):
        problems.append(f"the body has content coding {snippet(coding)}")
    if problems:
        raise ArtifactHeadersInvalid(f"the {entry.kind} response: " + "; ".join(problems))


def _refused(response: RawResponse, entry: RunArtifact) -> ControlHttpStatus | ControlRedirect:
    status = response.status
    if 300 <= status < 400:
        return ControlRedirect(
            f"GET {entry.url} answered {status} (a redirect to "
            f"{snippet(response.headers.get('location', ''))}), never followed"
        )
    body = b""
    for chunk in response.iter_body(0):
        body += bytes(chunk)
        if len(body) > MAX_ERROR_BODY_BYTES:
            break
    return error_from_body(f"GET {entry.url}", status, body[:MAX_ERROR_BODY_BYTES])


class _Writeback:
    """Start the disk writeback of the staging file while the download goes on.

    The publication fsyncs the whole file before it appears; left to the end, that flush
    of up to 256 MiB would add its full duration to the download. Every
    ``WRITEBACK_EVERY_BYTES`` a worker thread ``fdatasync``s what has been written so far
    (one at a time), so the final fsync only has the tail left. Durability is unchanged:
    the publication's own fsync still decides.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kiln-writeback")
        self._pending: Future[None] | None = None
        self._since = 0

    def __enter__(self) -> _Writeback:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pool.shutdown(wait=True)

    def wrote(self, count: int) -> None:
        self._since += count
        if self._since < WRITEBACK_EVERY_BYTES or (
            self._pending is not None and not self._pending.done()
        ):
            return
        self._since = 0
        self._stream.flush()
        self._pending = self._pool.submit(os.fdatasync, self._stream.fileno())


def download_artifact(
    client: ControlClient, run_id: str, kind: str, output: str, *, force: bool = False
) -> ArtifactDownloadReceipt:
    """Download, verify and publish one artifact; its receipt (see the module docstring)."""
    run_id = check_run_id(run_id)
    entry = _entry(client, run_id, kind)
    _check_destination(output, force)
    try:
        publish_stream(output, partial(fetch_into, client, entry), replace=force)
    except ControlTransport as exc:
        raise ArtifactBodyInvalid(f"the {kind} download failed: {exc.rule}") from None
    return ArtifactDownloadReceipt(
        schema=ARTIFACT_DOWNLOAD_SCHEMA,
        run_id=run_id,
        kind=kind,
        source_url=entry.url,
        output_path=output,
        sha256=entry.sha256,
        bytes=entry.bytes,
    )


def fetch_into(client: ControlClient, entry: RunArtifact, stream: IO[bytes]) -> None:
    """Steps 3 and 4: GET the entry's URL, check the headers, stream the body into
    ``stream`` counting and hashing; raise unless it is exactly the manifest's bytes."""
    kind = entry.kind
    hasher = hashlib.sha256()
    received = 0
    with (
        raw_get(client.base_url, entry.url, _IDENTITY) as response,
        _Writeback(stream) as writeback,
    ):
        if response.status != 200:
            raise _refused(response, entry)
        _check_headers(response, entry)
        for chunk in response.iter_body(entry.bytes):
            received += len(chunk)
            if received > entry.bytes:
                raise ArtifactBodyInvalid(
                    f"the {kind} body is longer than its Content-Length and the manifest's "
                    f"{entry.bytes} bytes"
                )
            hasher.update(chunk)
            stream.write(chunk)
            writeback.wrote(len(chunk))
    if received != entry.bytes:
        raise ArtifactBodyInvalid(
            f"the {kind} body has {received} bytes, the manifest {entry.bytes}"
        )
    if "sha256:" + hasher.hexdigest() != entry.sha256:
        raise ArtifactBodyInvalid(f"the {kind} body's SHA-256 differs from the manifest")
