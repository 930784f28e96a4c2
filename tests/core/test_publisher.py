"""The unified publisher's API in process: several parents, force, replace, the checks,
and what recovery refuses to trust in a journal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kiln_verify.core.jsonenc import dumps_canonical
from kiln_verify.core.publisher import (
    JOURNAL,
    OUTPUT,
    check_targets,
    publication,
    publish_files,
    recover,
    write_all,
)
from kiln_verify.errors import PublishFailed, TargetExists


def test_files_in_several_parents_appear_together(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    targets = [tmp_path / "a" / "one", tmp_path / "two", tmp_path / "a" / "three"]
    publish_files([(t, t.name.encode()) for t in targets])
    assert [t.read_bytes() for t in targets] == [b"one", b"two", b"three"]
    assert sorted(os.listdir(tmp_path)) == ["a", "two"]
    assert sorted(os.listdir(tmp_path / "a")) == ["one", "three"]


def test_force_replaces_and_leaves_no_original(tmp_path: Path) -> None:
    target = tmp_path / "receipt.json"
    target.write_bytes(b"old")
    with pytest.raises(TargetExists, match="--force"):
        publish_files([(target, b"new")], wording=OUTPUT)
    publish_files([(target, b"new")], force=True, wording=OUTPUT)
    assert target.read_bytes() == b"new"
    assert os.listdir(tmp_path) == ["receipt.json"]


def test_a_failure_in_the_block_takes_every_parent_back(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "keep").write_bytes(b"original")

    def interrupted() -> None:
        with publication([tmp_path / "a" / "x", tmp_path / "keep"], force=True) as staging:
            staging.fill_file(0, 0o644, lambda fd: write_all(fd, b"x"))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert os.listdir(tmp_path / "a") == []
    assert sorted(os.listdir(tmp_path)) == ["a", "keep"]
    assert (tmp_path / "keep").read_bytes() == b"original"


def test_an_entry_not_built_is_refused(tmp_path: Path) -> None:
    with (
        pytest.raises(PublishFailed, match="not built"),
        publication([tmp_path / "x", tmp_path / "y"]) as staging,
    ):
        staging.fill_file(0, 0o644, lambda fd: write_all(fd, b"x"))
    assert os.listdir(tmp_path) == []


def test_replace_is_one_target_only(tmp_path: Path) -> None:
    with pytest.raises(PublishFailed), publication([tmp_path / "x", tmp_path / "y"], replace=True):
        pass


def test_check_targets_with_parents_to_create(tmp_path: Path) -> None:
    check_targets([tmp_path / "new" / "deeper" / "x"], create_parents=True)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(PublishFailed, match="not a directory"):
        check_targets([tmp_path / "file" / "deeper" / "x"], create_parents=True)
    with pytest.raises(PublishFailed, match="parent directory"):
        check_targets([tmp_path / "new" / "x"])


def test_a_journal_never_makes_recovery_remove_what_is_not_its_staging(tmp_path: Path) -> None:
    """A journal names the other staging directories of its publication; recovery only
    removes ones named like a staging directory of the same token."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_bytes(b"keep me")
    token = "0123456789abcdef"
    stage = tmp_path / f".out.staging-{token}"
    stage.mkdir()
    journal = {
        "schema": "kiln-verify.publication.v1",
        "targets": [
            {
                "path": str(tmp_path / "out"),
                "identity": {"dev": 0, "ino": 0, "kind": "file", "size": 1},
                "existed": False,
                "stage": str(victim),
            }
        ],
    }
    (stage / JOURNAL).write_bytes(dumps_canonical(journal))
    assert recover([tmp_path / "out"]) == [stage.name]
    assert (victim / "precious").read_bytes() == b"keep me"
    assert sorted(os.listdir(tmp_path)) == ["victim"]
