"""The one primitive publication relies on: a rename that never replaces its target.

Python has no binding for ``renameat2(RENAME_NOREPLACE)``, and ``os.rename`` /
``os.replace`` silently overwrite. We call libc's ``renameat2`` through ctypes (glibc 2.28+),
falling back to the raw system call on kernels whose libc lacks the wrapper. For a single
file, ``link`` + ``unlink`` is an equally safe no-clobber commit (``link`` fails with
EEXIST), so it is used where the kernel or filesystem rejects ``RENAME_NOREPLACE``. There
is deliberately no fallback that could overwrite.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys
from collections.abc import Callable

RENAME_NOREPLACE = 1
# renameat2 system call numbers; the generic table (aarch64, riscv64, loongarch64) uses 276.
_SYSCALL_NUMBERS = {"x86_64": 316, "aarch64": 276, "riscv64": 276, "loongarch64": 276}

Renameat2 = Callable[[int, bytes, int, bytes, int], int]


class Unsupported(Exception):
    """No no-replace rename exists here for this kind of entry."""


def _load(*, use_wrapper: bool = True) -> Renameat2 | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    function = getattr(libc, "renameat2", None) if use_wrapper else None
    if function is not None:
        function.argtypes = [
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_uint,
        ]
        function.restype = ctypes.c_int
        return function  # type: ignore[no-any-return]
    number = _SYSCALL_NUMBERS.get(platform.machine())
    syscall = getattr(libc, "syscall", None)
    if number is None or syscall is None:
        return None
    syscall.restype = ctypes.c_long

    def via_syscall(olddirfd: int, old: bytes, newdirfd: int, new: bytes, flags: int) -> int:
        return int(
            syscall(
                ctypes.c_long(number),
                ctypes.c_int(olddirfd),
                ctypes.c_char_p(old),
                ctypes.c_int(newdirfd),
                ctypes.c_char_p(new),
                ctypes.c_uint(flags),
            )
        )

    return via_syscall


_renameat2: Renameat2 | None = _load()


def noreplace(dir_fd: int, source: str, target: str, *, allow_link: bool) -> None:
    """Rename ``source`` to ``target`` (both in ``dir_fd``) unless ``target`` exists.

    Raises FileExistsError if it does, :class:`Unsupported` if no safe primitive exists
    (``allow_link`` permits the link + unlink commit, which only works for files).
    """
    between(dir_fd, source, dir_fd, target, allow_link=allow_link)


def between(
    source_dir_fd: int, source: str, target_dir_fd: int, target: str, *, allow_link: bool
) -> None:
    """:func:`noreplace` from one directory into another (same file system)."""
    function = _renameat2
    dir_fd = source_dir_fd
    if function is not None:
        result = function(
            source_dir_fd,
            os.fsencode(source),
            target_dir_fd,
            os.fsencode(target),
            RENAME_NOREPLACE,
        )
        if result == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), target)
    if not allow_link:
        raise Unsupported("renameat2 with RENAME_NOREPLACE is unavailable")
    try:
        os.link(
            source, target, src_dir_fd=dir_fd, dst_dir_fd=target_dir_fd, follow_symlinks=False
        )
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
            raise Unsupported(f"hard links are not supported here: {exc.strerror}") from None
        raise
    os.unlink(source, dir_fd=dir_fd)
