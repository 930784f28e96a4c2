"""Artifact path rules and symlink-proof resolution beneath a root directory.

Manifests name files by relative path, and a manifest is peer input: a path must not be
able to escape the bundle (``..``, absolute paths, backslashes read as separators on other
systems) or be redirected by a symbolic link planted inside it. Resolution therefore opens
one component at a time relative to the previous directory's file descriptor, refusing a
symlink at every level, so a rename racing with the walk cannot redirect it either.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager

from kiln_verify.errors import (
    FileAccessError,
    KilnError,
    PathInvalid,
    PathMissing,
    PathNotDirectory,
    PathNotRegular,
    PathSymlink,
    snippet,
)
from kiln_verify.limits import MAX_ARTIFACT_PATH_BYTES

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc, as Rust's char::is_control
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted where a file should be must not hang the reader.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def validate_relative_path(path: str) -> tuple[str, ...]:
    """Check the artifact path rules (kiln-hf-trl-contract §5.2); return the components."""
    if not isinstance(path, str) or not path:
        raise PathInvalid("artifact path must be a non-empty string")
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise PathInvalid("artifact path is not valid Unicode (lone surrogate)") from None
    if size > MAX_ARTIFACT_PATH_BYTES:
        raise PathInvalid(
            f"artifact path of {size} bytes exceeds MAX_ARTIFACT_PATH_BYTES = "
            f"{MAX_ARTIFACT_PATH_BYTES}"
        )
    if _CONTROL.search(path):
        raise PathInvalid(f"artifact path {snippet(path)} contains a control character")
    if "\\" in path:
        raise PathInvalid(f"artifact path {snippet(path)} contains a backslash")
    if path.startswith("/"):
        raise PathInvalid(f"artifact path {snippet(path)} is absolute")
    parts = tuple(path.split("/"))
    for part in parts:
        if part in ("", ".", ".."):
            raise PathInvalid(f"artifact path {snippet(path)} has an empty, '.' or '..' component")
    return parts


def _display(root: str | os.PathLike[str], relative: str) -> str:
    return os.path.join(os.fspath(root), relative)


def _os_error(exc: OSError, shown: str) -> KilnError:
    if exc.errno == errno.ENOENT:
        return PathMissing("no such file or directory", path=shown)
    if exc.errno == errno.ELOOP:
        return PathSymlink("symbolic links are not followed", path=shown)
    if exc.errno == errno.ENOTDIR:
        return PathNotDirectory("a parent component is not a directory", path=shown)
    if exc.errno == errno.ENXIO:  # a socket, or a FIFO with no writer
        return PathNotRegular("not a regular file", path=shown)
    return FileAccessError(f"cannot open: {exc.strerror}", path=shown)


def open_root(root: str | os.PathLike[str]) -> int:
    """Open the root directory itself (which the user chose, so it may be a link)."""
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _os_error(exc, os.fspath(root)) from None


def _lstat_at(name: str, dir_fd: int, shown: str) -> os.stat_result:
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except OSError as exc:
        raise _os_error(exc, shown) from None


@contextmanager
def open_regular_beneath(root: str | os.PathLike[str], relative_path: str) -> Iterator[int]:
    """Yield a read-only descriptor of the regular file ``root/relative_path``.

    Every component is checked with ``lstat`` and opened with ``O_NOFOLLOW`` relative to
    its parent's descriptor: parents must be real directories, the leaf a regular file.
    """
    parts = validate_relative_path(relative_path)
    shown = _display(root, relative_path)
    opened: list[int] = [open_root(root)]
    try:
        for index, name in enumerate(parts):
            here = _display(root, "/".join(parts[: index + 1]))
            info = _lstat_at(name, opened[-1], here)
            if stat.S_ISLNK(info.st_mode):
                raise PathSymlink("symbolic links are not followed", path=here)
            last = index == len(parts) - 1
            if not last and not stat.S_ISDIR(info.st_mode):
                raise PathNotDirectory("a parent component is not a directory", path=here)
            if last and not stat.S_ISREG(info.st_mode):
                raise PathNotRegular("not a regular file", path=here)
            try:
                fd = os.open(name, _FILE_FLAGS if last else _DIR_FLAGS, dir_fd=opened[-1])
            except OSError as exc:
                raise _os_error(exc, here) from None
            opened.append(fd)
        leaf = opened[-1]
        if not stat.S_ISREG(os.fstat(leaf).st_mode):  # swapped between lstat and open
            raise PathNotRegular("not a regular file", path=shown)
        os.set_blocking(leaf, True)
        yield leaf
    finally:
        for fd in reversed(opened):
            os.close(fd)


@contextmanager
def open_regular(path: str | os.PathLike[str]) -> Iterator[int]:
    """Yield a read-only descriptor of ``path``, refusing a symlink or non-regular leaf."""
    shown = os.fspath(path)
    try:
        fd = os.open(path, _FILE_FLAGS)
    except OSError as exc:
        raise _os_error(exc, shown) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PathNotRegular("not a regular file", path=shown)
        os.set_blocking(fd, True)
        yield fd
    finally:
        os.close(fd)
