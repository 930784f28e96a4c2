"""``run.json`` v5 records written before issue 26 still restore, byte for byte.

``data/run_json_v5/`` holds five run directories written by ``kiln-verify serve`` at
commit 8b09eff (before the control plane was split into run kinds and route families):
a finished rollout with its three published files, a failed one (an unreachable
environment), one cancelled while queued, one interrupted while collecting (the server was
stopped) and one still queued. A restart on a state directory holding them must find every
run, resume the queued one and fail the interrupted one exactly as before, and serve the
finished run's artifacts.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import httpx

from kiln_verify.control.artifacts import open_verified
from kiln_verify.control.kind import with_executor
from kiln_verify.control.kinds import KINDS
from kiln_verify.control.registry import RunRegistry
from kiln_verify.control.store import RunStore
from kiln_verify.limits import MAX_SERVER_TTL_S
from kiln_verify.server.runner import start_in_thread
from kiln_verify.testing.serve import ServeProcess
from tests.control.support import config

DATA = Path(__file__).parent / "data" / "run_json_v5"
IDS: dict[str, str] = json.loads((DATA / "ids.json").read_text())
NOW = 1796515900000  # a few seconds after the records were written


async def _blocked(registry: RunRegistry, run_id: str, controls: object = None) -> None:
    await asyncio.Event().wait()


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    runs = state / ".openenv" / "runs"
    runs.mkdir(parents=True)
    for run_id in IDS.values():
        shutil.copytree(DATA / run_id, runs / run_id)
    return state


def _registry(state: Path, **openenv: Any) -> RunRegistry:
    settings = config(state, **openenv)
    return RunRegistry(
        settings, RunStore(settings.runs_root), with_executor(KINDS, _blocked), clock=lambda: NOW
    )


def test_every_v5_record_restores(tmp_path: Path) -> None:
    state = _state(tmp_path)
    registry = _registry(state, max_active_runs=1)
    assert registry.restore() == 1
    assert registry.restore_skipped == []
    states = {name: registry.get(run_id).state for name, run_id in IDS.items()}
    assert states == {
        "finished": "rollout_ready",
        "failed": "failed",
        "interrupted": "failed",
        "cancelled": "cancelled",
        "queued": "queued",
    }
    interrupted = registry.get(IDS["interrupted"])
    assert interrupted.failure is not None
    assert interrupted.failure.code == "run_interrupted"
    failed = registry.get(IDS["failed"])
    assert failed.failure is not None
    assert failed.failure.code == "environment_unavailable"
    queued = registry.get(IDS["queued"])
    assert queued.admission is not None
    assert queued.admission.queue_position == 1
    # records that stay as they were are not rewritten
    for name in ("finished", "failed", "cancelled"):
        path = state / ".openenv" / "runs" / IDS[name] / "run.json"
        assert path.read_bytes() == (DATA / IDS[name] / "run.json").read_bytes()
        assert registry.get(IDS[name]).to_json() == json.loads(path.read_bytes())
    # the idempotency bindings of retained runs survive
    assert registry._keys == {
        "v5-finished": IDS["finished"],
        "v5-cancelled": IDS["cancelled"],
        "v5-queued": IDS["queued"],
    }


def test_the_finished_runs_artifacts_verify_after_restore(tmp_path: Path) -> None:
    state = _state(tmp_path)
    registry = _registry(state)
    registry.restore()
    finished = registry.get(IDS["finished"])
    assert finished.artifacts is not None
    for artifact in finished.artifacts:
        fd, entry = open_verified(
            finished,
            registry.store.run_dir(finished.run_id),
            artifact.kind,
            registry.artifacts(finished),
        )
        try:
            assert entry == artifact
        finally:
            os.close(fd)


def test_a_server_restarted_on_v5_records_lists_and_serves_them(tmp_path: Path) -> None:
    state = _state(tmp_path)
    # one slot, held by nothing: the queued run resumes (and fails, its environment is gone)
    handle = start_in_thread(config(state, tracked_run_ttl_secs=MAX_SERVER_TTL_S))
    try:
        with httpx.Client(base_url=handle.base_url, trust_env=False, timeout=60) as http:
            listed = http.get("/v1/openenv/runs").json()
            assert {run["run_id"] for run in listed["runs"]} == set(IDS.values())
            finished = http.get(f"/v1/openenv/runs/{IDS['finished']}").json()
            assert finished["state"] == "rollout_ready"
            for artifact in finished["artifacts"]:
                answer = http.get(artifact["url"])
                assert answer.status_code == 200
                assert answer.headers["etag"] == f'"{artifact["sha256"]}"'
                assert len(answer.content) == artifact["bytes"]
            retry = http.post(
                "/v1/openenv/runs", json=finished["request"] | {"idempotency_key": "v5-finished"}
            )
            assert retry.status_code == 200
            assert retry.json()["run_id"] == IDS["finished"]
    finally:
        handle.stop()


def test_kiln_verify_serve_restarted_on_v5_records_finds_every_run(tmp_path: Path) -> None:
    # the records' terminal runs ended in December 2026: keep them past the default TTL
    settings = tmp_path / "kiln.toml"
    settings.write_text(f"[openenv]\ntracked_run_ttl_secs = {MAX_SERVER_TTL_S}\n")
    process = ServeProcess(_state(tmp_path), "--config", str(settings))
    try:
        with httpx.Client(base_url=process.url, trust_env=False, timeout=60) as http:
            listed = http.get("/v1/openenv/runs").json()["runs"]
            assert {run["run_id"] for run in listed} == set(IDS.values())
            interrupted = http.get(f"/v1/openenv/runs/{IDS['interrupted']}").json()
            assert interrupted["failure"]["code"] == "run_interrupted"
            cancelled = http.get(f"/v1/openenv/runs/{IDS['cancelled']}").json()
            assert cancelled["state"] == "cancelled"
    finally:
        assert process.stop() == 0
