"""Restarts: a killed server fails an in-training run and leaves no trainer behind; a
queued train run resumes with its sealed contract.

The real ``kiln-verify serve --model DIR`` process trains with the real ``train.py``; it is
killed with ``SIGKILL`` while the run is ``training_running``. The trainer child dies with
it (``PR_SET_PDEATHSIG``), and the next start on the same state directory fails the run
with ``run_interrupted`` at stage ``restoration``; the adapter is never installed.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest

from kiln_verify.control.config import OpenEnvSettings, ServerConfig
from kiln_verify.control.kinds import trainer_child
from kiln_verify.control.sections.model import ModelSettings
from kiln_verify.server.runner import start_in_thread
from kiln_verify.testing.serve import ServeProcess
from oracle.runner import ServerHandle as OracleHandle

from .conftest import OUTPUT, train_request, wait_state, wait_terminal

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")


def _trainers(run_dir: Path) -> list[int]:
    """Processes whose command line names this run's exported bundle."""
    needle = str(run_dir / "trainer").encode()
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if needle in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                continue
    return found


def test_sigkill_during_training_fails_the_run_on_restart(
    tmp_path: Path, model: Path, bandit: OracleHandle
) -> None:
    state = tmp_path / "state"
    first = ServeProcess(state, "--model", str(model))
    try:
        with httpx.Client(base_url=first.url, trust_env=False, timeout=120) as http:
            created = http.post("/v1/openenv/runs", json=train_request(bandit.base_url))
            assert created.status_code == 202, created.text
            run_id = created.json()["run_id"]
            deadline = time.monotonic() + 300
            wait_state(http, run_id, frozenset({"training_running"}))
        run_dir = next(state.glob(f"**/{run_id}"))
        # the state changes when the child is spawned; its exec of train.py comes just after
        while not _trainers(run_dir):
            assert time.monotonic() < deadline, "the trainer child never started"
            time.sleep(0.05)
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=30)
    finally:
        first.stop()
    deadline = time.monotonic() + 30
    while _trainers(run_dir):  # the trainer dies with the server
        assert time.monotonic() < deadline, "the trainer outlived the killed server"
        time.sleep(0.05)

    second = ServeProcess(state, "--model", str(model))
    try:
        with httpx.Client(base_url=second.url, trust_env=False, timeout=60) as http:
            status = http.get(f"/v1/openenv/runs/{run_id}").json()
            assert http.get("/v1/adapters").json()["available"] == []
    finally:
        assert second.stop() == 0
    assert status["state"] == "failed"
    failure = status["failure"]
    assert (failure["code"], failure["stage"]) == ("run_interrupted", "restoration")
    assert "training_running" in failure["message"]
    assert status["training_contract"]["effective_config"]["output_name"] == OUTPUT


def test_a_queued_train_run_resumes_with_its_sealed_contract(
    tmp_path: Path, model: Path, bandit: OracleHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One slot: a first run holds it in a trainer that never ends, a second waits queued;
    the server stops. On restart the first fails ``run_interrupted``, the second resumes,
    is re-admitted from its request and sealed contract only, and reaches its trainer."""
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\nexec sleep 300\n")
    script.chmod(0o755)
    monkeypatch.setattr(trainer_child, "INTERPRETER", str(script))
    config = ServerConfig(
        host="127.0.0.1",
        port=0,
        state_dir=tmp_path / "state",
        openenv=dataclasses.replace(OpenEnvSettings(), max_active_runs=1),
        model=ModelSettings(model),
    )
    handle = start_in_thread(config)
    try:
        with httpx.Client(base_url=handle.base_url, trust_env=False, timeout=120) as http:
            first = http.post("/v1/openenv/runs", json=train_request(bandit.base_url)).json()
            body = train_request(bandit.base_url, output_adapter="queued-1")
            second = http.post("/v1/openenv/runs", json=body).json()
            assert second["state"] == "queued"
            wait_state(http, first["run_id"], frozenset({"training_running"}))
    finally:
        handle.stop()

    script.write_text("#!/bin/sh\nexit 7\n")
    handle = start_in_thread(config)
    try:
        with httpx.Client(base_url=handle.base_url, trust_env=False, timeout=120) as http:
            interrupted = http.get(f"/v1/openenv/runs/{first['run_id']}").json()
            resumed = wait_terminal(http, second["run_id"], timeout=300)
    finally:
        handle.stop()
    assert interrupted["failure"]["code"] == "run_interrupted"
    assert resumed["training_contract"] == second["training_contract"]
    assert resumed["failure"]["code"] == "training_failed"  # it reached its trainer
    assert "exited with status 7" in resumed["failure"]["message"]
