"""Serving a published artifact: the manifest decides, one descriptor is checked and streamed.

Nothing here is specific to a run kind: the caller passes the artifact table of the run's
kind (:class:`~kiln_verify.control.kind.ArtifactFile` entries: file name, cap, media type).
:func:`open_verified` resolves a kind only through that table and the run's persisted
manifest (a file in the run directory that the manifest does not list is unreachable,
whatever its name),
opens the file beneath the run directory without following a symbolic link (a nested
artifact, such as the paired evaluation's, walks its folders one descriptor at a time, each
opened without following one either), requires a
regular file of exactly the manifest's byte count, hashes that descriptor to its end and
compares the digest, then rewinds the same descriptor for streaming. A missing, replaced,
symlinked, truncated, oversized or same-length-modified file is
``openenv_artifact_integrity_failed`` (409) and none of its bytes are served.

:func:`artifact_headers` are the §12 response headers: ``Content-Length`` and a strong,
quoted-digest ``ETag`` from the manifest, ``Cache-Control: private, no-store``,
``X-Content-Type-Options: nosniff`` and an attachment ``Content-Disposition``.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Final

from kiln_verify.control.kind import ArtifactTable
from kiln_verify.control.status import OpenEnvRunStatus, RunArtifact
from kiln_verify.errors import ApiArtifactIntegrityFailed, ApiArtifactNotFound
from kiln_verify.limits import HASH_CHUNK_BYTES

__all__ = ["artifact_headers", "manifest_entry", "open_verified"]

_OPEN_FILE: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_DIR: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _drift(status: OpenEnvRunStatus, kind: str, why: str) -> ApiArtifactIntegrityFailed:
    return ApiArtifactIntegrityFailed(
        f"artifact {kind} of run {status.run_id} no longer matches its published manifest "
        f"({why}); its bytes are not served"
    )


def manifest_entry(status: OpenEnvRunStatus, kind: str, table: ArtifactTable) -> RunArtifact:
    """The manifest entry of ``kind``; ``openenv_artifact_not_found`` if not published."""
    entry = status.artifact(kind)
    if entry is None or kind not in table:
        raise ApiArtifactNotFound(
            f"run {status.run_id} has no published artifact of kind {kind[:64]!r}"
        )
    return entry


def open_verified(
    status: OpenEnvRunStatus, run_dir: Path, kind: str, table: ArtifactTable
) -> tuple[int, RunArtifact]:
    """A descriptor positioned at 0 whose bytes are exactly the manifest's (see module doc).

    Blocking (it hashes the whole file); the caller owns and closes the descriptor.
    """
    entry = manifest_entry(status, kind, table)
    *folders, name = table[kind].name.split("/")
    try:
        dir_fd = os.open(run_dir, _OPEN_DIR)
    except OSError:
        raise _drift(status, kind, "the run directory is missing or not a directory") from None
    try:
        for folder in folders:  # every component no-follow, not only the last
            try:
                inner = os.open(folder, _OPEN_DIR, dir_fd=dir_fd)
            except OSError:
                raise _drift(status, kind, f"{folder}/ is missing or not a directory") from None
            os.close(dir_fd)
            dir_fd = inner
        try:
            fd = os.open(name, _OPEN_FILE, dir_fd=dir_fd)
        except FileNotFoundError:
            raise _drift(status, kind, "the file is missing") from None
        except OSError as exc:
            raise _drift(status, kind, f"the file cannot be opened: {exc.strerror}") from None
    finally:
        os.close(dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _drift(status, kind, "not a regular file")
        if info.st_size != entry.bytes:
            raise _drift(status, kind, f"{info.st_size} bytes instead of {entry.bytes}")
        hasher = hashlib.sha256()
        remaining = entry.bytes
        while remaining > 0:
            chunk = os.read(fd, min(HASH_CHUNK_BYTES, remaining))
            if not chunk:
                raise _drift(status, kind, "the file was truncated while it was checked")
            hasher.update(chunk)
            remaining -= len(chunk)
        if os.read(fd, 1):
            raise _drift(status, kind, "the file grew while it was checked")
        if "sha256:" + hasher.hexdigest() != entry.sha256:
            raise _drift(status, kind, "its SHA-256 differs")
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd, entry


def artifact_headers(
    run_id: str, entry: RunArtifact, table: ArtifactTable
) -> list[tuple[str, str]]:
    """The §12 download headers for a verified artifact."""
    file = table[entry.kind]
    return [
        ("content-type", file.content_type),
        ("content-length", str(entry.bytes)),
        ("etag", f'"{entry.sha256}"'),
        ("cache-control", "private, no-store"),
        ("x-content-type-options", "nosniff"),
        (
            "content-disposition",
            f'attachment; filename="openenv-{run_id}-{entry.kind}.{file.extension}"',
        ),
    ]
