"""The deterministic archive writer and the extraction round trip."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
import time
from pathlib import Path

import pytest

from kiln_verify.core.safe_tar import (
    EXTRACT_PREFIX,
    ArchiveLimits,
    _GzipReader,
    extract_tar_gz,
    extracted_tar_gz,
    remove_extracted,
    write_tar_gz,
)
from kiln_verify.errors import KilnError

ROOT = "demo.kiln-hf"
FILES = {
    "kiln_hf_export.json": b'{"schema":"x"}\n',
    "train.jsonl": b"".join(b'{"row":%d}\n' % i for i in range(2000)),
    "train.py": b"print('hi')\n" * 300,
    "input_adapter/adapter_config.json": b"{}",
    "input_adapter/adapter_model.safetensors": os.urandom(70_000),
    "a-b/c": b"",
    "empty/.keep": b"",
}


def make_tree(top: Path, files: dict[str, bytes] = FILES) -> Path:
    for relative, data in files.items():
        path = top / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return top


def read_tree(top: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(top)): path.read_bytes()
        for path in sorted(top.rglob("*"))
        if path.is_file()
    }


def test_round_trip_gives_identical_files(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src")
    archive = tmp_path / "demo.kiln-hf.tar.gz"
    write_tar_gz(src, archive, root_name=ROOT)
    with extracted_tar_gz(archive, tmp_path, expected_root=ROOT) as root:
        assert root.name == ROOT
        assert root.parent.name.startswith(EXTRACT_PREFIX)
        assert read_tree(root) == FILES
        for path in [root, *root.rglob("*")]:
            want = 0o755 if path.is_dir() else 0o644
            assert stat.S_IMODE(path.lstat().st_mode) == want, path
        private = root.parent
    assert not private.exists()


def test_writer_is_deterministic(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src")
    write_tar_gz(src, tmp_path / "one.tar.gz", root_name=ROOT)
    # Different mtimes, modes and creation order must not matter.
    os.chmod(src / "train.py", 0o700)
    os.utime(src / "train.jsonl", (time.time() + 1000, time.time() + 1000))
    other = make_tree(tmp_path / "other", dict(reversed(list(FILES.items()))))
    write_tar_gz(src, tmp_path / "two.tar.gz", root_name=ROOT)
    write_tar_gz(other, tmp_path / "three.tar.gz", root_name=ROOT)
    stream = io.BytesIO()
    write_tar_gz(src, stream, root_name=ROOT)
    one = (tmp_path / "one.tar.gz").read_bytes()
    assert one == (tmp_path / "two.tar.gz").read_bytes()
    assert one == (tmp_path / "three.tar.gz").read_bytes()
    assert one == stream.getvalue()


def test_archive_layout(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src")
    stream = io.BytesIO()
    write_tar_gz(src, stream, root_name=ROOT)
    data = stream.getvalue()
    # gzip header: deflate, no flags (so no file name), mtime 0.
    assert data[:3] == b"\x1f\x8b\x08"
    assert data[3] == 0
    assert data[4:8] == bytes(4)
    raw = gzip.decompress(data)
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as archive:
        members = archive.getmembers()
    names = [m.name + ("/" if m.isdir() else "") for m in members]
    assert names == sorted(names, key=lambda n: n.encode())
    assert names[0] == f"{ROOT}/"
    assert f"{ROOT}/input_adapter/" in names
    assert f"{ROOT}/empty/" in names
    for m in members:
        assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", 0)
        assert m.mode == (0o755 if m.isdir() else 0o644)
        assert m.isdir() or m.isreg()
        assert not m.pax_headers
    for offset in range(0, len(raw), 512):  # every header is POSIX USTAR, none pax/GNU
        block = raw[offset : offset + 512]
        if block[257:263] == b"ustar\x00":
            assert block[156:157] in (b"0", b"5")


def test_publication_is_no_clobber(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src")
    target = tmp_path / "out.tar.gz"
    target.write_bytes(b"keep")
    with pytest.raises(KilnError) as caught:
        write_tar_gz(src, target, root_name=ROOT)
    assert caught.value.code == "target_exists"
    assert target.read_bytes() == b"keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.tar.gz", "src"]


def test_writer_refuses_links_and_special_files(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"a": b"x"})
    (src / "link").symlink_to("a")
    with pytest.raises(KilnError) as caught:
        write_tar_gz(src, tmp_path / "o.tar.gz", root_name=ROOT)
    assert caught.value.code == "path_symlink"
    (src / "link").unlink()
    os.mkfifo(src / "fifo")
    with pytest.raises(KilnError) as caught:
        write_tar_gz(src, tmp_path / "o.tar.gz", root_name=ROOT)
    assert caught.value.code == "path_not_regular"
    assert not (tmp_path / "o.tar.gz").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["src"]


@pytest.mark.parametrize(
    ("limits", "what"),
    [
        (ArchiveLimits(max_entries=3), "MAX_ARCHIVE_ENTRIES"),
        (ArchiveLimits(max_member_bytes=7), "MAX_ARCHIVE_MEMBER_BYTES"),
        (ArchiveLimits(max_expanded_bytes=15), "MAX_ARCHIVE_EXPANDED_BYTES"),
    ],
)
def test_writer_respects_the_reader_budgets(
    tmp_path: Path, limits: ArchiveLimits, what: str
) -> None:
    src = make_tree(tmp_path / "src", {"a": b"x" * 8, "b": b"y" * 8, "c/d": b""})
    with pytest.raises(KilnError) as caught:
        write_tar_gz(src, io.BytesIO(), root_name=ROOT, limits=limits)
    assert caught.value.code == "limit_exceeded"
    assert what in caught.value.rule


def test_writer_refuses_names_the_reader_refuses(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"n" * 200: b"", "back\\slash": b""})
    with pytest.raises(KilnError) as caught:
        write_tar_gz(src, io.BytesIO(), root_name=ROOT)
    assert caught.value.code == "path_invalid"  # the backslash
    src = make_tree(tmp_path / "src2", {"d" * 100 + "/" + "n" * 150: b""})
    with pytest.raises(KilnError) as caught:
        write_tar_gz(src, io.BytesIO(), root_name=ROOT)
    assert caught.value.code == "archive_path_unsafe"


@pytest.mark.parametrize("name", ["", "a/b", "..", "/abs", "x\\y"])
def test_root_name_must_be_one_component(tmp_path: Path, name: str) -> None:
    with pytest.raises(KilnError) as caught:
        write_tar_gz(tmp_path, io.BytesIO(), root_name=name)
    assert caught.value.code == "usage"
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(b"")
    with pytest.raises(KilnError) as caught:
        extract_tar_gz(archive, tmp_path, expected_root=name)
    assert caught.value.code == "usage"


def test_extract_accepts_kiln_style_archive_without_directory_entries(tmp_path: Path) -> None:
    """Kiln's import writer emits only regular 0600 members, no directory entries."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for name, data in sorted({"b.json": b"{}", "sub/deep/c": b"c", "a": b"a"}.items()):
            info = tarfile.TarInfo(f"{ROOT}/{name}")
            info.size, info.mode = len(data), 0o600
            archive.addfile(info, io.BytesIO(data))
    path = tmp_path / "k.tar.gz"
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    with extracted_tar_gz(path, tmp_path, expected_root=ROOT) as root:
        assert read_tree(root) == {"a": b"a", "b.json": b"{}", "sub/deep/c": b"c"}
        assert stat.S_IMODE((root / "a").stat().st_mode) == 0o644
        assert stat.S_IMODE((root / "sub").stat().st_mode) == 0o755


def test_explicit_directory_after_implied_one_is_fine(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        info = tarfile.TarInfo(f"{ROOT}/d/f")
        archive.addfile(info, io.BytesIO())
        for name in (f"{ROOT}/d", ROOT):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            archive.addfile(info)
    path = tmp_path / "k.tar.gz"
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    with extracted_tar_gz(path, tmp_path, expected_root=ROOT) as root:
        assert read_tree(root) == {"d/f": b""}


def test_archive_path_must_not_be_a_symlink(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"a": b"x"})
    write_tar_gz(src, tmp_path / "a.tar.gz", root_name=ROOT)
    (tmp_path / "l.tar.gz").symlink_to("a.tar.gz")
    with pytest.raises(KilnError) as caught:
        extract_tar_gz(tmp_path / "l.tar.gz", tmp_path, expected_root=ROOT)
    assert caught.value.code == "path_symlink"


def test_compressed_size_cap(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"a": os.urandom(4096)})
    write_tar_gz(src, tmp_path / "a.tar.gz", root_name=ROOT)
    with pytest.raises(KilnError) as caught:
        extract_tar_gz(
            tmp_path / "a.tar.gz",
            tmp_path,
            expected_root=ROOT,
            limits=ArchiveLimits(max_compressed_bytes=1000),
        )
    assert caught.value.code == "archive_bomb"
    assert "MAX_ARCHIVE_COMPRESSED_BYTES" in caught.value.rule
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(EXTRACT_PREFIX)]


def test_decompressed_stream_budget_is_enforced_while_reading(tmp_path: Path) -> None:
    """Defence in depth: the reader itself stops at the derived stream budget."""
    path = tmp_path / "z.gz"
    path.write_bytes(gzip.compress(bytes(1 << 20), mtime=0))
    limits = ArchiveLimits(max_entries=1, max_expanded_bytes=1, max_tail_bytes=1)
    fd = os.open(path, os.O_RDONLY)
    reader = _GzipReader(fd, limits)

    def drain() -> None:
        while reader.read(4096):
            pass

    try:
        with pytest.raises(KilnError) as caught:
            drain()
    finally:
        os.close(fd)
    assert caught.value.code == "archive_bomb"


def test_remove_extracted_refuses_foreign_paths(tmp_path: Path) -> None:
    (tmp_path / "x" / "y").mkdir(parents=True)
    with pytest.raises(KilnError) as caught:
        remove_extracted(tmp_path / "x" / "y")
    assert caught.value.code == "usage"
    assert (tmp_path / "x" / "y").exists()


def test_extract_then_remove(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"a": b"x"})
    write_tar_gz(src, tmp_path / "a.tar.gz", root_name=ROOT)
    dest = tmp_path / "dest"
    dest.mkdir()
    root = extract_tar_gz(tmp_path / "a.tar.gz", dest, expected_root=ROOT)
    assert (root / "a").read_bytes() == b"x"
    remove_extracted(root)
    assert list(dest.iterdir()) == []
