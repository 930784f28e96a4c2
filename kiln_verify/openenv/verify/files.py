"""Locating and reading the three bundle files (kiln-openenv-contract §6.1-§6.4).

* :func:`resolve_bundle_path` applies §6.2: an explicit override wins; else the recorded
  path if it is absolute or exists; else a sibling of the summary with the recorded file
  name; else the recorded path (which then fails to open with a typed path error).
* :func:`read_bounded` reads a capped file whole, refusing symlinks and non-regular files
  and checking the cap from metadata and again while reading (the verifier itself now
  streams every file, see :mod:`kiln_verify.openenv.verify.streams`).
* :class:`HashingReader` wraps a file so that its SHA-256 and byte count are computed
  while it is parsed: each file is read once (the summary twice) and never held.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from kiln_verify.core.digest import Sha256Digest
from kiln_verify.core.paths import open_regular
from kiln_verify.errors import FileAccessError, LimitExceeded
from kiln_verify.limits import HASH_CHUNK_BYTES

__all__ = ["HashingReader", "open_hashed", "read_bounded", "resolve_bundle_path"]


def resolve_bundle_path(
    override: str | os.PathLike[str] | None, recorded: str, summary_path: Path
) -> Path:
    """The file to read for a recorded bundle path (§6.2)."""
    if override is not None:
        return Path(override)
    path = Path(recorded)
    if path.is_absolute() or os.path.lexists(path):
        return path
    sibling = summary_path.parent / path.name
    if path.name and os.path.lexists(sibling):
        return sibling
    return path


def read_bounded(path: Path, *, max_bytes: int, limit: str) -> bytes:
    """The whole file, at most ``max_bytes`` (checked from ``fstat`` and while reading)."""
    shown = os.fspath(path)
    with open_regular(path) as fd:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise LimitExceeded("file", limit=limit, bound=max_bytes, observed=size, path=shown)
        chunks: list[bytes] = []
        total = 0
        with open(fd, "rb", buffering=0, closefd=False) as stream:
            while True:
                try:
                    chunk = stream.read(min(HASH_CHUNK_BYTES, max_bytes + 1 - total))
                except OSError as exc:
                    raise FileAccessError(f"read failed: {exc.strerror}", path=shown) from None
                if not chunk:
                    break
                total += len(chunk)
                if total > max_bytes:
                    raise LimitExceeded(
                        "file", limit=limit, bound=max_bytes, observed=total, path=shown
                    )
                chunks.append(chunk)
    return b"".join(chunks)


class HashingReader:
    """A binary reader that hashes and counts every byte handed out (bounded).

    Only ``readline(limit)`` and ``read(n)`` are provided — what the JSONL line reader
    needs. :meth:`drain` hashes the rest of the file, so a digest can still be compared
    when parsing stopped early on an error.
    """

    def __init__(self, stream: IO[bytes], *, max_bytes: int, limit: str, shown: str) -> None:
        self._stream = stream
        self._hash = hashlib.sha256()
        self._max = max_bytes
        self._limit = limit
        self._shown = shown
        self.size = 0

    def _account(self, data: bytes) -> bytes:
        self.size += len(data)
        if self.size > self._max:
            raise LimitExceeded(
                "file", limit=self._limit, bound=self._max, observed=self.size, path=self._shown
            )
        self._hash.update(data)
        return data

    def readline(self, size: int = -1) -> bytes:
        try:
            return self._account(self._stream.readline(size))
        except OSError as exc:
            raise FileAccessError(f"read failed: {exc.strerror}", path=self._shown) from None

    def read(self, size: int = -1) -> bytes:
        try:
            return self._account(self._stream.read(size))
        except OSError as exc:
            raise FileAccessError(f"read failed: {exc.strerror}", path=self._shown) from None

    def drain(self) -> None:
        """Hash everything not yet read (up to the cap)."""
        while self.read(HASH_CHUNK_BYTES):
            pass

    @property
    def sha256(self) -> Sha256Digest:
        return Sha256Digest(self._hash.hexdigest())


@contextlib.contextmanager
def open_hashed(path: Path, *, max_bytes: int, limit: str) -> Iterator[tuple[HashingReader, int]]:
    """A regular file (no symlink) within ``max_bytes`` by its metadata, unbuffered, as a
    :class:`HashingReader` that enforces the cap again while reading; and its size."""
    shown = os.fspath(path)
    with open_regular(path) as fd:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise LimitExceeded("file", limit=limit, bound=max_bytes, observed=size, path=shown)
        with open(fd, "rb", buffering=0, closefd=False) as stream:
            yield HashingReader(stream, max_bytes=max_bytes, limit=limit, shown=shown), size
