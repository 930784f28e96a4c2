"""The deterministic ``.tar.gz`` writer: identical trees give identical bytes.

An export's archive is content-addressed evidence that other machines re-derive, so the
writer leaves nothing to the host: sorted USTAR entries under a single root, explicit
directories, mtime 0, uid/gid 0, empty owner names, modes 0755/0644, no pax headers, and a
gzip header with mtime 0, no file name and a fixed compression level. The tree is walked
without following links (a link or special file is refused) and must fit the same
:class:`~kiln_verify.core.tar_contract.ArchiveLimits` the extractor applies, so the writer
never produces an archive the reader refuses (docs/byte-rules.md, "Archives").
"""

from __future__ import annotations

import gzip
import os
import stat
import tarfile
from dataclasses import dataclass
from typing import IO

from kiln_verify.core.paths import open_regular_beneath, open_root, validate_relative_path
from kiln_verify.core.publish import _publish_one
from kiln_verify.core.tar_contract import (
    DEFAULT_LIMITS,
    DIR_MODE,
    FILE_MODE,
    ArchiveLimits,
    Pathish,
    check_root_name,
)
from kiln_verify.errors import (
    ArchivePathUnsafe,
    FileAccessError,
    LimitExceeded,
    PathNotRegular,
    PathSymlink,
    SizeMismatch,
    snippet,
)
from kiln_verify.limits import HASH_CHUNK_BYTES

GZIP_LEVEL = 6
"""Fixed compression level of the writer (part of its byte-exact output)."""

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str  # archive name; directories end in "/"
    relative: str  # path beneath root_dir ("" for the root itself)
    is_dir: bool
    size: int


def _scan(root_dir: Pathish, root_name: str, limits: ArchiveLimits) -> list[_Entry]:
    """List the tree beneath ``root_dir`` without following links; refuse special files."""
    entries = [_Entry(root_name + "/", "", True, 0)]
    pending: list[str] = [""]
    total = 0
    root_fd = open_root(root_dir)
    try:
        while pending:
            relative = pending.pop()
            fd = root_fd
            if relative:
                fd = _open_dir_chain(root_fd, relative.split("/"), os.fspath(root_dir))
            try:
                names = sorted(os.listdir(fd))
                for name in names:
                    child = f"{relative}/{name}" if relative else name
                    shown = os.path.join(os.fspath(root_dir), child)
                    validate_relative_path(child)
                    info = os.lstat(name, dir_fd=fd)
                    if stat.S_ISLNK(info.st_mode):
                        raise PathSymlink("symbolic links are not archived", path=shown)
                    if stat.S_ISDIR(info.st_mode):
                        entries.append(_Entry(f"{root_name}/{child}/", child, True, 0))
                        pending.append(child)
                    elif stat.S_ISREG(info.st_mode):
                        if info.st_size > limits.max_member_bytes:
                            raise LimitExceeded(
                                "a file",
                                limit="MAX_ARCHIVE_MEMBER_BYTES",
                                bound=limits.max_member_bytes,
                                observed=info.st_size,
                                path=shown,
                            )
                        total += info.st_size
                        entries.append(_Entry(f"{root_name}/{child}", child, False, info.st_size))
                    else:
                        raise PathNotRegular("not a regular file or directory", path=shown)
                    if len(entries) > limits.max_entries:
                        raise LimitExceeded(
                            "the number of entries",
                            limit="MAX_ARCHIVE_ENTRIES",
                            bound=limits.max_entries,
                            observed=len(entries),
                            path=os.fspath(root_dir),
                        )
                    if total > limits.max_expanded_bytes:
                        raise LimitExceeded(
                            "the total size of the files",
                            limit="MAX_ARCHIVE_EXPANDED_BYTES",
                            bound=limits.max_expanded_bytes,
                            observed=total,
                            path=os.fspath(root_dir),
                        )
            finally:
                if fd != root_fd:
                    os.close(fd)
    except OSError as exc:
        raise FileAccessError(
            f"cannot read the tree: {exc.strerror or exc}", path=os.fspath(root_dir)
        ) from None
    finally:
        os.close(root_fd)
    for entry in entries:
        if len(entry.name.rstrip("/").encode("utf-8")) > limits.max_name_bytes:
            raise ArchivePathUnsafe(
                f"archive name {snippet(entry.name)} is longer than {limits.max_name_bytes} "
                "bytes (MAX_ARCHIVE_NAME_BYTES)"
            )
    entries.sort(key=lambda entry: entry.name.encode("utf-8"))
    return entries


def _open_dir_chain(root_fd: int, parts: list[str], shown_root: str) -> int:
    fd = root_fd
    try:
        for part in parts:
            try:
                nxt = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                shown = os.path.join(shown_root, *parts)
                raise FileAccessError(
                    f"cannot open directory: {exc.strerror or exc}", path=shown
                ) from None
            if fd != root_fd:
                os.close(fd)
            fd = nxt
    except BaseException:
        if fd != root_fd:
            os.close(fd)
        raise
    return fd


def _tarinfo(entry: _Entry) -> tarfile.TarInfo:
    info = tarfile.TarInfo(entry.name)
    info.type = tarfile.DIRTYPE if entry.is_dir else tarfile.REGTYPE
    info.mode = DIR_MODE if entry.is_dir else FILE_MODE
    info.size = entry.size
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _write_stream(root_dir: Pathish, out: IO[bytes], root_name: str, limits: ArchiveLimits) -> None:
    entries = _scan(root_dir, root_name, limits)
    with gzip.GzipFile(
        filename="", mode="wb", compresslevel=GZIP_LEVEL, fileobj=out, mtime=0
    ) as gz:
        archive = tarfile.TarFile(
            fileobj=gz,
            mode="w",
            format=tarfile.USTAR_FORMAT,
            encoding="utf-8",
            errors="strict",
            copybufsize=HASH_CHUNK_BYTES,
        )
        try:
            for entry in entries:
                try:
                    info = _tarinfo(entry)
                    if entry.is_dir:
                        archive.addfile(info)
                        continue
                    with (
                        open_regular_beneath(root_dir, entry.relative) as fd,
                        os.fdopen(fd, "rb", buffering=HASH_CHUNK_BYTES, closefd=False) as src,
                    ):
                        archive.addfile(info, src)
                        if src.read(1):
                            raise SizeMismatch(
                                "the file grew while it was archived",
                                path=os.path.join(os.fspath(root_dir), entry.relative),
                            )
                except ValueError as exc:  # a name USTAR cannot hold
                    raise ArchivePathUnsafe(
                        f"{snippet(entry.name)} cannot be stored in a USTAR header: {exc}"
                    ) from None
                except OSError as exc:
                    shown = os.path.join(os.fspath(root_dir), entry.relative)
                    if exc.errno is None:  # tarfile's "unexpected end of data": it shrank
                        raise SizeMismatch(
                            f"the file changed while it was archived: {exc}", path=shown
                        ) from None
                    raise FileAccessError(
                        f"archiving failed: {exc.strerror or exc}", path=shown
                    ) from None
        finally:
            archive.close()


def write_tar_gz(
    root_dir: Pathish,
    output: Pathish | IO[bytes],
    *,
    root_name: str,
    limits: ArchiveLimits = DEFAULT_LIMITS,
) -> None:
    """Archive the tree ``root_dir`` as ``root_name/...`` into a deterministic ``.tar.gz``.

    ``output`` is a path (published atomically and never replacing anything, via
    :mod:`kiln_verify.core.publish`) or a writable binary stream (written as is). Symbolic
    links and special files in the tree are refused; the tree must fit ``limits`` so that
    :func:`~kiln_verify.core.safe_tar.extract_tar_gz` accepts what this writes.
    """
    check_root_name(root_name)
    if isinstance(output, str | os.PathLike):

        def fill(fd: int) -> None:
            with os.fdopen(fd, "wb", buffering=HASH_CHUNK_BYTES, closefd=False) as stream:
                _write_stream(root_dir, stream, root_name, limits)

        _publish_one(output, FILE_MODE, fill)
    else:
        _write_stream(root_dir, output, root_name, limits)


__all__ = ["GZIP_LEVEL", "write_tar_gz"]
