"""Atomic, no-clobber publication of one file or a whole directory: front ends over the
one publisher (:mod:`kiln_verify.core.publisher`).

Outputs are content-addressed evidence, so a reader must never see half of one and a
run must never replace an existing one. A one-target publication needs no journal:
everything is written into a private sibling staging entry ``.NAME.incomplete-<random>``
(files created exclusively, each fsynced, the directories fsynced), then moved into place
with ``renameat2(RENAME_NOREPLACE)``, which fails instead of replacing, and the parent
directory is fsynced. Every failure, including KeyboardInterrupt, removes the staging
entry. A process killed outright (SIGKILL, power loss) can leave a staging entry behind;
it is never the target and is safe to delete.

Paths are resolved relative to an ``O_NOFOLLOW`` descriptor of the parent directory, so
neither the target nor its immediate parent can be a symbolic link, and renaming the
parent mid-way cannot redirect the write.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import IO

from kiln_verify.core.paths import open_regular, validate_relative_path
from kiln_verify.core.publisher import Pathish, publication, write_all
from kiln_verify.errors import PathInvalid, PublishFailed, snippet
from kiln_verify.limits import HASH_CHUNK_BYTES

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _copy_fd(source: Pathish, out_fd: int, max_bytes: int | None) -> None:
    with open_regular(source) as in_fd:
        if max_bytes is not None and os.fstat(in_fd).st_size > max_bytes:
            raise PublishFailed(f"source is larger than {max_bytes} bytes", path=os.fspath(source))
        copied = 0
        while chunk := os.read(in_fd, HASH_CHUNK_BYTES):
            copied += len(chunk)
            if max_bytes is not None and copied > max_bytes:
                raise PublishFailed("source grew while it was copied", path=os.fspath(source))
            write_all(out_fd, chunk)


def _publish_one(
    target: Pathish, mode: int, fill: Callable[[int], None], *, replace: bool = False
) -> None:
    with publication([target], replace=replace, recover_first=False) as staging:
        staging.fill_file(0, mode, fill)


def publish_bytes(
    target: Pathish, data: bytes | bytearray | memoryview, *, mode: int = 0o644
) -> None:
    """Create the file ``target`` holding ``data``; fail if anything exists there."""
    _publish_one(target, mode, partial(write_all, data=data))


def publish_file(
    target: Pathish, source: Pathish, *, mode: int = 0o644, max_bytes: int | None = None
) -> None:
    """Copy a regular, non-symlink ``source`` file to a new ``target`` atomically."""
    _publish_one(target, mode, lambda fd: _copy_fd(source, fd, max_bytes))


def publish_stream(
    target: Pathish,
    fill: Callable[[IO[bytes]], None],
    *,
    mode: int = 0o644,
    replace: bool = False,
) -> None:
    """Create ``target`` from what ``fill`` writes to a staging stream, atomically.

    ``fill`` may raise to abandon the publication (nothing appears). Without ``replace``
    an existing target is never touched (``target_exists``); with ``replace`` an existing
    regular, non-symlink file is atomically replaced by ``rename(2)`` (a reader sees the
    old bytes or the new ones, never a mixture).
    """

    def write(fd: int) -> None:
        with os.fdopen(fd, "wb", buffering=HASH_CHUNK_BYTES, closefd=False) as stream:
            fill(stream)
            stream.flush()

    _publish_one(target, mode, write, replace=replace)


def fsync_dir(path: Pathish) -> None:
    """fsync the directory ``path`` (never through a link): what makes a rename, a new entry
    or a removal inside it durable."""
    fd = os.open(path, _DIR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_bytes(
    target: Pathish, data: bytes | bytearray | memoryview, *, mode: int = 0o644
) -> None:
    """Atomically create or replace the regular file ``target`` with ``data``.

    For state files the caller owns and rewrites (a server's ``run.json``): staged, fsynced,
    renamed over the old file and the directory fsynced, so a crash at any moment leaves
    either the previous complete file or the new one.
    """
    _publish_one(target, mode, partial(write_all, data=data), replace=True)


class StagedDirectory:
    """Write side of a directory publication; only valid inside :func:`staged_directory`."""

    def __init__(self, root_fd: int, path: str, file_mode: int, dir_mode: int) -> None:
        self._root_fd = root_fd
        self._dirs: dict[tuple[str, ...], int] = {(): root_fd}
        self._file_mode = file_mode
        self._dir_mode = dir_mode
        self.path = path
        """Filesystem path of the staging directory, for read-back checks before commit."""

    def _parent_fd(self, parts: tuple[str, ...]) -> int:
        for depth in range(1, len(parts)):
            key = parts[:depth]
            if key not in self._dirs:
                above = self._dirs[key[:-1]]
                os.mkdir(key[-1], self._dir_mode, dir_fd=above)
                self._dirs[key] = os.open(key[-1], _DIR, dir_fd=above)
        return self._dirs[parts[:-1]]

    @contextmanager
    def open(self, relative_path: str) -> Iterator[IO[bytes]]:
        """Stream a new file; it is fsynced when the block exits."""
        parts = validate_relative_path(relative_path)
        parent = self._parent_fd(parts)
        try:
            fd = os.open(parts[-1], _NEW_FILE, self._file_mode, dir_fd=parent)
        except FileExistsError:
            raise PathInvalid(f"{snippet(relative_path)} is written twice") from None
        with os.fdopen(fd, "wb", buffering=HASH_CHUNK_BYTES) as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())

    def write_bytes(self, relative_path: str, data: bytes | bytearray | memoryview) -> None:
        with self.open(relative_path) as stream:
            stream.write(data)

    def copy_file(
        self, relative_path: str, source: Pathish, *, max_bytes: int | None = None
    ) -> None:
        with self.open(relative_path) as stream:
            stream.flush()
            _copy_fd(source, stream.fileno(), max_bytes)

    def _seal(self) -> None:
        """fsync every directory, deepest first, so the rename publishes durable entries."""
        for key in sorted(self._dirs, key=len, reverse=True):
            os.fsync(self._dirs[key])

    def _close(self) -> None:
        for key, fd in self._dirs.items():
            if key:
                os.close(fd)
        self._dirs = {(): self._root_fd}


@contextmanager
def staged_directory(
    target: Pathish, *, dir_mode: int = 0o700, file_mode: int = 0o644
) -> Iterator[StagedDirectory]:
    """Build a directory in private staging; publish it as ``target`` when the block ends.

    The target appears complete or not at all. ``dir_mode`` applies once everything is
    written (staging stays 0700 until then).
    """
    with publication([target], recover_first=False) as staging:
        parent_fd, name = staging.location(0)
        os.mkdir(name, 0o700, dir_fd=parent_fd)
        root_fd = os.open(name, _DIR, dir_fd=parent_fd)
        stage = StagedDirectory(root_fd, staging.entry(0), file_mode, 0o700)
        try:
            yield stage
            stage._seal()
            if dir_mode != 0o700:
                for fd in stage._dirs.values():
                    os.fchmod(fd, dir_mode)
            os.fsync(root_fd)
        finally:
            stage._close()
            os.close(root_fd)


def publish_directory(
    target: Pathish,
    files: Mapping[str, bytes | bytearray | memoryview | os.PathLike[str]],
    *,
    dir_mode: int = 0o700,
    file_mode: int = 0o644,
) -> None:
    """Publish ``files`` (relative path -> bytes, or a source file to copy) as ``target``."""
    _check_layout(files)
    with staged_directory(target, dir_mode=dir_mode, file_mode=file_mode) as stage:
        for relative_path, content in files.items():
            if isinstance(content, os.PathLike):
                stage.copy_file(relative_path, content)
            else:
                stage.write_bytes(relative_path, content)


def _check_layout(files: Mapping[str, object]) -> None:
    """Validate every path before creating anything: a file may not also be a directory."""
    directories: set[str] = set()
    for relative_path in files:
        parts = validate_relative_path(relative_path)
        directories.update("/".join(parts[:depth]) for depth in range(1, len(parts)))
    clash = directories.intersection(files)
    if clash:
        raise PathInvalid(f"{snippet(min(clash))} is both a file and a directory")
