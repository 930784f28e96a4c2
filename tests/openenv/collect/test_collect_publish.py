"""The three files are published together or not at all; --force replaces carefully."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kiln_verify.core import rename
from kiln_verify.errors import PublishFailed, SymlinkRefused, TargetExists
from kiln_verify.openenv.collect import publish_together


def _targets(tmp_path: Path) -> list[Path]:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    return [tmp_path / "one" / "d.jsonl", tmp_path / "two" / "r.json", tmp_path / "s.json"]


def _all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _fail_on_call(monkeypatch: pytest.MonkeyPatch, failing: int) -> None:
    real = rename.noreplace
    calls = {"n": 0}

    def flaky(dir_fd: int, source: str, target: str, *, allow_link: bool) -> None:
        calls["n"] += 1
        if calls["n"] == failing:
            raise OSError(5, "injected failure")
        real(dir_fd, source, target, allow_link=allow_link)

    monkeypatch.setattr(rename, "noreplace", flaky)


def test_all_three_appear(tmp_path: Path) -> None:
    targets = _targets(tmp_path)
    publish_together([(t, t.name.encode()) for t in targets])
    assert [t.read_bytes() for t in targets] == [b"d.jsonl", b"r.json", b"s.json"]
    assert _all_files(tmp_path) == ["one/d.jsonl", "s.json", "two/r.json"]


@pytest.mark.parametrize("failing", [1, 2, 3])
def test_failure_mid_publication_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    targets = _targets(tmp_path)
    _fail_on_call(monkeypatch, failing)
    with pytest.raises(PublishFailed):
        publish_together([(t, b"new") for t in targets])
    assert _all_files(tmp_path) == []


def test_existing_target_is_untouched_without_force(tmp_path: Path) -> None:
    targets = _targets(tmp_path)
    targets[1].write_bytes(b"precious")
    before = os.stat(targets[1])
    with pytest.raises(TargetExists, match="--force"):
        publish_together([(t, b"new") for t in targets])
    assert targets[1].read_bytes() == b"precious"
    assert os.stat(targets[1]).st_mtime_ns == before.st_mtime_ns
    assert _all_files(tmp_path) == ["two/r.json"]


def test_force_replaces_existing_targets(tmp_path: Path) -> None:
    targets = _targets(tmp_path)
    targets[0].write_bytes(b"old")
    publish_together([(t, b"new") for t in targets], force=True)
    assert [t.read_bytes() for t in targets] == [b"new"] * 3
    assert _all_files(tmp_path) == ["one/d.jsonl", "s.json", "two/r.json"]


@pytest.mark.parametrize("failing", [2, 3, 4, 5])
def test_force_failure_restores_the_originals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    targets = _targets(tmp_path)
    for target in targets[:2]:
        target.write_bytes(b"old " + target.name.encode())
    _fail_on_call(monkeypatch, failing)
    with pytest.raises(PublishFailed):
        publish_together([(t, b"new") for t in targets], force=True)
    assert targets[0].read_bytes() == b"old d.jsonl"
    assert targets[1].read_bytes() == b"old r.json"
    assert _all_files(tmp_path) == ["one/d.jsonl", "two/r.json"]


def test_symlink_target_is_refused_even_with_force(tmp_path: Path) -> None:
    targets = _targets(tmp_path)
    (tmp_path / "elsewhere").write_bytes(b"x")
    targets[2].symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SymlinkRefused):
        publish_together([(t, b"new") for t in targets], force=True)
    assert (tmp_path / "elsewhere").read_bytes() == b"x"


def test_missing_parent_fails_before_anything_is_written(tmp_path: Path) -> None:
    targets = _targets(tmp_path)
    targets[2] = tmp_path / "absent" / "s.json"
    with pytest.raises(PublishFailed, match="parent directory"):
        publish_together([(t, b"new") for t in targets])
    assert _all_files(tmp_path) == []
