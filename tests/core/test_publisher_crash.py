"""The unified publisher killed with SIGKILL at every file-system step (tests.core.crashkit).

Two target sets, each published by :func:`kiln_verify.core.publisher.publication`:

- across directories: a file in ``a/``, a directory of files in ``b/`` and a file in the
  base directory, fresh or with ``force`` over original files;
- siblings: a file ``out.tar`` and a directory ``out/`` of one parent.

After every kill each target holds its original, the new entry, or nothing where there
was nothing; never a partial directory. A mixture (or an original only set aside) always
comes with the journal. Then the same publication run again in this process succeeds
(or, over a complete set without ``force``, is ``target_exists``) and leaves nothing but
the residue the contract documents as safe to delete.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kiln_verify.core.publish import publish_directory
from kiln_verify.core.publisher import JOURNAL, publication, recover, write_all
from kiln_verify.errors import PublishFailed, TargetExists
from tests.core.crashkit import calibrate, run_child

TREE = {f"d{i % 2}/f{i}.bin": bytes([i]) * 2048 for i in range(4)}
SPREAD = ("a/data.bin", "b/tree", "c.json")
NEW = {"a/data.bin": b"new data " * 300, "c.json": b'{"new": true}\n' * 40}
OLD = {"a/data.bin": b"old data " * 100, "c.json": b'{"old": true}\n'}
ARCHIVE = b"archive " * 500

CHILD = r"""
import sys
from kiln_verify.core.publish import publish_directory
from kiln_verify.core.publisher import publication, write_all
TREE = {f"d{i % 2}/f{i}.bin": bytes([i]) * 2048 for i in range(4)}
base, kind = sys.argv[1], sys.argv[2]
if kind == "siblings":
    with publication([f"{base}/out.tar", f"{base}/out"]) as staging:
        staging.fill_file(0, 0o644, lambda fd: write_all(fd, b"archive " * 500))
        publish_directory(staging.entry(1), TREE)
else:
    paths = [f"{base}/a/data.bin", f"{base}/b/tree", f"{base}/c.json"]
    with publication(paths, force=kind == "force") as staging:
        staging.fill_file(0, 0o644, lambda fd: write_all(fd, b"new data " * 300))
        publish_directory(staging.entry(1), TREE)
        staging.fill_file(2, 0o644, lambda fd: write_all(fd, b'{"new": true}\n' * 40))
"""


def _tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def _journals(base: Path) -> list[Path]:
    return [p for p in base.rglob(JOURNAL) if ".staging-" in p.parent.name]


def _setup(base: Path, kind: str) -> None:
    base.mkdir()
    if kind == "siblings":
        return
    (base / "a").mkdir()
    (base / "b").mkdir()
    if kind == "force":
        for name, data in OLD.items():
            (base / name).write_bytes(data)


def state(base: Path, kind: str) -> str:
    """'old' (nothing new; the originals, if any), 'new', or 'interrupted'."""
    names = ("out.tar", "out") if kind == "siblings" else SPREAD
    seen = []
    for name in names:
        path = base / name
        if path.is_dir():
            assert _tree(path) == TREE, name  # never partial
            seen.append("new")
        elif path.exists():
            data = path.read_bytes()
            new = ARCHIVE if name == "out.tar" else NEW[name]
            assert data in (new, OLD.get(name) if kind == "force" else None), name
            seen.append("new" if data == new else "old")
        elif kind == "force" and name in OLD:  # set aside, not yet replaced
            aside = list(path.parent.glob(f".{path.name}.replaced-*"))
            assert [p.read_bytes() for p in aside] == [OLD[name]], name
            seen.append("aside")
        else:
            seen.append("old")
    if _journals(base):
        return "interrupted"
    assert "aside" not in seen, seen
    assert len(set(seen)) == 1, seen  # a mixture needs its journal
    return seen[0]


def rerun(base: Path, kind: str) -> None:
    if kind == "siblings":
        paths = [base / "out.tar", base / "out"]
        with publication(paths) as staging:
            staging.fill_file(0, 0o644, lambda fd: write_all(fd, ARCHIVE))
            publish_directory(staging.entry(1), TREE)
        return
    with publication([base / name for name in SPREAD], force=kind == "force") as staging:
        staging.fill_file(0, 0o644, lambda fd: write_all(fd, NEW["a/data.bin"]))
        publish_directory(staging.entry(1), TREE)
        staging.fill_file(2, 0o644, lambda fd: write_all(fd, NEW["c.json"]))


def _residue(base: Path, kind: str) -> list[str]:
    names = {"out.tar", "out"} if kind == "siblings" else {*SPREAD, "a", "b"}
    found = [p.relative_to(base).as_posix() for p in base.rglob("*")]
    return [
        n
        for n in found
        if n not in names
        and not n.startswith(("out/", "b/tree/"))
        and not (".creating-" in n and not any((base / n).iterdir()))
        and ".replaced-" not in n
    ]


def _kill_and_rerun(base: Path, kind: str, kill_at: int, seen: dict[str, int]) -> None:
    _setup(base, kind)
    run_child(CHILD, str(base), kind, kill_at=kill_at)
    found = state(base, kind)
    seen[found] = seen.get(found, 0) + 1
    if found == "new":  # complete: never replaced (force replaces files, not b/tree)
        with pytest.raises(TargetExists if kind != "force" else PublishFailed):
            rerun(base, kind)
    else:
        rerun(base, kind)
    assert state(base, kind) == "new"
    assert not _journals(base)
    assert _residue(base, kind) == [], kill_at


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["spread", "force", "siblings"])
def test_kill_at_every_step_then_rerun(tmp_path: Path, kind: str) -> None:
    calibration = tmp_path / "calibrate"
    _setup(calibration, kind)
    total, _ = calibrate(CHILD, str(calibration), kind)
    assert state(calibration, kind) == "new"
    seen: dict[str, int] = {}
    for kill_at in range(1, total + 1):
        _kill_and_rerun(tmp_path / f"k{kill_at}", kind, kill_at, seen)
    print(f"\n{kind}: {total} steps; after the kills: {seen}")
    assert seen.get("interrupted", 0) >= 3


@pytest.mark.parametrize("kind", ["spread", "force", "siblings"])
def test_kill_late_in_the_commit(tmp_path: Path, kind: str) -> None:
    """Killed a few steps before the end: renames done or under way, then recovered."""
    calibration = tmp_path / "calibrate"
    _setup(calibration, kind)
    total, _ = calibrate(CHILD, str(calibration), kind)
    seen: dict[str, int] = {}
    for back in (4, 6, 8, 10):
        _kill_and_rerun(tmp_path / f"k{back}", kind, total - back, seen)
    assert "interrupted" in seen, seen


def test_a_live_publication_is_never_recovered(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    targets = [tmp_path / "one", tmp_path / "x" / "two"]
    with publication(targets) as staging:
        staging.fill_file(0, 0o644, lambda fd: write_all(fd, b"1"))
        staging.fill_file(1, 0o644, lambda fd: write_all(fd, b"2"))
        assert recover(targets) == []  # both staging directories are locked by us
        assert os.path.isdir(os.path.dirname(staging.entry(1)))
    assert (tmp_path / "one").read_bytes() == b"1"
    assert sorted(os.listdir(tmp_path / "x")) == ["two"]
