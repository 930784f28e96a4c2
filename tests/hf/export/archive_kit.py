"""Build hostile ``.tar.gz`` archives fast, including gigabyte-scale zero bombs.

A bomb's zero run is deflated once (a 1 MiB block, ended by a full flush so that copies
of it need no history) and repeated; the gzip header and trailer (CRC-32 and length of
everything) are written by hand, so the archive is a valid gzip member that Python's
``gzip`` would inflate to the declared bytes. The CRC-32 of a zero run is not recomputed
over its mebibyte for every run of every archive (a 1 GiB bomb is 1,024 runs): CRC-32
continued over fixed bytes is an affine map of the CRC before them, taken once from 33
CRCs of the run. A literal segment (a header, a file's bytes) is deflated once: the
test archives share most of their members, and each segment is deflated alone.
"""

from __future__ import annotations

import struct
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_BLOCK = 512
_ZERO_RUN = 1 << 20


@dataclass(frozen=True)
class Member:
    """A regular file (``data``, or ``zeros`` bytes of 0) or a directory (name ends ``/``)."""

    name: str
    data: bytes = b""
    zeros: int = 0

    @property
    def size(self) -> int:
        return 0 if self.name.endswith("/") else len(self.data) + self.zeros


def _header(member: Member) -> bytes:
    info = tarfile.TarInfo(member.name)
    info.type = tarfile.DIRTYPE if member.name.endswith("/") else tarfile.REGTYPE
    info.mode = 0o755 if member.name.endswith("/") else 0o644
    info.size = member.size
    return info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict")


def _segments(members: Iterable[Member]) -> Iterator[bytes | int]:
    """Literal bytes, or an int: that many zero bytes."""
    for member in members:
        yield _header(member)
        if member.data:
            yield member.data
        if member.zeros:
            yield member.zeros
        padding = -member.size % _BLOCK
        if padding:
            yield bytes(padding)
    yield bytes(2 * _BLOCK)


@cache
def _zero_block() -> bytes:
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    return deflate.compress(bytes(_ZERO_RUN)) + deflate.flush(zlib.Z_FULL_FLUSH)


@cache
def _zero_run_crc() -> tuple[int, tuple[int, ...]]:
    """``crc32(bytes(_ZERO_RUN), c)`` = ``base`` XOR the ``columns`` of ``c``'s set bits."""
    zero = bytes(_ZERO_RUN)
    base = zlib.crc32(zero, 0)
    return base, tuple(zlib.crc32(zero, 1 << bit) ^ base for bit in range(32))


def _crc_after_zero_run(crc: int) -> int:
    """``zlib.crc32(bytes(_ZERO_RUN), crc)`` without reading the run."""
    out, columns = _zero_run_crc()
    bit = 0
    while crc:
        if crc & 1:
            out ^= columns[bit]
        crc >>= 1
        bit += 1
    return out


@cache
def _deflated(segment: bytes) -> bytes:
    """``segment`` deflated on its own, ended by a full flush (no history for what follows)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    return deflate.compress(segment) + deflate.flush(zlib.Z_FULL_FLUSH)


def tar_gz(members: Iterable[Member]) -> bytes:
    """The gzip member of the USTAR stream of ``members`` (plain, in the given order)."""
    out = bytearray(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")
    crc = 0
    total = 0
    for segment in _segments(members):
        if isinstance(segment, bytes):
            out += _deflated(segment)
            crc = zlib.crc32(segment, crc)
            total += len(segment)
            continue
        runs, rest = divmod(segment, _ZERO_RUN)
        for _ in range(runs):
            out += _zero_block()
            crc = _crc_after_zero_run(crc)
        if rest:
            out += _deflated(bytes(rest))
            crc = zlib.crc32(bytes(rest), crc)
        total += segment
    out += zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)  # final empty block
    out += struct.pack("<II", crc & 0xFFFFFFFF, total & 0xFFFFFFFF)
    return bytes(out)


def bundle_members(bundle: Path, root: str) -> list[Member]:
    """The tree ``bundle`` as our writer would order it: root, then sorted names."""
    members = [Member(root + "/")]
    for path in sorted(bundle.rglob("*"), key=lambda p: p.relative_to(bundle).as_posix()):
        relative = path.relative_to(bundle).as_posix()
        if path.is_dir():
            members.append(Member(f"{root}/{relative}/"))
        else:
            members.append(Member(f"{root}/{relative}", path.read_bytes()))
    return sorted(members, key=lambda m: m.name.encode())
