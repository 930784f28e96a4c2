"""``extract_tar_gz(rules=...)``: a dry pass first, every member checked at its header, and
the manifest read in the dry pass must be the one written (kiln_verify.core.safe_tar)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kiln_verify.core import safe_tar
from kiln_verify.core.safe_tar import extract_tar_gz
from kiln_verify.errors import HfBundleExtraFile, KilnError, SizeMismatch
from tests.hostile.test_archive_hostile import ROOT, directory, file, targz


class Rules:
    """Files declared by ``manifest.json`` (``{"name": size, ...}`` as text)."""

    def __init__(self, on_capture: object = None) -> None:
        self.declared: dict[str, int] | None = None
        self.checked: list[tuple[str, bool, int]] = []
        self._on_capture = on_capture

    def check(self, relative: str, is_dir: bool, size: int) -> None:
        self.checked.append((relative, is_dir, size))
        if not relative or is_dir or relative == "manifest.json":
            return
        if self.declared is not None and relative not in self.declared:
            raise HfBundleExtraFile(f"{relative} is undeclared")
        if self.declared is not None and self.declared[relative] != size:
            raise SizeMismatch(f"{relative} has another size")

    def wants(self, relative: str) -> bool:
        return relative == "manifest.json"

    def capture(self, relative: str, data: bytes) -> None:
        self.declared = {
            name: int(size) for name, size in (p.split("=") for p in data.decode().split())
        }
        if callable(self._on_capture):
            self._on_capture()

    def ready(self) -> bool:
        return self.declared is not None

    def missing(self) -> None:
        raise HfBundleExtraFile("no manifest")


def _archive(tmp_path: Path, *members: tuple[object, bytes | None]) -> Path:
    path = tmp_path / "a.tar.gz"
    path.write_bytes(targz(directory(ROOT), *members))  # type: ignore[arg-type]
    return path


def _count(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    written = [0]
    real = safe_tar._write_all

    def counting(fd: int, data: bytes) -> None:
        written[0] += len(data)
        real(fd, data)

    monkeypatch.setattr(safe_tar, "_write_all", counting)
    return written


def test_declared_archive_extracts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = _count(monkeypatch)
    archive = _archive(
        tmp_path, file(f"{ROOT}/a.bin", b"aa"), file(f"{ROOT}/manifest.json", b"a.bin=2")
    )
    (tmp_path / "d").mkdir()
    rules = Rules()
    root = extract_tar_gz(archive, tmp_path / "d", expected_root=ROOT, rules=rules)
    assert (root / "a.bin").read_bytes() == b"aa"
    assert written[0] == 2 + 7
    # the dry pass stopped at the manifest; the writing pass checked every member again
    assert rules.checked == [
        ("", True, 0),
        ("a.bin", False, 2),
        ("manifest.json", False, 7),
        ("", True, 0),
        ("a.bin", False, 2),
        ("manifest.json", False, 7),
    ]


@pytest.mark.parametrize(
    ("members", "code"),
    [
        (
            [(f"{ROOT}/x.bin", b"x" * 5000), (f"{ROOT}/manifest.json", b"a.bin=2")],
            "hf_bundle_extra_file",
        ),
        ([(f"{ROOT}/a.bin", b"a" * 5000), (f"{ROOT}/manifest.json", b"a.bin=2")], "size_mismatch"),
        ([(f"{ROOT}/manifest.json", b"a.bin=2"), (f"{ROOT}/a.bin", b"a" * 5000)], "size_mismatch"),
        ([(f"{ROOT}/a.bin", b"aa")], "hf_bundle_extra_file"),
    ],
)
def test_refusals_write_nothing_of_the_member(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    members: list[tuple[str, bytes]],
    code: str,
) -> None:
    written = _count(monkeypatch)
    archive = _archive(tmp_path, *(file(name, data) for name, data in members))
    (tmp_path / "d").mkdir()
    with pytest.raises(KilnError) as caught:
        extract_tar_gz(archive, tmp_path / "d", expected_root=ROOT, rules=Rules())
    assert caught.value.code == code
    # only what precedes the refused member, in the writing pass (the manifest first)
    assert written[0] == (7 if members[0][0].endswith("manifest.json") else 0)
    assert os.listdir(tmp_path / "d") == []


def test_a_manifest_changed_between_the_two_reads_is_refused(tmp_path: Path) -> None:
    """The archive is rewritten in place (same size) after the dry pass has read the
    manifest: the writing pass reads other manifest bytes and stops."""
    archive = _archive(
        tmp_path, file(f"{ROOT}/manifest.json", b"a.bin=2"), file(f"{ROOT}/a.bin", b"aa")
    )
    swapped = targz(
        directory(ROOT), file(f"{ROOT}/manifest.json", b"a.bin=3"), file(f"{ROOT}/a.bin", b"aa")
    )

    def swap() -> None:
        with open(archive, "r+b") as stream:
            stream.write(swapped)
            stream.truncate()

    (tmp_path / "d").mkdir()
    with pytest.raises(KilnError) as caught:
        extract_tar_gz(archive, tmp_path / "d", expected_root=ROOT, rules=Rules(swap))
    assert caught.value.code == "archive_invalid"
    assert "two reads" in caught.value.rule
    assert os.listdir(tmp_path / "d") == []
