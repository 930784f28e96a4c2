"""A train run end to end over a real socket: collect with the resident model, select,
export, the bundle's own ``train.py`` in a child, verify, keep the evidence, install; and
each way the training stage fails, with a typed record and nothing served.

The failure cases replace the interpreter that runs ``train.py`` (the module attribute
:data:`~kiln_verify.control.kinds.trainer_child.INTERPRETER`, read at each start) with a
small script: one that fails, one that writes no result, one that trains for real and
then occupies the output adapter's name in the served store, one that never ends.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.kinds import trainer_child
from kiln_verify.control.resident.store import adapters_root
from kiln_verify.control.training.trainer_status import OpenEnvTrainingStatus
from kiln_verify.control_client.client import ControlClient
from kiln_verify.control_client.download_run import download_run
from kiln_verify.openenv.records.rollout import AgenticGroup
from kiln_verify.openenv.records.summary import TrainingContract
from kiln_verify.openenv.runcheck.engine import verify_run
from kiln_verify.openenv.training.chain import check_training_chain
from kiln_verify.openenv.training.lineage import read_training_data
from kiln_verify.openenv.training.selection import select_for_training
from oracle.runner import ServerHandle as OracleHandle
from tests.openenv.records.kiln_published import differences

from .conftest import OUTPUT, train_request, wait_state, wait_terminal

BUNDLE = ["dataset", "replay", "summary"]


def _start(http: httpx.Client, body: dict[str, Any]) -> str:
    created = http.post("/v1/openenv/runs", json=body)
    assert created.status_code == 202, created.text
    assert created.json()["training_contract"]["schema"] == "kiln.openenv-training-contract.v1"
    run_id: str = created.json()["run_id"]
    return run_id


def _download(http: httpx.Client, status: dict[str, Any], kind: str) -> bytes:
    (entry,) = [a for a in status["artifacts"] if a["kind"] == kind]
    answer = http.get(entry["url"])
    assert answer.status_code == 200, answer.text
    assert len(answer.content) == entry["bytes"]
    return answer.content


def _fake_interpreter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, body: str
) -> None:
    script = tmp_path / name
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(trainer_child, "INTERPRETER", str(script))


def test_a_train_run_completes_installs_and_keeps_its_evidence(
    http: httpx.Client, config: ServerConfig, bandit: OracleHandle, tmp_path: Path
) -> None:
    run_id = _start(http, train_request(bandit.base_url))
    status = wait_terminal(http, run_id, timeout=600)
    assert status["state"] == "completed", status.get("failure")
    assert differences("OpenEnvRunStatus", status) == []  # training and its lineage too
    installed = adapters_root(config) / OUTPUT
    assert installed.is_dir()

    training = status["training"]
    OpenEnvTrainingStatus.from_json(training)  # Kiln's record, closed
    assert training["job_id"] == status["training_job_id"] == f"grpo-{run_id}"
    assert (training["state"], training["progress"], training["epoch"]) == ("completed", 1.0, 1)
    assert isinstance(training["current_loss"], float)  # parsed from the trainer's log
    assert training["adapter_path"] == str(installed)
    data = training["training_data"]
    assert data["source"] == "openenv"
    lineage = read_training_data(data["openenv"])

    assert [a["kind"] for a in status["artifacts"]] == [
        *BUNDLE,
        "train_receipt",
        "adapter_manifest",
    ]
    summary = json.loads(_download(http, status, "summary"))
    assert summary["training_contract"] == status["training_contract"]  # sealed, then embedded
    selected = summary["training_selection"]
    assert selected["groups_submitted"] == data["rows"] == lineage.groups >= 1
    assert status.get("warnings") == selected.get("warnings")

    # the evidence binds the admitted corpus, the lineage, the contract and the served bytes
    groups = [
        AgenticGroup.from_json(json.loads(line))
        for line in _download(http, status, "dataset").splitlines()
    ]
    corpus = select_for_training(groups).corpus_bytes()
    (tmp_path / "r.json").write_bytes(_download(http, status, "train_receipt"))
    (tmp_path / "m.json").write_bytes(_download(http, status, "adapter_manifest"))
    check_training_chain(
        receipt_path=tmp_path / "r.json",
        manifest_path=tmp_path / "m.json",
        corpus=corpus,
        contract=TrainingContract.from_json(status["training_contract"]),
        adapter_dir=installed,
        status_lineage=lineage,
    )
    # the whole run downloaded, then every link checked offline (docs/verify-run.md); the
    # server's own run directory verifies too, with the adapter it keeps in quarantine
    with ControlClient(str(http.base_url)) as client:
        download_run(client, run_id, str(tmp_path / "run"))
    report = verify_run(tmp_path / "run", adapter_dir=installed)
    assert report.training is not None
    assert (report.run_kind, report.training.output_adapter) == ("train", OUTPUT)
    assert verify_run(config.runs_root / run_id).training == report.training

    listed = http.get("/v1/adapters").json()
    assert [e["status"] for e in listed["available"] if e["name"] == OUTPUT] == ["available"]
    metrics = http.get("/metrics").text
    assert 'kiln_openenv_runs_total{status="training_queued"}' in metrics
    assert 'kiln_openenv_runs_total{status="training_completed"} 1.0' in metrics

    # the evidence is manifest-gated: changed on disk, it is no longer served
    (receipt,) = config.state_dir.glob(f"**/{run_id}/train_receipt.json")
    receipt.write_bytes(receipt.read_bytes().replace(b'"exit_code": 0', b'"exit_code": 1'))
    (entry,) = [a for a in status["artifacts"] if a["kind"] == "train_receipt"]
    tampered = http.get(entry["url"])
    assert tampered.status_code == 409
    assert tampered.json()["error"]["code"] == "openenv_artifact_integrity_failed"


def _failed(http: httpx.Client, run_id: str, config: ServerConfig, output: str) -> dict[str, Any]:
    status = wait_terminal(http, run_id, timeout=600)
    assert status["state"] == "failed", status
    assert differences("OpenEnvRunStatus", status) == []  # training and failure too
    assert status["training"]["state"] == "failed"
    assert status["training"]["error"] == status["failure"]["message"] == status["error"]
    assert [a["kind"] for a in status["artifacts"]] == BUNDLE  # no evidence bound
    installed = adapters_root(config) / output
    assert not installed.exists() or not any(installed.iterdir())  # nothing served
    return status


def test_a_trainer_that_exits_non_zero_fails_the_run(
    http: httpx.Client,
    config: ServerConfig,
    bandit: OracleHandle,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fake_interpreter(monkeypatch, tmp_path, "python", "echo 'runner: out of memory' >&2\nexit 3")
    run_id = _start(http, train_request(bandit.base_url, output_adapter="exit-3"))
    failure = _failed(http, run_id, config, "exit-3")["failure"]
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "training_failed",
        "training",
        False,
    )
    assert "exited with status 3" in failure["message"]
    assert "runner: out of memory" in failure["message"]


def test_a_trainer_that_writes_no_result_fails_with_invalid_evidence(
    http: httpx.Client,
    config: ServerConfig,
    bandit: OracleHandle,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fake_interpreter(monkeypatch, tmp_path, "python", "exit 0")
    run_id = _start(http, train_request(bandit.base_url, output_adapter="no-result"))
    failure = _failed(http, run_id, config, "no-result")["failure"]
    assert (failure["code"], failure["stage"]) == ("training_evidence_invalid", "training")
    assert "the trainer's result does not verify" in failure["message"]


def test_an_adapter_the_store_refuses_is_never_served(
    http: httpx.Client,
    config: ServerConfig,
    bandit: OracleHandle,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = adapters_root(config) / "refused"
    body = f'"{sys.executable}" "$@" || exit $?\nmkdir -p "{taken}"'
    _fake_interpreter(monkeypatch, tmp_path, "python", body)
    run_id = _start(http, train_request(bandit.base_url, output_adapter="refused"))
    status = _failed(http, run_id, config, "refused")
    failure = status["failure"]
    assert (failure["code"], failure["stage"]) == ("training_evidence_invalid", "training")
    assert "adapter_exists" in failure["message"]
    assert list(taken.iterdir()) == []


def _running(pattern: str) -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if pattern.encode() in command:
                return True
    return False


def test_cancelling_during_training_stops_the_trainer(
    http: httpx.Client,
    config: ServerConfig,
    bandit: OracleHandle,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    marker = f"{os.getpid() % 1000}.{time.monotonic_ns() % 997}"
    _fake_interpreter(monkeypatch, tmp_path, "python", f"exec sleep {marker}")
    run_id = _start(http, train_request(bandit.base_url, output_adapter="cancelled"))
    deadline = time.monotonic() + 300
    wait_state(http, run_id, frozenset({"training_running"}))
    # the state changes when the child is spawned; its exec of the trainer comes just after
    while not _running(f"sleep\0{marker}"):
        assert time.monotonic() < deadline, "the trainer child never started"
        time.sleep(0.05)
    status = http.delete(f"/v1/openenv/runs/{run_id}").json()
    assert status["state"] == "cancelled"
    assert differences("OpenEnvRunStatus", status) == []
    assert status["training"]["state"] == "failed"  # Kiln's TrainingState has no cancelled
    assert "cancelled" in status["training"]["error"]
    gone = time.monotonic() + 10  # killed with its process group; reaped a moment later
    while _running(f"sleep\0{marker}"):
        assert time.monotonic() < gone, "the trainer outlived its cancelled run"
        time.sleep(0.05)
    assert not (adapters_root(config) / "cancelled").exists()


def _counter(http: httpx.Client, series: str) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[1])
    raise AssertionError(f"{series} is not exported")


def test_a_refused_train_request_creates_nothing_and_is_counted(
    http: httpx.Client, config: ServerConfig, bandit: OracleHandle
) -> None:
    series = 'kiln_openenv_runs_total{status="training_preflight_rejected"}'
    before = _counter(http, series)
    runs = len(http.get("/v1/openenv/runs").json()["runs"])
    body = train_request(bandit.base_url, training_config={"optimizer": {"kind": "muon"}})
    refused = http.post("/v1/openenv/runs", json=body)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "openenv_training_config_unsupported"
    assert _counter(http, series) == before + 1
    assert len(http.get("/v1/openenv/runs").json()["runs"]) == runs
