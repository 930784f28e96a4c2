"""SIGKILL at random moments, restart on the same state directory: nothing lost or doubled.

Each trial starts the control plane as its own process (forked from a preloaded fork
server, so a restart costs milliseconds, not an interpreter start), submits runs with
idempotency keys (two execution slots for more runs, so some wait queued), kills
the process with SIGKILL after a random delay, and starts it again on the same state
directory. After every restart:

- every run whose creation was acknowledged (202) is still there, once;
- re-sending every key of the previous trial answers the original run (200), or creates
  the run if its creation never became durable (never a second one);
- every run is terminal, a resumed pristine queued run, or running again after
  admission; runs that had been admitted are ``failed`` with ``run_interrupted`` at stage
  ``restoration``;
- every run with an artifacts manifest has files that match it and verify offline.

At the end the resumed queue is cancelled, every run reaches a terminal state, and the
admission order of all runs follows their admission sequence (queued runs resumed in
FIFO order).
"""

from __future__ import annotations

import itertools
import multiprocessing
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kiln_verify.core.digest import hash_file
from kiln_verify.openenv.verify import verify_bundle
from oracle.runner import ServerHandle as OracleHandle
from tests.control.kill_child import serve_child
from tests.control.support import TERMINAL, small_request

TRIALS = 30
RUNS_PER_TRIAL = 2
MAX_KILL_DELAY_S = 0.5
COMPLETE_EVERY = 5
"""Every fifth trial kills only after its first run published (the others at random)."""
SEED = 20261201
FILES = {
    "dataset": "openenv.rollouts.jsonl",
    "replay": "openenv.replay.json",
    "summary": "openenv.rollout-summary.json",
}


@pytest.fixture(scope="module")
def spawner() -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.control.kill_child"])
    return context


class Child:
    def __init__(self, context: Any, state_dir: Path) -> None:
        receive, send = context.Pipe(duplex=False)
        # daemonic: a test that fails half-way must not leave interpreter exit joining it
        self.process = context.Process(target=serve_child, args=(str(state_dir), send), daemon=True)
        self.process.start()
        send.close()
        if not receive.poll(60):
            self.process.kill()
            raise AssertionError("the control plane child did not start")
        self.url: str = receive.recv()
        receive.close()
        self.http = httpx.Client(base_url=self.url, trust_env=False, timeout=30)

    def kill(self) -> None:
        self.http.close()
        self.process.kill()  # SIGKILL: no handler, no flush, no shutdown
        self.process.join(30)
        assert self.process.exitcode == -9


@pytest.fixture
def children() -> Iterator[list[Child]]:
    """Every child a test started; the ones still alive are killed however the test ends."""
    started: list[Child] = []
    yield started
    for child in started:
        if child.process.is_alive():
            child.kill()


def _wait_published(child: Child, run_id: str) -> None:
    deadline = time.monotonic() + 60
    while child.http.get(f"/v1/openenv/runs/{run_id}").json()["state"] not in TERMINAL:
        assert time.monotonic() < deadline, f"run {run_id} did not end"
        time.sleep(0.02)


def _check_bundle(run_dir: Path, status: dict[str, Any]) -> None:
    manifest = {item["kind"]: item for item in status["artifacts"]}
    assert sorted(manifest) == sorted(FILES)
    for kind, name in FILES.items():
        digest = hash_file(run_dir / name, max_bytes=1 << 28)
        assert str(digest.sha256) == manifest[kind]["sha256"]
        assert digest.size_bytes == manifest[kind]["bytes"]
    verify_bundle(run_dir / FILES["summary"])


def _check_restart(
    child: Child, runs_root: Path, acknowledged: dict[str, str], verified: set[str]
) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = child.http.get("/v1/openenv/runs").json()["runs"]
    ids = [run["run_id"] for run in runs]
    assert len(ids) == len(set(ids)), "a run is listed twice"
    keys = [run["request"].get("idempotency_key") for run in runs]
    assert len(keys) == len(set(keys)), "two runs share an idempotency key"
    by_key = {run["request"]["idempotency_key"]: run for run in runs}
    for key, run_id in acknowledged.items():
        assert key in by_key, f"acknowledged run {run_id} ({key}) was lost"
        assert by_key[key]["run_id"] == run_id
    for run in runs:
        state = run["state"]
        if state == "failed" and run["failure"]["stage"] == "restoration":
            assert run["failure"]["code"] == "run_interrupted"
            assert run["failure"]["retryable"] is True
        elif state == "queued":
            assert run["admission"]["queue_position"] >= 1
        else:
            assert state in TERMINAL or run["admission"].get("admitted_unix_ms") is not None
        if run.get("artifacts") and run["run_id"] not in verified:
            _check_bundle(runs_root / run["run_id"], run)
            verified.add(run["run_id"])
    return runs


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(
    spawner: Any, bandit: OracleHandle, tmp_path: Path, children: list[Child]
) -> None:
    rng = random.Random(SEED)
    state_dir = tmp_path / "state"
    runs_root = state_dir / ".openenv" / "runs"
    acknowledged: dict[str, str] = {}
    verified: set[str] = set()
    previous_keys: list[str] = []
    interrupted = 0
    child = Child(spawner, state_dir)
    children.append(child)
    for trial in range(TRIALS):
        for key in previous_keys:  # retries of the previous trial, after its kill
            answer = child.http.post(
                "/v1/openenv/runs", json=small_request(bandit.base_url, idempotency_key=key)
            )
            assert answer.status_code in (200, 202), answer.text
            if key in acknowledged:
                assert answer.status_code == 200
                assert answer.json()["run_id"] == acknowledged[key]
            acknowledged[key] = answer.json()["run_id"]
        keys = [f"trial-{trial}.run-{index}" for index in range(RUNS_PER_TRIAL)]
        for key in keys:
            answer = child.http.post(
                "/v1/openenv/runs", json=small_request(bandit.base_url, idempotency_key=key)
            )
            assert answer.status_code == 202, answer.text
            acknowledged[key] = answer.json()["run_id"]
        previous_keys = keys
        if trial % COMPLETE_EVERY == COMPLETE_EVERY - 1:
            _wait_published(child, acknowledged[keys[0]])  # a kill after a publication
        else:
            time.sleep(rng.uniform(0.0, MAX_KILL_DELAY_S))  # 0: right after the 202
        child.kill()
        child = Child(spawner, state_dir)
        children.append(child)
        runs = _check_restart(child, runs_root, acknowledged, verified)
        interrupted = sum(
            1
            for run in runs
            if run["state"] == "failed" and run["failure"]["code"] == "run_interrupted"
        )
    for run in child.http.get("/v1/openenv/runs").json()["runs"]:
        if run["state"] == "queued":  # a resumed queue is cancellable like any other
            assert child.http.delete(f"/v1/openenv/runs/{run['run_id']}").status_code == 200
    deadline = time.monotonic() + 120
    while True:
        runs = child.http.get("/v1/openenv/runs").json()["runs"]
        if all(run["state"] in TERMINAL for run in runs):
            break
        assert time.monotonic() < deadline, "runs left non-terminal after the last restart"
        time.sleep(0.05)
    _check_restart(child, runs_root, acknowledged, verified)
    child.kill()
    assert len(runs) == len(acknowledged) == TRIALS * RUNS_PER_TRIAL
    admitted = sorted(
        (run["admission"]["admitted_unix_ms"], run["admission"]["sequence"])
        for run in runs
        if run["admission"].get("admitted_unix_ms") is not None
    )
    for (t1, s1), (t2, s2) in itertools.pairwise(admitted):
        assert t1 == t2 or s1 < s2, "queued runs were not admitted in sequence order"
    ready = sum(1 for run in runs if run["state"] == "rollout_ready")
    assert interrupted > 0, "no kill interrupted an admitted run; the trials prove nothing"
    assert ready > 0, "no run completed; the trials prove nothing"
    assert len(verified) == ready
