"""The receipts committed as evidence: each passes ``--check`` in this repository, and every
committed workload has a passing ``cpu`` receipt (issue 7). A cuda receipt is only present
when a GPU host produced one; none is required here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qualification.runner.receipt import check

REPO = Path(__file__).resolve().parents[2]
RECEIPTS = sorted((REPO / "qualification" / "receipts").rglob("*.json"))
WORKLOADS = sorted((REPO / "qualification" / "workloads").glob("*.json"))


@pytest.mark.parametrize("path", RECEIPTS, ids=[p.name for p in RECEIPTS])
def test_committed_receipt_checks(path: Path) -> None:
    notes = check(path, REPO)
    # the run logs stay on the machine that ran the workload; nothing else may be unchecked
    assert all(
        "is not on this machine" in note or "is not in this repository" in note for note in notes
    ), notes


@pytest.mark.parametrize("workload", WORKLOADS, ids=[p.stem for p in WORKLOADS])
def test_every_workload_has_a_passing_cpu_receipt(workload: Path) -> None:
    workload_id = json.loads(workload.read_bytes())["workload_id"]
    verdicts = [
        json.loads(path.read_bytes())
        for path in RECEIPTS
        if path.relative_to(REPO / "qualification" / "receipts").parts[0] == "cpu"
    ]
    passing = [r for r in verdicts if r["workload"]["id"] == workload_id and r["verdict"] == "pass"]
    assert passing, f"no passing cpu receipt for {workload_id} under qualification/receipts/cpu"
