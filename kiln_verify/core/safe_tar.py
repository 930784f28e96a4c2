"""Hostile-archive-safe extraction, and the public entry of the archive modules.

A bundle archive is peer input. Extraction therefore does not use :mod:`tarfile` at all:
:mod:`~kiln_verify.core.tar_stream` inflates the single gzip member within a byte budget
and parses plain POSIX USTAR headers strictly, and :mod:`~kiln_verify.core.tar_members`
admits each member (one exact root, regular files and directories only, budgets, the
caller's rules, no colliding names) before a byte of it is read. This module does the
writing: everything is created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` relative to directory
descriptors inside a private (0700) directory made for this extraction, so nothing can
land outside it, and any failure removes that directory. With member rules it reads the
archive twice, the first time without writing (:class:`MemberRules`). The rules, their
codes and the reasons are in docs/byte-rules.md, section "Archives".

The deterministic writer is :mod:`~kiln_verify.core.tar_write`; its entry point and the
shared budgets and rules (:mod:`~kiln_verify.core.tar_contract`) are re-exported here, so
callers import every archive name from ``kiln_verify.core.safe_tar``.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from kiln_verify.core.paths import open_regular, open_root
from kiln_verify.core.tar_contract import (
    BLOCK,
    DEFAULT_LIMITS,
    DIR_MODE,
    FILE_MODE,
    ArchiveLimits,
    MemberRules,
    Pathish,
    check_root_name,
)
from kiln_verify.core.tar_members import MemberGate
from kiln_verify.core.tar_stream import GzipReader, Header, parse_header, read_end_of_archive
from kiln_verify.core.tar_write import GZIP_LEVEL, write_tar_gz
from kiln_verify.errors import (
    ArchiveBomb,
    ArchiveInvalid,
    ArchiveRootInvalid,
    FileAccessError,
    KilnError,
    UsageError,
    snippet,
)
from kiln_verify.limits import HASH_CHUNK_BYTES

EXTRACT_PREFIX = ".kiln-extract-"
"""Name prefix of the private directory an extraction creates inside its parent."""

_GzipReader = GzipReader  # the name tests/core/test_safe_tar.py drives the reader by

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _write_all(fd: int, data: bytes) -> None:
    """Every byte extraction writes goes through here (tests count them)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Extractor:
    """One pass over the tar stream. Without ``private_fd`` it is the dry first pass of an
    extraction with rules: the same checks, nothing created, wanted members kept."""

    def __init__(
        self,
        private_fd: int | None,
        root: str,
        limits: ArchiveLimits,
        rules: MemberRules | None = None,
        captured: dict[str, bytes] | None = None,
    ) -> None:
        self._private_fd = private_fd
        self._root = root
        self._limits = limits
        self._rules = rules
        self._captured = captured if captured is not None else {}
        self._gate = MemberGate(root, limits, rules)
        self._created: set[tuple[str, ...]] = set()

    def _mkdir(self, parts: tuple[str, ...]) -> None:
        if parts in self._created:  # an explicit entry for an implied directory
            return
        self._created.add(parts)
        parent = self._open_parent(parts)
        try:
            os.mkdir(parts[-1], 0o700, dir_fd=parent)
            fd = os.open(parts[-1], _DIR, dir_fd=parent)
            try:
                os.fchmod(fd, DIR_MODE)
            finally:
                os.close(fd)
        finally:
            os.close(parent)

    def _open_parent(self, parts: tuple[str, ...]) -> int:
        assert self._private_fd is not None
        fd = os.dup(self._private_fd)
        try:
            for part in parts[:-1]:
                nxt = os.open(part, _DIR, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _member(self, header: Header, stream: GzipReader) -> None:
        member = self._gate.admit(header)
        if self._private_fd is None:
            if not member.is_dir:
                self._read_member(member.relative, header, stream)
            return
        for directory in member.new_dirs:
            self._mkdir(directory)
        if member.is_dir:
            self._mkdir(member.parts)
            return
        self._write_file(member.parts, member.relative, header, stream)

    def _data(self, header: Header, stream: GzipReader) -> Iterator[bytes]:
        """The member's data in chunks, then its padding consumed."""
        remaining = header.size
        while remaining:
            chunk = stream.read_exact(min(remaining, HASH_CHUNK_BYTES), "a member's data")
            remaining -= len(chunk)
            yield chunk
        padding = -header.size % BLOCK
        if padding:
            stream.read_exact(padding, "a member's padding")

    def _read_member(self, relative: str, header: Header, stream: GzipReader) -> None:
        """Dry pass: skip the data, or keep it when the rules want it."""
        assert self._rules is not None
        if not self._rules.wants(relative) or relative in self._captured:
            for _ in self._data(header, stream):
                pass
            return
        data = b"".join(self._data(header, stream))
        self._captured[relative] = data
        self._rules.capture(relative, data)

    def _write_file(
        self, parts: tuple[str, ...], relative: str, header: Header, stream: GzipReader
    ) -> None:
        parent = self._open_parent(parts)
        try:
            fd = os.open(parts[-1], _NEW_FILE, FILE_MODE, dir_fd=parent)
        finally:
            os.close(parent)
        kept = self._captured.get(relative)
        seen = bytearray() if kept is not None else None
        try:
            os.fchmod(fd, FILE_MODE)
            for chunk in self._data(header, stream):
                if seen is not None:
                    seen += chunk
                _write_all(fd, chunk)
        finally:
            os.close(fd)
        if seen is not None and kept is not None and bytes(seen) != kept:
            raise ArchiveInvalid(
                f"member {snippet(relative)} differs between the two reads of the archive "
                "(it changed while it was extracted)"
            )

    def run(self, stream: GzipReader) -> None:
        dry = self._private_fd is None
        while True:
            if dry and self._rules is not None and self._rules.ready():
                return  # the second pass checks the rest while it writes
            block = stream.read_exact(BLOCK, "a header")
            if block == bytes(BLOCK):
                break
            header = parse_header(block, self._limits)
            self._member(header, stream)
        if dry and self._rules is not None:
            self._rules.missing()
        if not self._gate.entries:
            raise ArchiveRootInvalid(
                f"the archive is empty; it must hold the root {snippet(self._root + '/')}"
            )
        read_end_of_archive(stream, self._limits)


def extract_tar_gz(
    archive_path: Pathish,
    destination_parent: Pathish,
    *,
    expected_root: str,
    limits: ArchiveLimits = DEFAULT_LIMITS,
    rules: MemberRules | None = None,
) -> Path:
    """Extract a hostile ``.tar.gz`` into a new private directory inside ``destination_parent``.

    Returns ``<private>/<expected_root>``; the caller owns ``<private>`` (the returned
    path's parent, named ``.kiln-extract-<hex>``, mode 0700) and removes it, or uses
    :func:`extracted_tar_gz`. On any failure nothing is left behind and a
    :class:`~kiln_verify.errors.KilnError` is raised (``archive_*`` codes for the archive,
    ``io_failed`` for local I/O, whatever ``rules`` raise). With ``rules`` the archive is
    read twice, the first time without writing (:class:`MemberRules`).
    """
    check_root_name(expected_root)
    parent_shown = os.fspath(destination_parent)
    with open_regular(archive_path) as archive_fd:
        size = os.fstat(archive_fd).st_size
        if size > limits.max_compressed_bytes:
            raise ArchiveBomb(
                f"the archive is {size} bytes, more than {limits.max_compressed_bytes} "
                "(MAX_ARCHIVE_COMPRESSED_BYTES)",
                path=os.fspath(archive_path),
            )
        parent_fd = open_root(destination_parent)
        try:
            private = EXTRACT_PREFIX + secrets.token_hex(8)
            try:
                os.mkdir(private, 0o700, dir_fd=parent_fd)
            except OSError as exc:
                raise FileAccessError(
                    f"cannot create the private extraction directory: {exc.strerror or exc}",
                    path=parent_shown,
                ) from None
            try:
                captured: dict[str, bytes] = {}
                if rules is not None:
                    dry = _Extractor(None, expected_root, limits, rules, captured)
                    dry.run(GzipReader(archive_fd, limits))
                    os.lseek(archive_fd, 0, os.SEEK_SET)
                private_fd = os.open(private, _DIR, dir_fd=parent_fd)
                try:
                    extractor = _Extractor(private_fd, expected_root, limits, rules, captured)
                    extractor.run(GzipReader(archive_fd, limits))
                finally:
                    os.close(private_fd)
            except KilnError as exc:
                _remove(parent_fd, private)
                if exc.path is None:
                    exc.path = os.fspath(archive_path)
                raise
            except OSError as exc:
                _remove(parent_fd, private)
                raise FileAccessError(
                    f"extraction failed: {exc.strerror or exc}", path=os.fspath(archive_path)
                ) from None
            except BaseException:
                _remove(parent_fd, private)
                raise
        finally:
            os.close(parent_fd)
    return Path(parent_shown, private, expected_root)


def _remove(parent_fd: int, name: str) -> None:
    with suppress(OSError):
        shutil.rmtree(name, dir_fd=parent_fd)


def remove_extracted(root: Pathish) -> None:
    """Remove the private directory of an :func:`extract_tar_gz` result (its parent)."""
    private = Path(root).parent
    if not private.name.startswith(EXTRACT_PREFIX):
        raise UsageError(f"{snippet(os.fspath(root))} is not an extraction result")
    parent_fd = open_root(private.parent)
    try:
        _remove(parent_fd, private.name)
    finally:
        os.close(parent_fd)


@contextmanager
def extracted_tar_gz(
    archive_path: Pathish,
    destination_parent: Pathish,
    *,
    expected_root: str,
    limits: ArchiveLimits = DEFAULT_LIMITS,
    rules: MemberRules | None = None,
) -> Iterator[Path]:
    """:func:`extract_tar_gz`, removing the private directory when the block exits."""
    root = extract_tar_gz(
        archive_path, destination_parent, expected_root=expected_root, limits=limits, rules=rules
    )
    try:
        yield root
    finally:
        remove_extracted(root)


__all__ = [
    "DEFAULT_LIMITS",
    "DIR_MODE",
    "EXTRACT_PREFIX",
    "FILE_MODE",
    "GZIP_LEVEL",
    "ArchiveLimits",
    "MemberRules",
    "extract_tar_gz",
    "extracted_tar_gz",
    "remove_extracted",
    "write_tar_gz",
]
