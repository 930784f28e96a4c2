"""Hostile archives: each is refused with its exact code and leaves no trace.

Modelled on pip's unpacking tests (anchors §2.4): every evil archive is built in code with
``tarfile``/``gzip`` (or by patching header bytes), extracted into ``tmp_path/dest``, and the
test asserts the code, that no ``.kiln-extract-*`` directory remains, and that nothing
anywhere under ``tmp_path`` changed (so a traversal that escaped ``dest`` would be seen).
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import stat
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln_verify.core.safe_tar import EXTRACT_PREFIX, ArchiveLimits, extract_tar_gz
from kiln_verify.errors import KilnError

ROOT = "demo.kiln-hf"
SMALL = ArchiveLimits(
    max_entries=16,
    max_expanded_bytes=64 * 1024,
    max_member_bytes=32 * 1024,
    max_name_bytes=96,
    max_tail_bytes=10 * 1024,
)

Member = tuple[tarfile.TarInfo, bytes | None]


def _info(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", **extra: object) -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
    for key, value in extra.items():
        setattr(info, key, value)
    return info, (data if info.size else None)


def file(name: str, data: bytes = b"x") -> Member:
    return _info(name, tarfile.REGTYPE, data)


def directory(name: str) -> Member:
    return _info(name, tarfile.DIRTYPE, mode=0o755)


def tar_bytes(members: list[Member], fmt: int = tarfile.USTAR_FORMAT) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def targz(*members: Member, fmt: int = tarfile.USTAR_FORMAT) -> bytes:
    return gz(tar_bytes(list(members), fmt))


def good() -> bytes:
    return targz(directory(ROOT), file(f"{ROOT}/a.json", b"{}"))


def patch_header(tar: bytes, offset: int, value: bytes, *, fix_checksum: bool = True) -> bytes:
    """Overwrite bytes of the first header and recompute its checksum."""
    block = bytearray(tar[:512])
    block[offset : offset + len(value)] = value
    if fix_checksum:
        block[148:156] = b" " * 8
        block[148:156] = b"%06o\x00 " % sum(block)
    return bytes(block) + tar[512:]


def _snapshot(top: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            info = path.lstat()
            # A directory's mtime moves when the private directory comes and goes; new or
            # removed entries show up by name instead.
            mtime = 0 if stat.S_ISDIR(info.st_mode) else info.st_mtime_ns
            out[str(path.relative_to(top))] = (info.st_mode, info.st_size, mtime)
    return out


def refused(tmp_path: Path, data: bytes, limits: ArchiveLimits = SMALL) -> KilnError:
    archive = tmp_path / "in" / "bundle.tar.gz"
    archive.parent.mkdir(exist_ok=True)
    archive.write_bytes(data)
    dest = tmp_path / "dest"
    dest.mkdir(exist_ok=True)
    before = _snapshot(tmp_path)
    with pytest.raises(KilnError) as caught:
        extract_tar_gz(archive, dest, expected_root=ROOT, limits=limits)
    assert _snapshot(tmp_path) == before, "extraction changed the file system"
    assert not [p for p in dest.iterdir() if p.name.startswith(EXTRACT_PREFIX)]
    assert caught.value.path == str(archive)
    return caught.value


def _long_tail() -> bytes:
    return gz(tar_bytes([file(f"{ROOT}/a")]) + bytes(20 * 1024))


def _two_members() -> bytes:
    return good() + gz(tar_bytes([file(f"{ROOT}/b")]))


def _corrupt_crc() -> bytes:
    data = bytearray(good())
    data[-8] ^= 0xFF  # CRC32 in the gzip trailer
    return bytes(data)


def _gzip_bomb() -> bytes:
    # 16 MiB of zeros compress to ~16 KiB; refused from the header, before decompressing it.
    return targz(directory(ROOT), file(f"{ROOT}/bomb", bytes(16 * 1024 * 1024)))


CASES: dict[str, tuple[str, Callable[[], bytes]]] = {
    # paths
    "traversal": ("archive_path_unsafe", lambda: targz(file("../x"))),
    "traversal_under_root": ("archive_path_unsafe", lambda: targz(file(f"{ROOT}/../../x"))),
    "dot_component": ("archive_path_unsafe", lambda: targz(file(f"{ROOT}/./x"))),
    "absolute": ("archive_path_unsafe", lambda: targz(file("/etc/x"))),
    "backslash": ("archive_path_unsafe", lambda: targz(file(f"{ROOT}\\..\\x"))),
    "control_char": ("archive_path_unsafe", lambda: targz(file(f"{ROOT}/a\x1bb"))),
    "empty_component": ("archive_path_unsafe", lambda: targz(file(f"{ROOT}//x"))),
    "name_too_long": ("archive_path_unsafe", lambda: targz(file(f"{ROOT}/{'n' * 90}"))),
    "not_utf8": (
        "archive_path_unsafe",
        lambda: gz(patch_header(tar_bytes([file(f"{ROOT}/ab")]), len(ROOT) + 1, b"\xff")),
    ),
    # links and special files
    "symlink_outside": (
        "archive_link",
        lambda: targz(directory(ROOT), _info(f"{ROOT}/l", tarfile.SYMTYPE, linkname="../../x")),
    ),
    "symlink_inside": (
        "archive_link",
        lambda: targz(
            directory(ROOT), file(f"{ROOT}/a"), _info(f"{ROOT}/l", tarfile.SYMTYPE, linkname="a")
        ),
    ),
    "symlink_then_write_through": (
        "archive_link",
        lambda: targz(
            _info(f"{ROOT}/out", tarfile.SYMTYPE, linkname=".."), file(f"{ROOT}/out/evil")
        ),
    ),
    "hard_link": (
        "archive_link",
        lambda: targz(file(f"{ROOT}/a"), _info(f"{ROOT}/h", tarfile.LNKTYPE, linkname=f"{ROOT}/a")),
    ),
    "char_device": ("archive_special_file", lambda: targz(_info(f"{ROOT}/c", tarfile.CHRTYPE))),
    "block_device": ("archive_special_file", lambda: targz(_info(f"{ROOT}/b", tarfile.BLKTYPE))),
    "fifo": ("archive_special_file", lambda: targz(_info(f"{ROOT}/f", tarfile.FIFOTYPE))),
    # duplicates and layout
    "duplicate_file": ("archive_duplicate", lambda: targz(file(f"{ROOT}/a"), file(f"{ROOT}/a"))),
    "duplicate_dir": ("archive_duplicate", lambda: targz(directory(ROOT), directory(ROOT))),
    "case_fold_alias": (
        "archive_duplicate",
        lambda: targz(file(f"{ROOT}/A.json"), file(f"{ROOT}/a.json")),
    ),
    "case_fold_dir_alias": (
        "archive_duplicate",
        lambda: targz(file(f"{ROOT}/Sub/x"), file(f"{ROOT}/sub/y")),
    ),
    "unicode_fold_alias": (
        "archive_duplicate",
        lambda: targz(file(f"{ROOT}/stra\u00dfe"), file(f"{ROOT}/STRASSE")),
    ),
    "file_then_dir": (
        "archive_duplicate",
        lambda: targz(file(f"{ROOT}/a"), file(f"{ROOT}/a/b")),
    ),
    "dir_then_file": (
        "archive_duplicate",
        lambda: targz(directory(f"{ROOT}/a"), file(f"{ROOT}/a")),
    ),
    "file_then_explicit_dir": (
        "archive_duplicate",
        lambda: targz(file(f"{ROOT}/a"), directory(f"{ROOT}/a")),
    ),
    # root
    "extra_root": ("archive_root_invalid", lambda: targz(file(f"{ROOT}/a"), file("other/b"))),
    "extra_top_file": ("archive_root_invalid", lambda: targz(file(f"{ROOT}/a"), file("README"))),
    "wrong_root": ("archive_root_invalid", lambda: targz(file("other.kiln-hf/a"))),
    "case_alias_root": ("archive_root_invalid", lambda: targz(file("DEMO.kiln-hf/a"))),
    "root_is_file": ("archive_root_invalid", lambda: targz(file(ROOT))),
    "empty_archive": ("archive_root_invalid", lambda: targz()),
    # budgets
    "gzip_bomb": ("archive_bomb", _gzip_bomb),
    "member_too_large": ("archive_bomb", lambda: targz(file(f"{ROOT}/a", bytes(40 * 1024)))),
    "expanded_too_large": (
        "archive_bomb",
        lambda: targz(*(file(f"{ROOT}/{i}", bytes(30 * 1024)) for i in range(3))),
    ),
    "too_many_entries": (
        "archive_bomb",
        lambda: targz(directory(ROOT), *(file(f"{ROOT}/{i}") for i in range(16))),
    ),
    # gzip and tar framing
    "gzip_two_members": ("archive_trailing_data", _two_members),
    "gzip_trailing_garbage": ("archive_trailing_data", lambda: good() + b"garbage"),
    "gzip_trailing_zeros": ("archive_trailing_data", lambda: good() + bytes(8)),
    "tar_tail_too_long": ("archive_trailing_data", _long_tail),
    "tar_data_after_end": (
        "archive_trailing_data",
        lambda: gz(tar_bytes([file(f"{ROOT}/a")]) + tar_bytes([file(f"{ROOT}/b")])),
    ),
    "truncated_gzip": ("archive_invalid", lambda: good()[:-20]),
    "corrupt_gzip_crc": ("archive_invalid", _corrupt_crc),
    "not_gzip": ("archive_invalid", lambda: tar_bytes([file(f"{ROOT}/a")])),
    "zero_bytes": ("archive_invalid", lambda: b""),
    "gzip_of_nothing": ("archive_invalid", lambda: gz(b"")),
    "zlib_not_gzip": ("archive_invalid", lambda: zlib.compress(tar_bytes([file(f"{ROOT}/a")]))),
    "truncated_tar": (
        "archive_invalid",
        lambda: gz(tar_bytes([file(f"{ROOT}/a", b"y" * 900)])[:1024]),
    ),
    "missing_end_marker": ("archive_invalid", lambda: gz(tar_bytes([file(f"{ROOT}/a")])[:1024])),
    "half_end_marker": ("archive_invalid", lambda: gz(tar_bytes([file(f"{ROOT}/a")])[:1536])),
    "bad_checksum": (
        "archive_invalid",
        lambda: gz(patch_header(tar_bytes([file(f"{ROOT}/a")]), 0, b"X", fix_checksum=False)),
    ),
    "bad_size_field": (
        "archive_invalid",
        lambda: gz(patch_header(tar_bytes([file(f"{ROOT}/a")]), 124, b"9999")),
    ),
    "gnu_format": ("archive_invalid", lambda: targz(file(f"{ROOT}/a"), fmt=tarfile.GNU_FORMAT)),
    "gnu_longname": (
        "archive_invalid",
        lambda: targz(file(f"{ROOT}/{'l' * 120}"), fmt=tarfile.GNU_FORMAT),
    ),
    "pax_header": (
        "archive_invalid",
        lambda: targz(_info(f"{ROOT}/a", pax_headers={"comment": "x"}), fmt=tarfile.PAX_FORMAT),
    ),
    "sparse": ("archive_invalid", lambda: targz(_info(f"{ROOT}/s", tarfile.GNUTYPE_SPARSE))),
    "contiguous": ("archive_invalid", lambda: targz(_info(f"{ROOT}/c", tarfile.CONTTYPE))),
    "dir_with_size": (
        "archive_invalid",
        lambda: gz(patch_header(tar_bytes([directory(ROOT)]), 124, b"00000000001\x00")),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_archive_refused(tmp_path: Path, case: str) -> None:
    code, build = CASES[case]
    error = refused(tmp_path, build())
    assert error.code == code, (case, error.code, error.rule)


def test_nothing_escapes_through_a_planted_link(tmp_path: Path) -> None:
    """pip's evil tar: a link to '..' followed by a write through it."""
    data = targz(
        directory(ROOT),
        file(f"{ROOT}/a"),
        _info(f"{ROOT}/up", tarfile.SYMTYPE, linkname="../.."),
        file(f"{ROOT}/up/escaped"),
    )
    refused(tmp_path, data)
    assert not (tmp_path / "escaped").exists()


def test_setuid_member_is_accepted_with_normalized_mode(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(
        targz(
            _info(ROOT, tarfile.DIRTYPE, mode=0o7777),
            _info(f"{ROOT}/run", tarfile.REGTYPE, b"#!", mode=0o6755),
        )
    )
    root = extract_tar_gz(archive, tmp_path, expected_root=ROOT, limits=SMALL)
    assert stat.S_IMODE((root / "run").stat().st_mode) == 0o644
    assert stat.S_IMODE(root.stat().st_mode) == 0o755
    assert stat.S_IMODE(root.parent.stat().st_mode) == 0o700


def test_failure_after_partial_write_removes_everything(tmp_path: Path) -> None:
    # Two good files are written before the duplicate is found.
    data = targz(directory(ROOT), file(f"{ROOT}/a"), file(f"{ROOT}/d/b"), file(f"{ROOT}/a"))
    assert refused(tmp_path, data).code == "archive_duplicate"


_NAME_ALPHABET = st.sampled_from(["a", "A", "b", "é", "/", ".", "..", "\\", "\x1f", " "])


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(names=st.lists(st.lists(_NAME_ALPHABET, min_size=1, max_size=6).map("".join), max_size=6))
def test_random_member_names_round_trip_or_fail_typed(tmp_path: Path, names: list[str]) -> None:
    members = []
    for index, name in enumerate(names):
        info, data = file(f"{ROOT}/{name}", f"{index}".encode())
        members.append((info, data))
    try:
        data = targz(*members)
    except (ValueError, UnicodeError):
        return  # tarfile itself cannot write this name (NUL, too long for USTAR)
    archive = tmp_path / "in.tar.gz"
    archive.write_bytes(data)
    dest = tmp_path / "dest"
    dest.mkdir(exist_ok=True)
    try:
        root = extract_tar_gz(archive, dest, expected_root=ROOT, limits=SMALL)
    except KilnError:
        assert not list(dest.iterdir())
        return
    try:
        for index, name in enumerate(names):
            assert (root / name).read_bytes() == f"{index}".encode()
    finally:
        shutil.rmtree(root.parent)
