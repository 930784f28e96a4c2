"""The train-run benchmark runs end to end at its ``--quick`` shape (numbers:
docs/performance.md). Only the report's shape is checked, never a timing: the server's run
completes with its diagnostic evaluation, every stage of both sides is timed, the hand run
trains on the same number of groups as the server, and the scratch directory is removed.

It costs about 40 s of CPU (the server with its trainer child, then six hand-run processes
that each import torch), hence ``slow``; the warm-started tiny model is the session-shared
build of tests/control/train (tests/models.py). The benchmark's driver runs in this process
(it only starts, polls and times its children: a child interpreter of its own would import
kiln-verify again) and both sides play the session's bandit oracle (``--environment``)
instead of one more oracle process; the server, its trainer and every hand-run step are
still child processes, as in a user's run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")

from oracle.runner import ServerHandle as OracleHandle
from tests import models

pytestmark = pytest.mark.slow

STAGES = ["admission", "collection", "export", "training", "import", "evaluation"]


def test_the_train_run_benchmark_runs(
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    bandit: OracleHandle,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import train_run

    model = models.warm_bandit_model(tmp_path_factory, bandit.base_url)
    assert train_run.main(
        ["--quick", "--json", "--model", str(model), "--tmpdir", str(tmp_path),
         "--environment", bandit.base_url]
    ) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["benchmark"] == "train_run"
    assert list(tmp_path.iterdir()) == []  # the scratch directory is gone
    assert report["gate_outcome"] == "diagnostic"
    shape = report["shape"]
    assert shape["server_groups_trained"] == shape["hand_groups_trained"] >= 1
    assert report["hand"]["stages_s"]["admission"] is None  # no admission by hand
    for side in ("server", "hand"):
        for unit in ("stages_s", "stages_cpu_s"):
            assert list(report[side][unit]) == STAGES
            assert min(v for v in report[side][unit].values() if v is not None) >= 0
    assert report["server"]["stages_s"]["training"] > 0
    assert report["server"]["cpu_s"] >= report["cpu"]["server_total"]  # start-up included
    for unit in ("wall", "cpu"):
        assert report[unit]["server_total"] > 0
        assert report[unit]["hand_total"] > 0
        assert report[unit]["ratio"]["admission"] is None
        assert report[unit]["ratio"]["total"] > 0
