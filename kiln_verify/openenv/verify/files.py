"""Locating and reading the three bundle files (kiln-openenv-contract §6.1-§6.4).

* :func:`resolve_bundle_path` finds a recorded file inside the summary's own directory
  (docs/contract.md, "Where the bundle files are read"): an explicit override wins (relative
  to the current directory, as the user typed it); else the recorded relative name beneath
  the summary's directory; else the summary's sibling with the recorded file name. A
  recorded name never reaches outside that directory (no absolute path, no ``..``, no
  symlinked parent), so a summary cannot make the verifier open, or size, another file.
  This departs from the reference (§6.2), which tries the recorded path against the
  current directory first: there a decoy bundle in the working directory shadows the real
  one.
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
from kiln_verify.errors import FileAccessError, LimitExceeded, PathMissing, PathSymlink, snippet
from kiln_verify.limits import HASH_CHUNK_BYTES

__all__ = ["HashingReader", "open_hashed", "read_bounded", "resolve_bundle_path"]


def resolve_bundle_path(
    override: str | os.PathLike[str] | None, recorded: str, summary_path: Path
) -> Path:
    """The absolute path of the file to read for a recorded bundle path (see the module text).

    Raises ``path_missing`` when no candidate exists inside the summary's directory and
    ``path_symlink`` when a parent between that directory and the file is a symbolic link.
    """
    if override is not None:
        return Path(override).absolute()
    directory = summary_path.absolute().parent
    candidates = _confined_names(recorded)
    for parts in candidates:
        if os.path.lexists(directory.joinpath(*parts)):
            _refuse_linked_parents(directory, parts)
            return directory.joinpath(*parts)
    looked = ", ".join(repr("/".join(parts)) for parts in candidates) or "nothing"
    raise PathMissing(
        f"the summary records {snippet(recorded)}; looked for {looked} in the summary's "
        "directory, the only place a recorded name is read from",
        path=os.fspath(directory.joinpath(*candidates[0]) if candidates else directory),
        hint="keep the three bundle files beside the summary, or name a file elsewhere with "
        "--dataset / --replay",
    )


def _confined_names(recorded: str) -> list[tuple[str, ...]]:
    """Relative component tuples to try beneath the summary's directory, in order."""
    names: list[tuple[str, ...]] = []
    parts = tuple(part for part in recorded.split("/") if part not in ("", "."))
    if parts and not recorded.startswith("/") and ".." not in parts and "\\" not in recorded:
        names.append(parts)
    leaf = recorded.rsplit("/", 1)[-1]
    if leaf not in ("", ".", "..") and "\\" not in leaf and (leaf,) not in names:
        names.append((leaf,))
    return names


def _refuse_linked_parents(directory: Path, parts: tuple[str, ...]) -> None:
    """A recorded ``a/b/file`` must not leave the directory through a linked ``a`` or ``b``."""
    here = directory
    for part in parts[:-1]:
        here = here / part
        if here.is_symlink():
            raise PathSymlink(
                "a recorded bundle path must not pass through a symbolic link",
                path=os.fspath(here),
            )


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
