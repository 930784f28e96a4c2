"""Deterministic ``.tar.gz`` writing and hostile-archive-safe extraction.

A bundle archive is peer input. Extraction therefore does not use :mod:`tarfile` at all:
it decompresses the single gzip member itself (counting every byte against a budget, so a
decompression bomb stops at the cap rather than at the disk), parses plain POSIX USTAR
headers with a small strict parser, and accepts only regular files and directories under
one exact root. Everything is written with ``O_CREAT|O_EXCL|O_NOFOLLOW`` relative to
directory descriptors inside a private (0700) directory created for this extraction, so
nothing can land outside it; any failure removes that directory. The rules, their codes
and the reasons are in docs/byte-rules.md, section "Archives".

The writer produces byte-identical output for identical input trees: sorted USTAR entries
under a single root, explicit directories, mtime 0, uid/gid 0, empty owner names, modes
0755/0644, no pax headers, and a gzip header with mtime 0, no file name and a fixed
compression level.
"""

from __future__ import annotations

import gzip
import os
import re
import secrets
import shutil
import stat
import tarfile
import unicodedata
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from kiln_verify.core.paths import (
    open_regular,
    open_regular_beneath,
    open_root,
    validate_relative_path,
)
from kiln_verify.core.publish import _publish_one
from kiln_verify.errors import (
    ArchiveBomb,
    ArchiveDuplicate,
    ArchiveInvalid,
    ArchiveLink,
    ArchivePathUnsafe,
    ArchiveRootInvalid,
    ArchiveSpecialFile,
    ArchiveTrailingData,
    FileAccessError,
    KilnError,
    LimitExceeded,
    PathInvalid,
    PathNotRegular,
    PathSymlink,
    SizeMismatch,
    UsageError,
    snippet,
)
from kiln_verify.limits import (
    HASH_CHUNK_BYTES,
    MAX_ARCHIVE_COMPRESSED_BYTES,
    MAX_ARCHIVE_ENTRIES,
    MAX_ARCHIVE_EXPANDED_BYTES,
    MAX_ARCHIVE_MEMBER_BYTES,
    MAX_ARCHIVE_NAME_BYTES,
    MAX_ARCHIVE_TAIL_BYTES,
)

GZIP_LEVEL = 6
"""Fixed compression level of the writer (part of its byte-exact output)."""

FILE_MODE = 0o644
DIR_MODE = 0o755
EXTRACT_PREFIX = ".kiln-extract-"
"""Name prefix of the private directory an extraction creates inside its parent."""

_BLOCK = 512
_READ_CHUNK = 64 * 1024
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OCTAL = re.compile(rb"[0-7]+")
_USTAR_MAGIC = b"ustar\x0000"
_REGULAR_TYPES = (b"0", b"\x00")
_DIR_TYPE = b"5"
_LINK_TYPES = {b"1": "hard link", b"2": "symbolic link"}
_SPECIAL_TYPES = {b"3": "character device", b"4": "block device", b"6": "FIFO"}

Pathish = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """Extraction budgets; the defaults are Kiln's CLI download caps."""

    max_entries: int = MAX_ARCHIVE_ENTRIES
    max_expanded_bytes: int = MAX_ARCHIVE_EXPANDED_BYTES
    max_member_bytes: int = MAX_ARCHIVE_MEMBER_BYTES
    max_name_bytes: int = MAX_ARCHIVE_NAME_BYTES
    max_compressed_bytes: int = MAX_ARCHIVE_COMPRESSED_BYTES
    max_tail_bytes: int = MAX_ARCHIVE_TAIL_BYTES

    @property
    def max_stream_bytes(self) -> int:
        """Most decompressed bytes an archive within the other budgets can contain."""
        per_entry = 2 * _BLOCK  # header plus at most one block of padding
        end = 2 * _BLOCK
        return self.max_expanded_bytes + self.max_entries * per_entry + end + self.max_tail_bytes


DEFAULT_LIMITS = ArchiveLimits()


class MemberRules(Protocol):
    """What one kind of archive may hold, consulted at every member header before a byte
    of that member reaches the disk.

    The generic budgets bound any archive; these bound a particular one by its own
    manifest. Extraction with rules reads the archive twice: a first pass writes nothing,
    keeps the members :meth:`wants` in memory (their sizes already passed :meth:`check`)
    and stops once :meth:`ready`; the second pass writes, calling :meth:`check` again with
    everything the manifests declare known, so nothing undeclared or mis-sized is ever
    written. Names are relative to the archive root (``""`` is the root itself).
    """

    def check(self, relative: str, is_dir: bool, size: int) -> None:
        """Raise unless a member of this name, kind and declared size can belong."""

    def wants(self, relative: str) -> bool:
        """Whether the first pass keeps this member's bytes for :meth:`capture`."""

    def capture(self, relative: str, data: bytes) -> None:
        """Take a wanted member's bytes (a manifest); may raise if they are invalid."""

    def ready(self) -> bool:
        """Everything wanted has been captured: the first pass may stop."""

    def missing(self) -> None:
        """Raise for what was wanted but never seen (the first pass reached the end)."""


def _check_root_name(root_name: str) -> None:
    try:
        parts = validate_relative_path(root_name)
    except PathInvalid as exc:
        raise UsageError(f"root name {snippet(root_name)}: {exc.rule}") from None
    if len(parts) != 1:
        raise UsageError(f"root name {snippet(root_name)} must be a single path component")


# --- writing ---------------------------------------------------------------------------


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
    :func:`extract_tar_gz` accepts what this writes.
    """
    _check_root_name(root_name)
    if isinstance(output, str | os.PathLike):

        def fill(fd: int) -> None:
            with os.fdopen(fd, "wb", buffering=HASH_CHUNK_BYTES, closefd=False) as stream:
                _write_stream(root_dir, stream, root_name, limits)

        _publish_one(output, FILE_MODE, fill)
    else:
        _write_stream(root_dir, output, root_name, limits)


# --- reading ---------------------------------------------------------------------------


class _GzipReader:
    """Exactly one gzip member, decompressed on demand within a byte budget."""

    def __init__(self, fd: int, limits: ArchiveLimits) -> None:
        self._fd = fd
        self._limits = limits
        self._inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip wrapper only
        self._compressed = 0
        self._produced = 0

    def _next_input(self) -> bytes:
        tail = self._inflate.unconsumed_tail
        if tail:
            return tail
        data = os.read(self._fd, _READ_CHUNK)
        self._compressed += len(data)
        if self._compressed > self._limits.max_compressed_bytes:
            raise ArchiveBomb(
                f"the archive is larger than {self._limits.max_compressed_bytes} bytes "
                "(MAX_ARCHIVE_COMPRESSED_BYTES)"
            )
        if not data:
            raise ArchiveInvalid("the gzip stream is truncated (no end-of-member trailer)")
        return data

    def read(self, limit: int) -> bytes:
        """Up to ``limit`` (> 0) decompressed bytes; ``b""`` once the member has ended."""
        while not self._inflate.eof:
            data = self._next_input()
            try:
                out = self._inflate.decompress(data, limit)
            except zlib.error as exc:
                raise ArchiveInvalid(f"the gzip stream is corrupt: {exc}") from None
            if out:
                self._produced += len(out)
                if self._produced > self._limits.max_stream_bytes:
                    raise ArchiveBomb(
                        f"more than {self._limits.max_stream_bytes} decompressed bytes; the "
                        "archive cannot be within the entry and size budgets"
                    )
                return out
        return b""

    def read_exact(self, size: int, what: str) -> bytes:
        buffer = bytearray()
        while len(buffer) < size:
            chunk = self.read(size - len(buffer))
            if not chunk:
                raise ArchiveInvalid(f"the tar stream ends inside {what}")
            buffer += chunk
        return bytes(buffer)

    def finish(self) -> None:
        """Require the end of the member, then nothing at all after it."""
        if self._inflate.unused_data or os.read(self._fd, 1):
            raise ArchiveTrailingData(
                "bytes follow the gzip member (a second member or trailing garbage)"
            )


@dataclass(frozen=True, slots=True)
class _Header:
    name: str
    typeflag: bytes
    size: int


def _field(block: bytes, start: int, length: int) -> bytes:
    raw = block[start : start + length]
    end = raw.find(b"\x00")
    return raw if end < 0 else raw[:end]


def _number(block: bytes, start: int, length: int, what: str) -> int:
    raw = block[start : start + length].rstrip(b"\x00 ").lstrip(b" ")
    if not _OCTAL.fullmatch(raw):
        raise ArchiveInvalid(f"tar header field {what} is not an octal number: {snippet(raw)}")
    return int(raw, 8)


def _parse_header(block: bytes, limits: ArchiveLimits) -> _Header:
    stored = _number(block, 148, 8, "chksum")
    blanked = block[:148] + b" " * 8 + block[156:]
    unsigned = sum(blanked)
    signed = sum(b - 256 if b > 127 else b for b in blanked)
    if stored not in (unsigned, signed):
        raise ArchiveInvalid("tar header checksum mismatch (corrupt or not a tar archive)")
    if block[257:265] != _USTAR_MAGIC:
        raise ArchiveInvalid(
            f"tar header magic {snippet(block[257:265])} is not POSIX USTAR ('ustar\\0' '00'); "
            "GNU and v7 headers are not accepted"
        )
    typeflag = block[156:157]
    name_bytes = _field(block, 0, 100)
    prefix = _field(block, 345, 155)
    if prefix:
        name_bytes = prefix + b"/" + name_bytes
    size = _number(block, 124, 12, "size")
    try:
        name = name_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise ArchivePathUnsafe(f"member name {snippet(name_bytes)} is not UTF-8") from None
    if typeflag in _LINK_TYPES:
        raise ArchiveLink(f"member {snippet(name)} is a {_LINK_TYPES[typeflag]}")
    if typeflag in _SPECIAL_TYPES:
        raise ArchiveSpecialFile(f"member {snippet(name)} is a {_SPECIAL_TYPES[typeflag]}")
    if typeflag not in _REGULAR_TYPES and typeflag != _DIR_TYPE:
        raise ArchiveInvalid(
            f"member {snippet(name)} has tar type {snippet(typeflag)}; only plain USTAR "
            "regular files ('0') and directories ('5') are accepted (no pax, GNU or sparse "
            "headers)"
        )
    if len(name_bytes.rstrip(b"/")) > limits.max_name_bytes:
        raise ArchivePathUnsafe(
            f"member name {snippet(name)} is longer than {limits.max_name_bytes} bytes "
            "(MAX_ARCHIVE_NAME_BYTES)"
        )
    return _Header(name, typeflag, size)


def _fold(parts: tuple[str, ...]) -> str:
    return unicodedata.normalize("NFC", "/".join(parts)).casefold()


class _Layout:
    """Names seen so far: rejects duplicates, case-folded aliases and file/dir clashes."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[str, ...], bool]] = {}  # folded -> (parts, is_dir)
        self._explicit: set[str] = set()

    def add(self, parts: tuple[str, ...], is_dir: bool) -> list[tuple[str, ...]]:
        """Record ``parts``; return the implied parent directories that are new."""
        new_dirs: list[tuple[str, ...]] = []
        for depth in range(1, len(parts) + 1):
            prefix = parts[:depth]
            leaf = depth == len(parts)
            key = _fold(prefix)
            shown = snippet("/".join(prefix))
            known = self._seen.get(key)
            if known is None:
                self._seen[key] = (prefix, is_dir or not leaf)
                if not leaf:
                    new_dirs.append(prefix)
                continue
            known_parts, known_dir = known
            if known_parts != prefix:
                raise ArchiveDuplicate(
                    f"{shown} and {snippet('/'.join(known_parts))} are the same name after "
                    "case folding"
                )
            if not leaf:
                if not known_dir:
                    raise ArchiveDuplicate(f"{shown} is both a file and a directory")
                continue
            if known_dir != is_dir:
                raise ArchiveDuplicate(f"{shown} is both a file and a directory")
            if not is_dir or key in self._explicit:
                raise ArchiveDuplicate(f"{shown} appears more than once")
        if is_dir:
            self._explicit.add(_fold(parts))
        return new_dirs


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
        self._layout = _Layout()
        self._entries = 0
        self._expanded = 0
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

    def _member(self, header: _Header, stream: _GzipReader) -> None:
        is_dir = header.typeflag == _DIR_TYPE
        name = header.name[:-1] if is_dir and header.name.endswith("/") else header.name
        try:
            parts = validate_relative_path(name)
        except PathInvalid as exc:
            raise ArchivePathUnsafe(f"member {snippet(header.name)}: {exc.rule}") from None
        if parts[0] != self._root:
            raise ArchiveRootInvalid(
                f"member {snippet(header.name)} is not under the single root "
                f"{snippet(self._root + '/')}"
            )
        if len(parts) == 1 and not is_dir:
            raise ArchiveRootInvalid(f"the root {snippet(self._root)} is not a directory")
        self._entries += 1
        if self._entries > self._limits.max_entries:
            raise ArchiveBomb(f"more than {self._limits.max_entries} entries (MAX_ARCHIVE_ENTRIES)")
        if is_dir and header.size:
            raise ArchiveInvalid(f"directory {snippet(header.name)} has a non-zero size")
        if header.size > self._limits.max_member_bytes:
            raise ArchiveBomb(
                f"member {snippet(header.name)} declares {header.size} bytes, more than "
                f"{self._limits.max_member_bytes} (MAX_ARCHIVE_MEMBER_BYTES)"
            )
        self._expanded += header.size
        if self._expanded > self._limits.max_expanded_bytes:
            raise ArchiveBomb(
                f"members declare more than {self._limits.max_expanded_bytes} bytes in all "
                "(MAX_ARCHIVE_EXPANDED_BYTES)"
            )
        relative = "/".join(parts[1:])
        if self._rules is not None:
            self._rules.check(relative, is_dir, header.size)
        new_dirs = self._layout.add(parts, is_dir)
        if self._private_fd is None:
            if not is_dir:
                self._read_member(relative, header, stream)
            return
        for directory in new_dirs:
            self._mkdir(directory)
        if is_dir:
            self._mkdir(parts)
            return
        self._write_file(parts, relative, header, stream)

    def _data(self, header: _Header, stream: _GzipReader) -> Iterator[bytes]:
        """The member's data in chunks, then its padding consumed."""
        remaining = header.size
        while remaining:
            chunk = stream.read_exact(min(remaining, HASH_CHUNK_BYTES), "a member's data")
            remaining -= len(chunk)
            yield chunk
        padding = -header.size % _BLOCK
        if padding:
            stream.read_exact(padding, "a member's padding")

    def _read_member(self, relative: str, header: _Header, stream: _GzipReader) -> None:
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
        self, parts: tuple[str, ...], relative: str, header: _Header, stream: _GzipReader
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

    def run(self, stream: _GzipReader) -> None:
        dry = self._private_fd is None
        while True:
            if dry and self._rules is not None and self._rules.ready():
                return  # the second pass checks the rest while it writes
            block = stream.read_exact(_BLOCK, "a header")
            if block == bytes(_BLOCK):
                break
            header = _parse_header(block, self._limits)
            self._member(header, stream)
        if dry and self._rules is not None:
            self._rules.missing()
        if not self._entries:
            raise ArchiveRootInvalid(
                f"the archive is empty; it must hold the root {snippet(self._root + '/')}"
            )
        if stream.read_exact(_BLOCK, "the end-of-archive marker") != bytes(_BLOCK):
            raise ArchiveInvalid("the end-of-archive marker is not two zero blocks")
        tail = 0
        while chunk := stream.read(_READ_CHUNK):
            tail += len(chunk)
            if chunk.count(0) != len(chunk):
                raise ArchiveTrailingData("non-zero data follows the tar end-of-archive marker")
            if tail > self._limits.max_tail_bytes:
                raise ArchiveTrailingData(
                    f"more than {self._limits.max_tail_bytes} bytes follow the tar "
                    "end-of-archive marker (MAX_ARCHIVE_TAIL_BYTES)"
                )
        stream.finish()


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
    _check_root_name(expected_root)
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
                    dry.run(_GzipReader(archive_fd, limits))
                    os.lseek(archive_fd, 0, os.SEEK_SET)
                private_fd = os.open(private, _DIR, dir_fd=parent_fd)
                try:
                    extractor = _Extractor(private_fd, expected_root, limits, rules, captured)
                    extractor.run(_GzipReader(archive_fd, limits))
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
