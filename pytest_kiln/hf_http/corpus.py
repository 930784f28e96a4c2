"""Hostile import bodies for ``POST /v1/train/hf/peft/imports/{name}``, built from stdlib.

Each body is rooted at the import's own root (``{name}.kiln-hf-import``), so it reaches
the framing rule it breaks instead of failing on the root alone, and each breaks one rule
any server must keep (Kiln's envelope: plain files under one exact root, no links,
specials, traversal, aliases, trailing data or second gzip member, at most 32 entries
and 4 GiB declared). GNU and pax headers are left out on purpose: Kiln's server reads
them, kiln-verify's refuses them (docs/hf-http-import.md), so neither is a rule of the
contract. ``EXPECTED`` names the archive rule each case breaks, as kiln-verify's own
extractor codes it (tests/pytest_kiln check the corpus against that extractor).
"""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Callable

__all__ = ["EXPECTED", "hostile_bodies"]

Member = tuple[tarfile.TarInfo, bytes | None]

#: Past Kiln's 4 GiB expanded import budget; declared in a header, never sent.
_BOMB_BYTES = 5 * 1024**3
#: Past Kiln's 32-entry import budget.
_ENTRIES = 40


def _member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", **extra: str) -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    for key, value in extra.items():
        setattr(info, key, value)
    return info, (data if info.size else None)


def _tar(*members: Member) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _patched(tar: bytes, offset: int, value: bytes) -> bytes:
    """The first header with ``value`` at ``offset`` and a recomputed checksum."""
    block = bytearray(tar[:512])
    block[offset : offset + len(value)] = value
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\x00 " % sum(block)
    return bytes(block) + tar[512:]


def _header_only(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    return _gz(info.tobuf(tarfile.USTAR_FORMAT) + bytes(1024))


def _builders(root: str) -> dict[str, tuple[str, Callable[[], bytes]]]:
    def files(*names: str) -> bytes:
        return _gz(_tar(*(_member(n, data=b"{}") for n in names)))

    good = files(f"{root}/adapter_config.json")
    directory = _member(root, tarfile.DIRTYPE)
    return {
        "traversal": ("archive_path_unsafe", lambda: files("../escape.json")),
        "traversal-under-root": ("archive_path_unsafe", lambda: files(f"{root}/../../x")),
        "absolute-path": ("archive_path_unsafe", lambda: files("/etc/kiln-conformance")),
        "nul-name": (
            "archive_path_unsafe",
            lambda: _gz(_patched(_tar(_member(f"{root}/a.json", data=b"{}")), 0, b"\x00")),
        ),
        "symlink": (
            "archive_link",
            lambda: _gz(_tar(directory, _member(f"{root}/l", tarfile.SYMTYPE, linkname="../../x"))),
        ),
        "hard-link": (
            "archive_link",
            lambda: _gz(
                _tar(
                    _member(f"{root}/a.json", data=b"{}"),
                    _member(f"{root}/h", tarfile.LNKTYPE, linkname=f"{root}/a.json"),
                )
            ),
        ),
        "char-device": (
            "archive_special_file",
            lambda: _gz(_tar(_member(f"{root}/c", tarfile.CHRTYPE))),
        ),
        "fifo": ("archive_special_file", lambda: _gz(_tar(_member(f"{root}/f", tarfile.FIFOTYPE)))),
        "duplicate": (
            "archive_duplicate",
            lambda: files(f"{root}/adapter_config.json", f"{root}/adapter_config.json"),
        ),
        "case-fold-collision": (
            "archive_duplicate",
            lambda: files(f"{root}/README.md", f"{root}/readme.md"),
        ),
        "wrong-root": ("archive_root_invalid", lambda: files("other.kiln-hf-import/a.json")),
        "second-top-level-entry": (
            "archive_root_invalid",
            lambda: files(f"{root}/a.json", "README"),
        ),
        "declared-bomb": (
            "archive_bomb",
            lambda: _header_only(f"{root}/adapter_model.safetensors", _BOMB_BYTES),
        ),
        "too-many-entries": (
            "archive_bomb",
            lambda: files(*(f"{root}/{index}.json" for index in range(_ENTRIES))),
        ),
        "directory-payload": (
            "archive_invalid",
            lambda: _gz(_patched(_tar(directory), 124, b"00000000001\x00")),
        ),
        "second-gzip-member": ("archive_trailing_data", lambda: good + _gz(b"\x00" * 1024)),
        "tail-garbage": ("archive_trailing_data", lambda: good + b"garbage"),
        "data-after-end": (
            "archive_trailing_data",
            lambda: _gz(_tar(_member(f"{root}/a.json")) + _tar(_member(f"{root}/b.json"))),
        ),
        "truncated-gzip": ("archive_invalid", lambda: good[:-20]),
        "not-gzip": ("archive_invalid", lambda: _tar(_member(f"{root}/a.json", data=b"{}"))),
    }


#: Case name -> the archive rule it breaks (kiln-verify's extractor code).
EXPECTED: dict[str, str] = {case: rule for case, (rule, _) in _builders("x").items()}


def hostile_bodies(name: str) -> dict[str, bytes]:
    """Every hostile body for an import named ``name``, by case."""
    return {case: build() for case, (_, build) in _builders(f"{name}.kiln-hf-import").items()}
