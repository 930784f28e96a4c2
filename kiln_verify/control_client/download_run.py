"""``openenv artifact RUN_ID --all --output-dir DIR``: a whole run, verified, all or nothing.

1. Read the run's status once, keeping the exact bytes the server answered; only a run in
   a terminal state (its manifest can no longer change) is downloaded.
2. Accept every manifest entry exactly as the one-file download does (kind, relative
   same-origin URL, digest, size bound), each kind once.
3. Refuse an existing ``DIR`` before any download unless ``--force`` (as the one-file
   download refuses an existing ``--output``); with ``--force`` an existing directory keeps
   what is not the run's, but a file at the layout path of a kind this manifest does not
   list is refused (a later ``verify-run`` would read it as part of this run).
4. Download each artifact with the one-file download's checks (headers before the body,
   counted, capped, hashed) into the run's own layout
   (:data:`kiln_verify.control.layout.ARTIFACT_PATHS`), and the status as ``run.json``.
5. Publish through the core publisher: a new ``DIR`` appears complete or not at all; with
   ``--force`` every file of an existing ``DIR`` is replaced in one journaled publication.
   A refused or failed download leaves nothing behind.

The receipt (``kiln-verify.run-download.v1``) names the run, the status file's digest and
every file with its kind, relative path, digest and size; never the server's base URL.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from typing import IO

from kiln_verify.control.layout import ARTIFACT_PATHS, RUN_STATUS_FILE
from kiln_verify.control.status import OpenEnvRunStatus, RunArtifact
from kiln_verify.control_client.client import ControlClient, check_run_id
from kiln_verify.control_client.download import checked_entry, fetch_into
from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.jsonio import loads
from kiln_verify.core.publish import staged_directory
from kiln_verify.core.publisher import publication
from kiln_verify.errors import (
    ArtifactBodyInvalid,
    ArtifactManifestInvalid,
    ControlResponseInvalid,
    ControlTransport,
    KilnError,
    PathNotDirectory,
    SymlinkRefused,
    TargetExists,
    snippet,
)
from kiln_verify.limits import HASH_CHUNK_BYTES, MAX_CONTROL_RESPONSE_BYTES
from kiln_verify.openenv.runcheck.records import RUN_DOWNLOAD_SCHEMA, RunDownloadReceipt, RunFile
from kiln_verify.records import validate_record

__all__ = ["download_run"]

Fill = Callable[[IO[bytes]], None]


def _status_document(client: ControlClient, run_id: str) -> tuple[OpenEnvRunStatus, bytes]:
    path = f"/v1/openenv/runs/{run_id}"
    chunks: list[bytes] = []
    size = 0
    with client.stream("GET", path) as response:
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > MAX_CONTROL_RESPONSE_BYTES:
                raise ControlResponseInvalid(
                    f"GET {path}: the answer exceeds MAX_CONTROL_RESPONSE_BYTES = "
                    f"{MAX_CONTROL_RESPONSE_BYTES}"
                )
            chunks.append(chunk)
    data = b"".join(chunks)
    try:
        status = validate_record(
            OpenEnvRunStatus, loads(data, max_bytes=MAX_CONTROL_RESPONSE_BYTES)
        )
    except KilnError as exc:
        raise ControlResponseInvalid(
            f"GET {path}: the answer is not a valid OpenEnvRunStatus ({exc.code}: {exc.rule})"
        ) from None
    if status.run_id != run_id:
        raise ControlResponseInvalid(f"asked for run {run_id}, got {snippet(status.run_id)}")
    return status, data


def _entries(status: OpenEnvRunStatus, run_id: str) -> list[RunArtifact]:
    if not status.terminal:
        raise ArtifactManifestInvalid(
            f"run {run_id} is {status.state}; --all downloads only a run that has ended "
            "(its manifest can still change)"
        )
    kinds = [item.kind for item in status.artifacts or ()]
    if not kinds:
        raise ArtifactManifestInvalid(f"run {run_id} lists no artifact (state {status.state})")
    if len(set(kinds)) != len(kinds):
        raise ArtifactManifestInvalid(f"the manifest of run {run_id} lists a kind twice")
    return [checked_entry(status, run_id, kind) for kind in kinds]


def _check_directory(output_dir: str, force: bool, listed: set[str]) -> bool:
    """Whether ``output_dir`` exists (and may be written into); raises when refused."""
    parent = os.path.dirname(os.path.abspath(output_dir)) or "."
    if os.path.islink(parent) or not os.path.isdir(parent):
        raise PathNotDirectory(
            "the output directory's parent must exist and be a directory", path=output_dir
        )
    if os.path.islink(output_dir):
        raise SymlinkRefused("the output directory is a symbolic link", path=output_dir)
    if not os.path.lexists(output_dir):
        return False
    if not force:
        raise TargetExists(
            "the output directory already exists and is never written into without --force",
            path=output_dir,
        )
    if not os.path.isdir(output_dir):
        raise PathNotDirectory("the output exists and is not a directory", path=output_dir)
    for kind, relative in ARTIFACT_PATHS.items():
        if kind not in listed and os.path.lexists(os.path.join(output_dir, relative)):
            raise TargetExists(
                f"{relative} belongs to no artifact of this run; it would be read as part of it",
                path=os.path.join(output_dir, relative),
                hint="remove it or download into a new directory",
            )
    return True


def _fresh(output_dir: str, fills: dict[str, Fill]) -> None:
    with staged_directory(output_dir, dir_mode=0o755) as stage:
        for relative, fill in fills.items():
            with stage.open(relative) as stream:
                fill(stream)


def _into_existing(output_dir: str, fills: dict[str, Fill]) -> None:
    created: list[str] = []
    try:
        for relative in fills:
            parent = os.path.dirname(os.path.join(output_dir, relative))
            missing: list[str] = []
            while not os.path.lexists(parent):
                missing.append(parent)
                parent = os.path.dirname(parent)
            for folder in reversed(missing):
                os.mkdir(folder, 0o755)
                created.append(folder)
        targets = [os.path.join(output_dir, relative) for relative in fills]
        with publication(targets, force=True) as staging:
            for index, fill in enumerate(fills.values()):
                staging.fill_file(index, 0o644, partial(_write_fd, fill))
    except BaseException:
        for folder in reversed(created):
            with suppress(OSError):  # only the empty folders this call made
                os.rmdir(folder)
        raise


def _write_bytes(data: bytes, stream: IO[bytes]) -> None:
    stream.write(data)


def _write_fd(fill: Fill, fd: int) -> None:
    with os.fdopen(fd, "wb", buffering=HASH_CHUNK_BYTES, closefd=False) as stream:
        fill(stream)
        stream.flush()


def download_run(
    client: ControlClient, run_id: str, output_dir: str, *, force: bool = False
) -> RunDownloadReceipt:
    """Download, verify and publish every artifact of the run and its status (module text)."""
    run_id = check_run_id(run_id)
    status, data = _status_document(client, run_id)
    entries = _entries(status, run_id)
    exists = _check_directory(output_dir, force, {entry.kind for entry in entries})
    fills: dict[str, Fill] = {RUN_STATUS_FILE: partial(_write_bytes, data)}
    for entry in entries:
        fills[ARTIFACT_PATHS[entry.kind]] = partial(fetch_into, client, entry)
    try:
        (_into_existing if exists else _fresh)(output_dir, fills)
    except ControlTransport as exc:
        raise ArtifactBodyInvalid(f"the download failed: {exc.rule}") from None
    return RunDownloadReceipt(
        schema=RUN_DOWNLOAD_SCHEMA,
        run_id=run_id,
        run_kind=status.kind,
        state=status.state,
        output_dir=output_dir,
        status_file=RUN_STATUS_FILE,
        status_sha256=str(sha256_bytes(data)),
        status_bytes=len(data),
        files=[
            RunFile(
                kind=entry.kind,
                relative_path=ARTIFACT_PATHS[entry.kind],
                sha256=entry.sha256,
                bytes=entry.bytes,
            )
            for entry in entries
        ],
    )
