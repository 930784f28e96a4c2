"""``hf export-sft`` killed with SIGKILL: the directory and archive appear both or neither,
and the same command run again succeeds (issue 14, part 3).

The child runs a real export of the tiny model (tests.core.crashkit counts its
file-system steps). It is killed at every step, the build before the journal included,
and at random moments. After each kill
the output directory holds nothing, the complete verified pair, or an interrupted commit
(a staging directory with its journal, beside the entries it published); no entry is ever
partial and nothing is left outside the output directory's staging. Then the same export
runs again in this process: it rolls the interrupted commit back and succeeds, or meets a
complete pair and is ``target_exists``.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from kiln_verify.core.publisher import JOURNAL
from kiln_verify.errors import TargetExists
from kiln_verify.hf.export import export_sft
from kiln_verify.hf.export.source import ExportSource
from kiln_verify.hf.verify import verify_hf_path
from tests.core.crashkit import calibrate, run_child, spawn

NAME = "crash_01"
# The export imports jinja2 and tokenizers lazily, before its first file-system step. As
# top-level imports of the script, crashkit's zygote loads them once instead of every forked
# child loading them again (the step counts are the same); placed after "go", a fresh
# interpreter (the random kills) still loads them inside the window it is killed in.
CHILD = r"""
import sys
from kiln_verify.core.publisher import journal as publish_journal
from kiln_verify.hf.export import ExportSource, export_sft
real_journal = publish_journal.write
def journal(*args):
    mark()
    return real_journal(*args)
publish_journal.write = journal
model, data, output = sys.argv[1:4]
print("go", flush=True)
import jinja2.ext, jinja2.sandbox, tokenizers
export_sft(ExportSource(model=model), dataset=data, name="crash_01", output=output)
"""
TARGETS = {NAME + ".kiln-hf", NAME + ".kiln-hf.tar.gz"}


def state(parent: Path) -> str:
    """'absent', 'complete' or 'interrupted'; anything partial fails."""
    names = set(os.listdir(parent))
    published = names & TARGETS
    for name in published:
        assert verify_hf_path(parent / name).rows == 2, name  # never partial
    stages = {n for n in names if n.startswith(f".{NAME}.kiln-hf.staging-")}
    rest = names - published - stages
    assert all(n.startswith(f".{NAME}.kiln-hf.creating-") for n in rest), rest
    if any((parent / stage / JOURNAL).exists() for stage in stages):
        return "interrupted"
    if published == TARGETS:
        return "complete"
    assert not published, published
    return "absent"


def rerun(parent: Path, model: Path, data: Path, found: str) -> None:
    output = parent / (NAME + ".kiln-hf.tar.gz")
    if found == "complete":
        with pytest.raises(TargetExists):
            export_sft(ExportSource(model=model), dataset=data, name=NAME, output=output)
    else:
        outcome = export_sft(ExportSource(model=model), dataset=data, name=NAME, output=output)
        assert outcome.report.rows == 2
    names = set(os.listdir(parent))
    assert names >= TARGETS
    leftovers = names - TARGETS
    assert all(n.startswith(f".{NAME}.kiln-hf.creating-") for n in leftovers), leftovers
    assert (
        verify_hf_path(output).export_sha256
        == verify_hf_path(parent / (NAME + ".kiln-hf")).export_sha256
    )


@pytest.mark.slow
def test_kill_at_every_step(tmp_path: Path, tiny_model: Path, sft_file: Path) -> None:
    calibration = tmp_path / "calibrate"
    calibration.mkdir()
    args = (str(tiny_model), str(sft_file))
    total, (journal_step,) = calibrate(CHILD, *args, str(calibration / f"{NAME}.kiln-hf.tar.gz"))
    assert state(calibration) == "complete"
    steps = range(1, total + 1)
    seen: dict[str, int] = {}
    for kill_at in steps:
        parent = tmp_path / f"k{kill_at}"
        parent.mkdir()
        run_child(CHILD, *args, str(parent / f"{NAME}.kiln-hf.tar.gz"), kill_at=kill_at)
        found = state(parent)
        seen[found] = seen.get(found, 0) + 1
        if kill_at <= journal_step:
            assert found == "absent", kill_at
        rerun(parent, tiny_model, sft_file, found)
    print(f"\nexport: {total} steps, journal at {journal_step}; {len(steps)} kills: {seen}")
    assert seen.get("interrupted", 0) >= 4


@pytest.mark.slow
def test_kill_at_random_moments(tmp_path: Path, tiny_model: Path, sft_file: Path) -> None:
    args = (str(tiny_model), str(sft_file))
    calibration = tmp_path / "calibrate"
    calibration.mkdir()
    child = spawn(CHILD, *args, str(calibration / f"{NAME}.kiln-hf.tar.gz"))
    assert child.stdout is not None
    assert child.stdout.readline() == "go\n"
    started = time.perf_counter()
    child.communicate(timeout=120)
    duration = time.perf_counter() - started
    rng = random.Random(14_3)
    seen: dict[str, int] = {}
    for trial in range(12):
        parent = tmp_path / f"r{trial}"
        parent.mkdir()
        child = spawn(CHILD, *args, str(parent / f"{NAME}.kiln-hf.tar.gz"))
        assert child.stdout is not None
        assert child.stdout.readline() == "go\n"
        time.sleep(rng.uniform(duration * 0.3, duration * 1.1))
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        found = state(parent)
        seen[found] = seen.get(found, 0) + 1
        rerun(parent, tiny_model, sft_file, found)
    print(f"\nexport random kills (export takes {duration:.2f} s): {seen}")
