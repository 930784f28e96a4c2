"""Atomic, no-clobber publication of one file or a whole directory.

Outputs are content-addressed evidence, so a reader must never see half of one and a
run must never replace an existing one. Everything is written into a private sibling
staging entry ``.NAME.incomplete-<random>`` (files created exclusively, each fsynced, the
directories fsynced), then moved into place with ``renameat2(RENAME_NOREPLACE)``, which
fails instead of replacing, and the parent directory is fsynced. Every failure, including
KeyboardInterrupt, removes the staging entry. A process killed outright (SIGKILL, power
loss) can leave a staging entry behind; it is never the target and is safe to delete.

Paths are resolved relative to an ``O_NOFOLLOW`` descriptor of the parent directory, so
neither the target nor its immediate parent can be a symbolic link, and renaming the
parent mid-way cannot redirect the write.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import IO

from kiln_verify.core import rename
from kiln_verify.core.paths import open_regular, validate_relative_path
from kiln_verify.errors import (
    KilnError,
    PathInvalid,
    PublishFailed,
    SymlinkRefused,
    TargetExists,
    snippet,
)
from kiln_verify.limits import HASH_CHUNK_BYTES

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Pathish = str | os.PathLike[str]


class _Slot:
    """The parent descriptor, the target name and its staging name, checked up front."""

    def __init__(self, target: Pathish, *, replace: bool = False) -> None:
        shown = os.fspath(target)
        self.replace = replace
        head, name = os.path.split(shown.rstrip("/") or "/")
        if name in ("", ".", ".."):
            raise PublishFailed(f"{snippet(shown)} names no directory entry", path=shown)
        parent = head or "."
        self.shown = shown
        self.name = name
        self.staging = f".{name}.incomplete-{secrets.token_hex(8)}"
        try:
            info = os.lstat(parent)
        except FileNotFoundError:
            raise PublishFailed("the parent directory does not exist", path=shown) from None
        if stat.S_ISLNK(info.st_mode):
            raise SymlinkRefused("the parent directory is a symbolic link", path=parent)
        if not stat.S_ISDIR(info.st_mode):
            raise PublishFailed("the parent is not a directory", path=parent)
        try:
            self.parent_fd = os.open(parent, _DIR)
        except OSError as exc:
            raise PublishFailed(
                f"cannot open the parent directory: {exc.strerror}", path=parent
            ) from None
        self.parent_path = parent
        try:
            self.refuse_existing()
        except BaseException:
            os.close(self.parent_fd)
            raise

    def refuse_existing(self) -> None:
        try:
            info = os.lstat(self.name, dir_fd=self.parent_fd)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(info.st_mode):
            raise SymlinkRefused("the target is a symbolic link", path=self.shown)
        if self.replace and stat.S_ISREG(info.st_mode):
            return
        if self.replace:
            raise PublishFailed("the target exists and is not a regular file", path=self.shown)
        raise TargetExists("the target already exists and is never replaced", path=self.shown)

    @property
    def staging_path(self) -> str:
        return os.path.join(self.parent_path, self.staging)

    def commit(self, *, is_dir: bool) -> None:
        """Move staging to the target without ever replacing it, then fsync the parent."""
        if self.replace:
            self.refuse_existing()  # still a regular file (or absent), never a link
            os.rename(self.staging, self.name, src_dir_fd=self.parent_fd, dst_dir_fd=self.parent_fd)
            os.fsync(self.parent_fd)
            return
        try:
            rename.noreplace(self.parent_fd, self.staging, self.name, allow_link=not is_dir)
        except FileExistsError:
            self.refuse_existing()
            raise TargetExists("the target appeared while publishing", path=self.shown) from None
        except rename.Unsupported as exc:
            raise PublishFailed(
                f"this system has no no-replace rename ({exc}); refusing a method that could "
                "overwrite",
                path=self.shown,
            ) from None
        try:
            os.fsync(self.parent_fd)
        except BaseException:
            # Not durable: take it back rather than leave an output that may vanish.
            with suppress(OSError):
                rename.noreplace(self.parent_fd, self.name, self.staging, allow_link=False)
            raise

    def discard(self) -> None:
        with suppress(OSError):
            info = os.lstat(self.staging, dir_fd=self.parent_fd)
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(self.staging, dir_fd=self.parent_fd)
            else:
                os.unlink(self.staging, dir_fd=self.parent_fd)

    def close(self) -> None:
        os.close(self.parent_fd)


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _copy_fd(source: Pathish, out_fd: int, max_bytes: int | None) -> None:
    with open_regular(source) as in_fd:
        if max_bytes is not None and os.fstat(in_fd).st_size > max_bytes:
            raise PublishFailed(f"source is larger than {max_bytes} bytes", path=os.fspath(source))
        copied = 0
        while chunk := os.read(in_fd, HASH_CHUNK_BYTES):
            copied += len(chunk)
            if max_bytes is not None and copied > max_bytes:
                raise PublishFailed("source grew while it was copied", path=os.fspath(source))
            _write_all(out_fd, chunk)


@contextmanager
def _publication(target: Pathish, *, is_dir: bool, replace: bool = False) -> Iterator[_Slot]:
    slot = _Slot(target, replace=replace)
    try:
        yield slot
        slot.commit(is_dir=is_dir)
    except KilnError:
        slot.discard()
        raise
    except OSError as exc:
        slot.discard()
        raise PublishFailed(f"write failed: {exc.strerror or exc}", path=slot.shown) from exc
    except BaseException:
        slot.discard()
        raise
    finally:
        slot.close()


def _publish_one(
    target: Pathish, mode: int, fill: Callable[[int], None], *, replace: bool = False
) -> None:
    with _publication(target, is_dir=False, replace=replace) as slot:
        fd = os.open(slot.staging, _NEW_FILE, mode, dir_fd=slot.parent_fd)
        try:
            fill(fd)
            os.fsync(fd)
        finally:
            os.close(fd)


def publish_bytes(
    target: Pathish, data: bytes | bytearray | memoryview, *, mode: int = 0o644
) -> None:
    """Create the file ``target`` holding ``data``; fail if anything exists there."""
    _publish_one(target, mode, lambda fd: _write_all(fd, data))


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


def replace_bytes(
    target: Pathish, data: bytes | bytearray | memoryview, *, mode: int = 0o644
) -> None:
    """Atomically create or replace the regular file ``target`` with ``data``.

    For state files the caller owns and rewrites (a server's ``run.json``): staged, fsynced,
    renamed over the old file and the directory fsynced, so a crash at any moment leaves
    either the previous complete file or the new one.
    """
    _publish_one(target, mode, lambda fd: _write_all(fd, data), replace=True)


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
    with _publication(target, is_dir=True) as slot:
        os.mkdir(slot.staging, 0o700, dir_fd=slot.parent_fd)
        root_fd = os.open(slot.staging, _DIR, dir_fd=slot.parent_fd)
        stage = StagedDirectory(root_fd, slot.staging_path, file_mode, 0o700)
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
