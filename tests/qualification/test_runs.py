"""Runs that reach their steps: verdicts, timeouts, metrics, isolation, end-of-run checks."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import jsonschema

from qualification.runner import isolation
from qualification.runner.receipt import self_digest
from tests.qualification.fixture import (
    REPO,
    make_repo,
    metric_code,
    only_receipt,
    qualify,
    step,
    step_record,
    workload,
)

SCHEMA = json.loads((REPO / "qualification" / "schema" / "receipt-v1.schema.json").read_text())


def test_a_passing_run_writes_a_valid_receipt_with_metrics(tmp_path: Path) -> None:
    steps = [
        step("first", metric_code("rows", "12") + "; print('KILN_QUALIFICATION_METRIC "
             '{"name": "ratio", "value": 0.25, "unit": "fraction"}\')'),
        step("second", "import sys; print('plain output'); print('noise', file=sys.stderr)"),
    ]  # fmt: skip
    evidence = [{"step": "first", "name": "rows", "equals": 12},
                {"step": "first", "name": "ratio", "min": 0, "max": 1}]  # fmt: skip
    repo = make_repo(tmp_path, {"ok": workload(steps, evidence=evidence)})
    result = qualify(repo, "ok")
    assert result.returncode == 0, result.stderr
    path, receipt = only_receipt(repo)
    jsonschema.validate(receipt, SCHEMA)
    assert path.parent == repo / "qualification" / "receipts" / "cpu" / "test-host"
    assert path.name == receipt["receipt_id"] + ".json"
    assert (receipt["verdict"], receipt["failures"]) == ("pass", [])
    assert receipt["receipt_sha256"] == self_digest(receipt)
    first = step_record(receipt, "first")
    assert first["metrics"] == [
        {"name": "rows", "value": 12},
        {"name": "ratio", "value": 0.25, "unit": "fraction"},
    ]
    assert [item["passed"] for item in receipt["evidence"]] == [True, True]
    second = step_record(receipt, "second")
    assert (repo / second["stderr"]["path"]).read_bytes() == b"noise\n"
    assert second["stdout"]["bytes"] == len(b"plain output\n")
    assert receipt["source"]["git_commit"] == receipt["source"]["commit_at_end"]
    assert receipt["source"]["clean_at_end"] is True
    assert receipt["model"] is None


def test_a_failing_step_fails_the_run_and_still_writes_a_valid_receipt(tmp_path: Path) -> None:
    steps = [step("ok", "pass"), step("boom", "raise SystemExit(3)"), step("after", "pass")]
    repo = make_repo(tmp_path, {"fail": workload(steps)})
    result = qualify(repo, "fail")
    assert result.returncode == 1
    _, receipt = only_receipt(repo)
    jsonschema.validate(receipt, SCHEMA)
    assert receipt["verdict"] == "fail"
    assert receipt["failures"] == ["step boom: exit 3 (expected [0])"]
    assert [s["status"] for s in receipt["steps"]] == ["passed", "failed", "not_run"]
    assert step_record(receipt, "boom")["exit_code"] == 3


def test_missing_evidence_fails_the_run(tmp_path: Path) -> None:
    evidence: list[dict[str, Any]] = [
        {"step": "s", "name": "rows", "min": 5},
        {"step": "s", "name": "absent"},
    ]
    repo = make_repo(
        tmp_path, {"ev": workload([step("s", metric_code("rows", "4"))], evidence=evidence)}
    )
    assert qualify(repo, "ev").returncode == 1
    _, receipt = only_receipt(repo)
    assert [(e["observed"], e["passed"]) for e in receipt["evidence"]] == [
        (4, False),
        (None, False),
    ]
    assert len(receipt["failures"]) == 2


def test_malformed_metric_lines_fail_the_step(tmp_path: Path) -> None:
    code = ("print('KILN_QUALIFICATION_METRIC {\"name\": \"x\", \"value\": NaN}');"
            + metric_code("y", "1") + ";" + metric_code("y", "2"))  # fmt: skip
    repo = make_repo(tmp_path, {"bad": workload([step("s", code)])})
    assert qualify(repo, "bad").returncode == 1
    _, receipt = only_receipt(repo)
    record = step_record(receipt, "s")
    assert (record["status"], record["exit_code"]) == ("failed", 0)
    assert record["metrics"] == [{"name": "y", "value": 1}]
    assert [e.split(": ", 1)[0] for e in record["metric_errors"]] == [
        "stdout line 1",
        "stdout line 3",
    ]


def test_a_step_past_its_timeout_is_terminated(tmp_path: Path) -> None:
    steps = [step("slow", "import time; time.sleep(60)", timeout_seconds=0.5), step("next", "pass")]
    repo = make_repo(tmp_path, {"slow": workload(steps)})
    assert qualify(repo, "slow").returncode == 1
    _, receipt = only_receipt(repo)
    slow = step_record(receipt, "slow")
    assert (slow["status"], slow["timed_out"], slow["killed"]) == ("timed_out", True, False)
    assert (slow["exit_code"], slow["signal"]) == (None, "SIGTERM")
    assert receipt["failures"] == ["step slow: timed out after 0.5 s (terminated)"]
    assert step_record(receipt, "next")["status"] == "not_run"


def test_a_step_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    code = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)")  # fmt: skip
    repo = make_repo(tmp_path, {"stubborn": workload([step("stubborn", code, timeout_seconds=3)])})
    assert qualify(repo, "stubborn").returncode == 1
    _, receipt = only_receipt(repo)
    record = step_record(receipt, "stubborn")
    assert (repo / record["stdout"]["path"]).read_text() == "ready\n"
    assert (record["timed_out"], record["killed"], record["signal"]) == (True, True, "SIGKILL")
    assert receipt["failures"] == ["step stubborn: timed out after 3 s (killed)"]


def test_a_missing_executable_fails_the_step(tmp_path: Path) -> None:
    missing = {"id": "gone", "argv": ["/nonexistent/tool"], "timeout_seconds": 5, "network": "host"}
    repo = make_repo(tmp_path, {"gone": workload([missing])})
    assert qualify(repo, "gone").returncode == 1
    _, receipt = only_receipt(repo)
    record = step_record(receipt, "gone")
    assert (record["status"], record["exit_code"]) == ("failed", None)
    assert "cannot start '/nonexistent/tool'" in (repo / record["stderr"]["path"]).read_text()


def test_offline_steps_record_whether_isolation_was_enforced(tmp_path: Path) -> None:
    code = metric_code(
        "interfaces", "','.join(sorted(n for _, n in __import__('socket').if_nameindex()))"
    )
    steps = [step("offline", code, network="none"), step("online", code, network="host")]
    repo = make_repo(tmp_path, {"net": workload(steps)})
    assert qualify(repo, "net").returncode == 0
    _, receipt = only_receipt(repo)
    probe = isolation.probe()
    host_interfaces = ",".join(sorted(name for _, name in socket.if_nameindex()))
    assert receipt["isolation"]["available"] is probe.available
    offline, online = step_record(receipt, "offline"), step_record(receipt, "online")
    assert offline["isolation_enforced"] is probe.available
    assert online["isolation_enforced"] is False
    assert online["metrics"] == [{"name": "interfaces", "value": host_interfaces}]
    expected = "lo" if probe.available else host_interfaces
    assert offline["metrics"] == [{"name": "interfaces", "value": expected}]
    assert offline["argv"] == online["argv"]  # the recorded argv is the step's, not the wrapper's


def test_a_step_that_dirties_the_tree_fails_the_run(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path, {"dirty": workload([step("litter", "open('litter.txt', 'w').close()")])}
    )
    assert qualify(repo, "dirty").returncode == 1
    _, receipt = only_receipt(repo)
    assert step_record(receipt, "litter")["status"] == "passed"
    assert receipt["source"]["clean_at_end"] is False
    assert receipt["failures"] == ["the working tree is no longer clean after the run"]


def test_runner_environment_reaches_the_step(tmp_path: Path) -> None:
    code = ("import os; " + metric_code("seen", "os.environ['KILN_QUALIFICATION_VARIANT'] + "
            "os.environ['GIVEN'] + str('SECRET_TOKEN' in os.environ)"))  # fmt: skip
    repo = make_repo(tmp_path, {"env": workload([step("env", code, env={"GIVEN": "-${device}-"})])})
    os.environ["SECRET_TOKEN"] = "x"
    try:
        assert qualify(repo, "env").returncode == 0
    finally:
        del os.environ["SECRET_TOKEN"]
    _, receipt = only_receipt(repo)
    record = step_record(receipt, "env")
    assert record["metrics"] == [{"name": "seen", "value": "cpu-cpu-False"}]
    assert record["env"] == {"GIVEN": "-cpu-"}
