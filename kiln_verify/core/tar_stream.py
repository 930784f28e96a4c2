"""Reading a hostile ``.tar.gz`` as a stream: one budgeted gzip member, strict USTAR headers.

Extraction does not use :mod:`tarfile` at all, so that no library leniency (pax or GNU
extensions, concatenated gzip members, zero padding) can widen what is accepted. This
module decompresses the single gzip member itself, counting every compressed and
decompressed byte against the budgets (a decompression bomb stops at the cap, not at the
disk), parses each 512-byte header with a small strict parser (checksum, POSIX magic,
octal fields, only regular files and directories), and checks the end of the archive.
What a member may be called and where it may go is
:mod:`kiln_verify.core.tar_members`; the rules and codes are in docs/byte-rules.md,
section "Archives".
"""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass

from kiln_verify.core.tar_contract import BLOCK, ArchiveLimits
from kiln_verify.errors import (
    ArchiveBomb,
    ArchiveInvalid,
    ArchiveLink,
    ArchivePathUnsafe,
    ArchiveSpecialFile,
    ArchiveTrailingData,
    snippet,
)

READ_CHUNK = 64 * 1024
"""Compressed bytes read per ``os.read``, and the tail's read size."""

_OCTAL = re.compile(rb"[0-7]+")
_USTAR_MAGIC = b"ustar\x0000"
_REGULAR_TYPES = (b"0", b"\x00")
_DIR_TYPE = b"5"
_LINK_TYPES = {b"1": "hard link", b"2": "symbolic link"}
_SPECIAL_TYPES = {b"3": "character device", b"4": "block device", b"6": "FIFO"}


class GzipReader:
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
        data = os.read(self._fd, READ_CHUNK)
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
        """Exactly ``size`` bytes; the stream ending first is ``archive_invalid``."""
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
class Header:
    """What extraction needs of one USTAR header: the full name, the kind and the size."""

    name: str
    typeflag: bytes
    size: int

    @property
    def is_dir(self) -> bool:
        return self.typeflag == _DIR_TYPE


def _field(block: bytes, start: int, length: int) -> bytes:
    raw = block[start : start + length]
    end = raw.find(b"\x00")
    return raw if end < 0 else raw[:end]


def _number(block: bytes, start: int, length: int, what: str) -> int:
    raw = block[start : start + length].rstrip(b"\x00 ").lstrip(b" ")
    if not _OCTAL.fullmatch(raw):
        raise ArchiveInvalid(f"tar header field {what} is not an octal number: {snippet(raw)}")
    return int(raw, 8)


def parse_header(block: bytes, limits: ArchiveLimits) -> Header:
    """One 512-byte header, refused unless it is a plain POSIX USTAR regular file or
    directory with a valid checksum, octal fields and a UTF-8 name within the budget."""
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
    return Header(name, typeflag, size)


def read_end_of_archive(stream: GzipReader, limits: ArchiveLimits) -> None:
    """After the first zero block: the second one, at most ``max_tail_bytes`` of zeros,
    then the end of the gzip member and of the file."""
    if stream.read_exact(BLOCK, "the end-of-archive marker") != bytes(BLOCK):
        raise ArchiveInvalid("the end-of-archive marker is not two zero blocks")
    tail = 0
    while chunk := stream.read(READ_CHUNK):
        tail += len(chunk)
        if chunk.count(0) != len(chunk):
            raise ArchiveTrailingData("non-zero data follows the tar end-of-archive marker")
        if tail > limits.max_tail_bytes:
            raise ArchiveTrailingData(
                f"more than {limits.max_tail_bytes} bytes follow the tar "
                "end-of-archive marker (MAX_ARCHIVE_TAIL_BYTES)"
            )
    stream.finish()


__all__ = ["READ_CHUNK", "GzipReader", "Header", "parse_header", "read_end_of_archive"]
