"""A grouped publication killed with SIGKILL at any step: both entries or neither, and a
re-run always succeeds (kiln_verify.core.publisher).

The child publishes ``out.tar`` (a file) and ``out/`` (a directory of 12 files in three
subdirectories) as one group, killed at every file-system step of the protocol in turn
(crashkit) and at random moments. After every kill the parent sees one of: nothing
published, both complete, or an interrupted commit (its journal present); then a re-run
in this process publishes the pair, leaving no residue but an empty ``.out.creating-*``
(the lock-free instant between ``mkdir`` and ``flock``). A journal naming an entry that
was changed since is refused with ``target_exists`` and nothing is touched.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from kiln_verify.core.publisher import JOURNAL, recover_group, staged_group
from kiln_verify.errors import TargetExists
from tests.core.crashkit import calibrate, run_child, spawn

FILES = {f"d{i % 3}/f{i:02d}.bin": bytes([i]) * 4096 for i in range(12)}
ARCHIVE = b"archive bytes " * 1000

CHILD = r"""
import sys
from pathlib import Path
from kiln_verify.core import publisher
from kiln_verify.core.publisher import journal as publish_journal
from kiln_verify.core.publish import publish_bytes, publish_directory
real_journal = publish_journal.write
def journal(*args):
    mark()
    return real_journal(*args)
publish_journal.write = journal
FILES = {f"d{i % 3}/f{i:02d}.bin": bytes([i]) * 4096 for i in range(12)}
parent = Path(sys.argv[1])
print("go", flush=True)
with publisher.staged_group(parent, ("out.tar", "out"), key="out") as group:
    publish_directory(group.entry("out"), FILES)
    publish_bytes(group.entry("out.tar"), b"archive bytes " * 1000)
"""


def publish(parent: Path) -> None:
    from kiln_verify.core.publish import publish_bytes, publish_directory

    with staged_group(parent, ("out.tar", "out"), key="out") as group:
        publish_directory(group.entry("out"), FILES)
        publish_bytes(group.entry("out.tar"), ARCHIVE)


def _complete(parent: Path, name: str) -> bool:
    path = parent / name
    if name == "out.tar":
        return path.read_bytes() == ARCHIVE
    found = {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}
    return found == FILES


def state(parent: Path) -> str:
    """'absent', 'complete' or 'interrupted'; anything else fails."""
    names = set(os.listdir(parent))
    published = names & {"out.tar", "out"}
    for name in published:
        assert _complete(parent, name), name  # an entry is never partial
    stages = [n for n in names if n.startswith(".out.staging-")]
    rest = names - published - set(stages)
    assert all(n.startswith(".out.creating-") for n in rest), rest
    journals = [s for s in stages if (parent / s / JOURNAL).exists()]
    if journals:
        return "interrupted"
    if published == {"out.tar", "out"}:
        return "complete"
    assert not published, published  # one without the other needs a journal
    return "absent"


def _rerun_and_check(parent: Path) -> None:
    publish(parent)
    names = set(os.listdir(parent))
    assert {"out.tar", "out"} <= names
    assert all(n.startswith(".out.creating-") for n in names - {"out.tar", "out"}), names
    assert _complete(parent, "out.tar")
    assert _complete(parent, "out")


def _rerun_after_complete(parent: Path) -> None:
    """A complete pair is never rolled back: a re-run is target_exists."""
    with pytest.raises(TargetExists):
        publish(parent)
    assert _complete(parent, "out.tar")
    assert _complete(parent, "out")


@pytest.mark.slow
def test_kill_at_every_step(tmp_path: Path) -> None:
    calibration = tmp_path / "calibrate"
    calibration.mkdir()
    total, marks = calibrate(CHILD, str(calibration))
    assert state(calibration) == "complete"
    (journal_step,) = marks
    seen: dict[str, int] = {}
    for kill_at in range(1, total + 1):
        parent = tmp_path / f"k{kill_at}"
        parent.mkdir()
        run_child(CHILD, str(parent), kill_at=kill_at)
        found = state(parent)
        seen[found] = seen.get(found, 0) + 1
        if kill_at <= journal_step:
            assert found == "absent", kill_at
        if found == "complete":
            _rerun_after_complete(parent)
        else:
            _rerun_and_check(parent)
    print(f"\n{total} steps (journal at {journal_step}): {seen}")
    assert seen.get("interrupted", 0) >= 3  # journal written, each rename, the check


@pytest.mark.slow
def test_kill_at_random_moments(tmp_path: Path) -> None:
    calibration = tmp_path / "calibrate"
    calibration.mkdir()
    child = spawn(CHILD, str(calibration))
    assert child.stdout is not None
    assert child.stdout.readline() == "go\n"
    started = time.perf_counter()
    child.communicate(timeout=30)
    duration = time.perf_counter() - started  # the publication itself, from "go"
    rng = random.Random(20261203)
    seen: dict[str, int] = {}
    for trial in range(25):
        parent = tmp_path / f"r{trial}"
        parent.mkdir()
        child = spawn(CHILD, str(parent))
        assert child.stdout is not None
        assert child.stdout.readline() == "go\n"
        time.sleep(rng.uniform(0, duration * 1.2))
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=30)
        found = state(parent)
        seen[found] = seen.get(found, 0) + 1
        if found == "complete":
            _rerun_after_complete(parent)
        else:
            _rerun_and_check(parent)
    print(f"\nrandom kills: {seen}")


@pytest.mark.parametrize(("after_journal", "changed"), [(5, "out.tar"), (6, "out")])
def test_a_changed_leftover_is_never_taken_back(
    tmp_path: Path, after_journal: int, changed: str
) -> None:
    """Killed after the first (the archive) or both renames; then the published entry is
    changed (a file appended to, a directory given a new file): never taken back."""
    parent = tmp_path / "p"
    parent.mkdir()
    (journal_step,) = calibrate(CHILD, str(tmp_path))[1]
    run_child(CHILD, str(parent), kill_at=journal_step + after_journal)
    assert state(parent) == "interrupted"
    target = parent / changed
    if target.is_dir():
        (target / "trained.txt").write_bytes(b"someone used it")
    else:
        with open(target, "ab") as stream:
            stream.write(b"!")
    before = sorted(os.listdir(parent))
    with pytest.raises(TargetExists) as caught:
        publish(parent)
    assert ".out.staging-" in caught.value.rule
    assert sorted(os.listdir(parent)) == before


def test_a_live_publication_is_left_alone(tmp_path: Path) -> None:
    with staged_group(tmp_path, ("out.tar", "out"), key="out") as group:
        Path(group.entry("out")).mkdir()
        (Path(group.entry("out")) / "x").write_bytes(b"x")
        Path(group.entry("out.tar")).write_bytes(b"t")
        assert recover_group(tmp_path, "out") == []  # locked by us
        assert os.path.isdir(group.path)
    assert sorted(os.listdir(tmp_path)) == ["out", "out.tar"]


def test_in_process_failure_takes_everything_back(tmp_path: Path) -> None:
    def refuse() -> None:
        assert sorted(os.listdir(tmp_path))[-2:] == ["out", "out.tar"]  # both published
        raise KeyboardInterrupt

    def build() -> None:
        with staged_group(tmp_path, ("out.tar", "out"), key="out", before_commit=refuse) as group:
            Path(group.entry("out")).mkdir()
            Path(group.entry("out.tar")).write_bytes(b"t")

    with pytest.raises(KeyboardInterrupt):
        build()
    assert os.listdir(tmp_path) == []
