"""Leftovers written by the publishers of commit 909997b are recovered exactly as they
recovered them (kiln_verify.core.publisher reads their journals).

The old code itself (tests/core/legacy_publish.py, verbatim copies) publishes in a child
killed with SIGKILL at a file-system step (tests.core.crashkit), twice, into two fresh
directories: the same step leaves the same leftovers. The old recovery runs on one, the
new on the other; both trees must then be the same (names, with the random tokens
masked, and bytes), and both raise or neither. Then the new publisher publishes over
what is left: the old ``.NAME.commit-<token>`` journals with their staged and set-aside
files, the old ``.KEY.staging-<token>`` directories with ``COMMIT`` and entries already
published, and plain ``.NAME.incomplete-*`` staging residue.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kiln_verify.core import publisher
from kiln_verify.core.publish import publish_bytes, publish_directory
from kiln_verify.errors import KilnError, TargetExists
from kiln_verify.openenv.collect import publish_together
from tests.core.crashkit import calibrate, run_child
from tests.core.legacy_publish import PRELUDE, ROOT, load

RELATIVE = ("one/d.jsonl", "two/r.json", "s.json")
NEW = {name: f"new {name}\n".encode() * 50 for name in RELATIVE}
OLD = {name: f"old {name}\n".encode() * 30 for name in RELATIVE}
FILES = {f"d{i % 2}/f{i}.bin": bytes([i]) * 1024 for i in range(3)}
ARCHIVE = b"archive bytes " * 100

TOGETHER_CHILD = (
    PRELUDE
    + r"""
real_init = legacy_journal.Journal.__init__
def init(*args):
    mark()
    real_init(*args)
legacy_journal.Journal.__init__ = init
base, force = sys.argv[2], sys.argv[3] == "force"
names = ("one/d.jsonl", "two/r.json", "s.json")
together.publish_together(
    [(f"{base}/{n}", f"new {n}\n".encode() * 50) for n in names], force=force
)
"""
)

GROUP_CHILD = (
    PRELUDE
    + r"""
from pathlib import Path
from kiln_verify.core.publish import publish_bytes, publish_directory
real_journal = group._write_journal
def journal(*args):
    mark()
    return real_journal(*args)
group._write_journal = journal
FILES = {f"d{i % 2}/f{i}.bin": bytes([i]) * 1024 for i in range(3)}
with group.staged_group(Path(sys.argv[2]), ("out.tar", "out"), key="out") as stage:
    publish_directory(stage.entry("out"), FILES)
    publish_bytes(stage.entry("out.tar"), b"archive bytes " * 100)
"""
)

_TOKEN = re.compile(r"[0-9a-f]{16}")


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every entry below ``root`` (tokens masked): a file's bytes, None for a directory
    (a journal's bytes name its own directory and inodes, so only that it is there)."""
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        name = _TOKEN.sub("<token>", path.relative_to(root).as_posix())
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        journal = ".commit-" in path.name or path.name == publisher.JOURNAL
        found[name] = b"<journal>" if journal and data is not None else data
    return found


def _setup(base: Path, originals: bool) -> None:
    (base / "one").mkdir(parents=True)
    (base / "two").mkdir()
    if originals:
        for name in RELATIVE:
            (base / name).write_bytes(OLD[name])


def _outcome(call: object) -> str | None:
    assert callable(call)
    try:
        call()
    except KilnError as exc:
        return exc.code
    return None


def _together_case(tmp_path: Path, kill_at: int, originals: bool) -> None:
    mode = "force" if originals else "fresh"
    old_side, new_side = tmp_path / f"old{kill_at}", tmp_path / f"new{kill_at}"
    for base in (old_side, new_side):
        _setup(base, originals)
        run_child(TOGETHER_CHILD, str(ROOT), str(base), mode, kill_at=kill_at)
    assert snapshot(old_side) == snapshot(new_side)
    _, legacy_journal, _ = load()
    old_paths = [str(old_side / name) for name in RELATIVE]
    new_paths = [str(new_side / name) for name in RELATIVE]
    old = _outcome(lambda: legacy_journal.recover(old_paths))
    new = _outcome(lambda: publisher.recover(new_paths))
    assert (old, kill_at) == (new, kill_at)
    assert snapshot(old_side) == snapshot(new_side), kill_at
    assert not [n for n in snapshot(new_side) if ".commit-" in n]  # the journal is undone
    files = [(new_side / name, NEW[name]) for name in RELATIVE]
    if originals:
        publish_together(files, force=True)
    elif all((new_side / name).exists() for name in RELATIVE):
        with pytest.raises(TargetExists):
            publish_together(files)  # a complete bundle (killed after its commit point)
    else:
        publish_together(files)
    assert {name: (new_side / name).read_bytes() for name in RELATIVE} == NEW
    rest = [n for n in snapshot(new_side) if n not in RELATIVE and n not in ("one", "two")]
    assert all(".incomplete-" in n or ".replaced-" in n for n in rest), rest


def _group_case(tmp_path: Path, kill_at: int) -> None:
    old_side, new_side = tmp_path / f"old{kill_at}", tmp_path / f"new{kill_at}"
    for parent in (old_side, new_side):
        parent.mkdir()
        run_child(GROUP_CHILD, str(ROOT), str(parent), kill_at=kill_at)
    assert snapshot(old_side) == snapshot(new_side)
    _, _, group = load()
    old = _outcome(lambda: group.recover_group(old_side, "out"))
    new = _outcome(lambda: publisher.recover_group(new_side, "out"))
    assert (old, kill_at) == (new, kill_at)
    assert snapshot(old_side) == snapshot(new_side), kill_at
    names = set(os.listdir(new_side))
    if {"out", "out.tar"} <= names:  # killed after the commit point: never taken back
        return
    assert not names & {"out", "out.tar"}, names
    with publisher.staged_group(new_side, ("out.tar", "out"), key="out") as stage:
        publish_directory(stage.entry("out"), FILES)
        publish_bytes(stage.entry("out.tar"), ARCHIVE)
    assert (new_side / "out.tar").read_bytes() == ARCHIVE
    rest = set(os.listdir(new_side)) - {"out", "out.tar"}
    assert all(n.startswith(".out.creating-") for n in rest), rest


@pytest.mark.parametrize("originals", [False, True], ids=["fresh", "force"])
def test_an_interrupted_bundle_commit(tmp_path: Path, originals: bool) -> None:
    """Killed after the journal and the first rename (two with --force): a mixture."""
    mode = "force" if originals else "fresh"
    calibration = tmp_path / "calibrate"
    _setup(calibration, originals)
    (journal_step,) = calibrate(TOGETHER_CHILD, str(ROOT), str(calibration), mode)[1]
    kill_at = journal_step + (6 if originals else 5)
    probe = tmp_path / "probe"
    _setup(probe, originals)
    run_child(TOGETHER_CHILD, str(ROOT), str(probe), mode, kill_at=kill_at)
    assert [n for n in snapshot(probe) if ".commit-" in n], "not an interrupted commit"
    _together_case(tmp_path, kill_at, originals)


def test_an_interrupted_group_commit(tmp_path: Path) -> None:
    """Killed after the journal and the archive's rename: one entry of two published."""
    (journal_step,) = calibrate(GROUP_CHILD, str(ROOT), str(tmp_path))[1]
    _group_case(tmp_path, journal_step + 5)


@pytest.mark.slow
@pytest.mark.parametrize("originals", [False, True], ids=["fresh", "force"])
def test_bundle_leftovers_of_every_step(tmp_path: Path, originals: bool) -> None:
    calibration = tmp_path / "calibrate"
    _setup(calibration, originals)
    mode = "force" if originals else "fresh"
    total, _ = calibrate(TOGETHER_CHILD, str(ROOT), str(calibration), mode)
    for kill_at in range(1, total + 1):
        _together_case(tmp_path, kill_at, originals)


@pytest.mark.slow
def test_group_leftovers_of_every_step(tmp_path: Path) -> None:
    calibration = tmp_path / "calibrate"
    calibration.mkdir()
    total, _ = calibrate(GROUP_CHILD, str(ROOT), str(calibration))
    for kill_at in range(1, total + 1):
        _group_case(tmp_path, kill_at)
