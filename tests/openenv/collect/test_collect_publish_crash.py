"""The three-file rollout commit killed with SIGKILL at every step (issue 14, part 3).

The child publishes three files in three directories with ``publish_together`` (fresh, or
with ``--force`` over complete originals), killed at each file-system step in turn
(tests.core.crashkit). After every kill each target holds its original bytes, or the new
bytes, or nothing where there was nothing: never a partial file. A mixture of old and new
(the window between two renames) always comes with the commit journal. Then:

- a re-run (with ``--force`` when there were originals) succeeds and publishes the new
  bundle, leaving no journal and no set-aside original;
- with originals, a re-run *without* ``--force`` undoes an interrupted commit first, so the
  user's complete original bundle is back byte for byte, and is then ``target_exists``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kiln_verify.core.publisher import JOURNAL
from kiln_verify.errors import TargetExists
from kiln_verify.openenv.collect import publish_together
from tests.core.crashkit import calibrate, run_child

RELATIVE = ("one/d.jsonl", "two/r.json", "s.json")
NEW = {name: f"new {name}\n".encode() * 50 for name in RELATIVE}
OLD = {name: f"old {name}\n".encode() * 30 for name in RELATIVE}

CHILD = r"""
import sys
from kiln_verify.openenv.collect import publish_together
base, force = sys.argv[1], sys.argv[2] == "force"
names = ("one/d.jsonl", "two/r.json", "s.json")
publish_together(
    [(f"{base}/{n}", f"new {n}\n".encode() * 50) for n in names], force=force
)
"""


def _setup(base: Path, originals: bool) -> None:
    (base / "one").mkdir(parents=True)
    (base / "two").mkdir()
    if originals:
        for name in RELATIVE:
            (base / name).write_bytes(OLD[name])


def _entries(base: Path) -> list[str]:
    return sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())


def state(base: Path, originals: bool) -> str:
    """'old', 'new' or 'interrupted'; a partial or foreign file fails."""
    contents = []
    for name in RELATIVE:
        path = base / name
        data = path.read_bytes() if path.exists() else None
        if data is None and originals:  # between setting the original aside and the rename
            aside = list(path.parent.glob(f".{path.name}.replaced-*"))
            assert [p.read_bytes() for p in aside] == [OLD[name]], name
            contents.append("aside")
            continue
        assert data in ((OLD[name] if originals else None), NEW[name]), name
        contents.append("new" if data == NEW[name] else "old")
    # the journal: COMMIT in the first target's staging directory (the unified publisher;
    # before it, the file .NAME.commit-* beside the first target)
    journals = [e for e in _entries(base) if ".staging-" in e and e.endswith("/" + JOURNAL)]
    if journals:
        return "interrupted"
    assert "aside" not in contents, contents
    assert len(set(contents)) == 1, contents  # a mixture needs its journal
    return contents[0]


def _only_targets(base: Path) -> None:
    """After a successful re-run: the targets, and at most the residue the contract
    documents as safe to delete: staging of a kill before the journal
    (``.NAME.incomplete-*``) or originals replaced by a commit that had passed its commit
    point (``.NAME.replaced-*``, killed before deleting them). Never a journal."""
    extra = [e for e in _entries(base) if e not in RELATIVE]
    assert all(".incomplete-" in e or ".replaced-" in e for e in extra), extra


@pytest.mark.slow
@pytest.mark.parametrize("originals", [False, True], ids=["fresh", "force"])
def test_kill_at_every_step_then_rerun(tmp_path: Path, originals: bool) -> None:
    mode = "force" if originals else "fresh"
    calibration = tmp_path / "calibrate"
    _setup(calibration, originals)
    total, _ = calibrate(CHILD, str(calibration), mode)
    assert state(calibration, originals) == "new"
    seen: dict[str, int] = {}
    for kill_at in range(1, total + 1):
        for rerun_force in (True, False) if originals else (False,):
            base = tmp_path / f"k{kill_at}-{rerun_force}"
            _setup(base, originals)
            run_child(CHILD, str(base), mode, kill_at=kill_at)
            found = state(base, originals)
            seen[found] = seen.get(found, 0) + 1
            files = [(base / name, NEW[name]) for name in RELATIVE]
            if originals and not rerun_force:
                with pytest.raises(TargetExists):
                    publish_together(files)
                # an uncommitted publication is undone: the complete original is back
                assert state(base, originals) == ("new" if found == "new" else "old")
                continue
            if found == "new" and not originals:
                with pytest.raises(TargetExists):
                    publish_together(files)
            else:
                publish_together(files, force=originals)
            assert state(base, originals) == "new"
            _only_targets(base)
    print(f"\n{mode}: {total} steps; after the kills: {seen}")
    assert seen.get("interrupted", 0) >= 3


def test_a_foreign_file_in_a_set_aside_name_is_not_overwritten(tmp_path: Path) -> None:
    """Killed after the first original was set aside and replaced; then someone removes
    our file and writes another there: the original cannot go back, nothing is touched."""
    base = tmp_path / "b"
    _setup(base, True)
    calibration = tmp_path / "c"
    _setup(calibration, True)
    total, _ = calibrate(CHILD, str(calibration), "force")
    for kill_at in range(total, 0, -1):  # the last kill that leaves a journal
        probe = tmp_path / f"p{kill_at}"
        _setup(probe, True)
        run_child(CHILD, str(probe), "force", kill_at=kill_at)
        if (
            state(probe, True) == "interrupted"
            and (probe / RELATIVE[0]).read_bytes() == NEW[RELATIVE[0]]
        ):
            break
    else:
        pytest.fail("no interrupted state with the first file replaced")
    (probe / RELATIVE[0]).unlink()
    (probe / RELATIVE[0]).write_bytes(b"someone else's")
    before = {e: (probe / e).read_bytes() for e in _entries(probe)}
    with pytest.raises(TargetExists):
        publish_together([(probe / name, NEW[name]) for name in RELATIVE], force=True)
    assert {e: (probe / e).read_bytes() for e in _entries(probe)} == before
    assert os.path.exists(base)
