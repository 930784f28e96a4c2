"""The crash kit's zygote counts exactly the steps a fresh interpreter counts.

Every kill test trusts :func:`tests.core.crashkit.calibrate`: a child forked from the
zygote that counted fewer steps than a fresh interpreter would leave steps never killed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.crashkit import HOOK, calibrate, run_child

SCRIPT = r"""
import sys
from kiln_verify.core.publish import publish_directory
from kiln_verify.openenv.collect import publish_together
mark()
publish_together([(f"{sys.argv[1]}/a/x", b"x" * 10), (f"{sys.argv[1]}/y", b"y")])
mark()
publish_directory(f"{sys.argv[1]}/d", {"f": b"f", "g/h": b"h"})
"""


def _fresh_steps(base: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", HOOK + SCRIPT, os.fspath(base)],
        capture_output=True,
        text=True,
        env=dict(os.environ, KILN_KILL_AT_STEP="0"),
        check=True,
    )
    return done.stdout.strip()


def test_a_forked_child_counts_the_steps_of_a_fresh_interpreter(tmp_path: Path) -> None:
    for name in ("fresh", "forked"):
        (tmp_path / name / "a").mkdir(parents=True)
    total, marks = calibrate(SCRIPT, os.fspath(tmp_path / "forked"))
    assert total > 10
    assert _fresh_steps(tmp_path / "fresh") == f"steps={total} marks={marks[0]},{marks[1]}"
    assert sorted(p.name for p in (tmp_path / "forked").rglob("*")) == sorted(
        p.name for p in (tmp_path / "fresh").rglob("*")
    )


def test_a_forked_child_dies_at_its_step_and_reports_failures(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    assert run_child(SCRIPT, os.fspath(tmp_path), kill_at=1) == ""
    assert not (tmp_path / "a" / "x").exists()
    with pytest.raises(AssertionError):
        run_child("raise SystemExit(3)\n")
    with pytest.raises(AssertionError, match="ValueError: boom"):
        run_child("raise ValueError('boom')\n")
