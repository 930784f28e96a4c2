"""Restart semantics of the run registry on a state directory (§12, the seed's admission).

A registry is abandoned without shutdown (what SIGKILL leaves on disk) and a new one
restores the same directory. Executors here never touch the network: one blocks forever,
so a run stays admitted; the real executor is exercised in the last test.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from kiln_verify.control.admission import parse_run_request
from kiln_verify.control.config import CredentialHandle
from kiln_verify.control.kind import with_executor
from kiln_verify.control.kinds import KINDS
from kiln_verify.control.registry import RunRegistry
from kiln_verify.control.store import RunStore
from kiln_verify.errors import ApiIdempotencyConflict
from kiln_verify.limits import MAX_RUN_STATUS_BYTES
from kiln_verify.server.runner import start_in_thread
from oracle.runner import ServerConfig, start_servers
from tests.control.support import config, small_request, wait_terminal

URL = "http://127.0.0.1:1"


async def _blocked(registry: RunRegistry, run_id: str, controls: object = None) -> None:
    await asyncio.Event().wait()


def _registry(state: Path, clock: Any = None, **openenv: Any) -> RunRegistry:
    settings = config(state, **openenv)
    kwargs = {"clock": clock} if clock is not None else {}
    return RunRegistry(
        settings, RunStore(settings.runs_root), with_executor(KINDS, _blocked), **kwargs
    )


def _submit(state: Path, bodies: list[dict[str, Any]], **openenv: Any) -> list[str]:
    """Submit into a fresh registry with one slot, then abandon it (no shutdown)."""

    async def main() -> list[str]:
        registry = _registry(state, max_active_runs=1, **openenv)
        registry.restore()
        ids = [registry.submit(parse_run_request(body))[0].run_id for body in bodies]
        await asyncio.sleep(0)
        registry.shutting_down = True  # like SIGKILL: nothing more is admitted or written
        return ids

    return asyncio.run(main())


def _restored(state: Path, clock: Any = None, **openenv: Any) -> tuple[RunRegistry, int]:
    registry = _registry(state, clock, **openenv)
    return registry, registry.restore()


def _on_disk(state: Path, run_id: str) -> dict[str, Any]:
    path = state / ".openenv" / "runs" / run_id / "run.json"
    document: dict[str, Any] = json.loads(path.read_bytes())
    return document


def test_queued_runs_resume_in_order_and_admitted_ones_fail_interrupted(tmp_path: Path) -> None:
    bodies = [small_request(URL, idempotency_key=f"k{i}") for i in range(4)]
    active, *queued = _submit(tmp_path, bodies)
    registry, resumed = _restored(tmp_path, max_active_runs=1)
    assert resumed == 3
    interrupted = registry.get(active)
    assert interrupted.state == "failed"
    assert interrupted.failure is not None
    assert (interrupted.failure.code, interrupted.failure.stage) == (
        "run_interrupted",
        "restoration",
    )
    assert interrupted.failure.retryable is True
    assert interrupted.error == interrupted.failure.message
    assert _on_disk(tmp_path, active)["state"] == "failed"  # persisted, not just in memory
    positions = [registry.get(run_id).admission.queue_position for run_id in queued]  # type: ignore[union-attr]
    assert positions == [1, 2, 3]
    assert [registry.get(r).admission.sequence for r in queued] == [2, 3, 4]  # type: ignore[union-attr]
    assert registry.metrics.runs["resumed"] == 3
    assert registry.metrics.failures[("restoration", "true")] == 1
    # bindings survive: an exact retry replays, a changed one conflicts
    assert registry.replay(parse_run_request(bodies[1])).run_id == queued[0]  # type: ignore[union-attr]
    with pytest.raises(ApiIdempotencyConflict):
        registry.replay(parse_run_request({**bodies[1], "groups": 2}))

    async def admit_next() -> None:
        registry.pump()
        await asyncio.sleep(0)

        assert registry.get(queued[0]).state == "discovering"
        assert registry.get(queued[1]).admission.queue_position == 1  # type: ignore[union-attr]
        new = registry.submit(parse_run_request(small_request(URL)))[0]
        assert new.admission.sequence == 5  # type: ignore[union-attr]
        registry.shutting_down = True

    asyncio.run(admit_next())


def test_a_second_restart_changes_nothing_further(tmp_path: Path) -> None:
    ids = _submit(tmp_path, [small_request(URL) for _ in range(2)])
    _restored(tmp_path)
    before = {run_id: _on_disk(tmp_path, run_id) for run_id in ids}
    registry, resumed = _restored(tmp_path)
    assert resumed == 1
    after = {run_id: _on_disk(tmp_path, run_id) for run_id in ids}
    assert before[ids[0]] == after[ids[0]]  # the interrupted record is final
    assert registry.get(ids[0]).state == "failed"


def test_terminal_runs_expire_after_the_ttl(tmp_path: Path) -> None:
    ids = _submit(tmp_path, [small_request(URL, idempotency_key="old"), small_request(URL)])
    now = 1_000_000_000_000
    registry, _ = _restored(tmp_path, clock=lambda: now)
    assert registry.get(ids[0]).state == "failed"  # finished "now"
    later = now + 61_000
    registry, resumed = _restored(tmp_path, clock=lambda: later, tracked_run_ttl_secs=60)
    assert resumed == 1
    assert [status.run_id for status in registry.list()] == [ids[1]]
    assert registry.replay(parse_run_request(small_request(URL, idempotency_key="old"))) is None
    assert (tmp_path / ".openenv" / "runs" / ids[0] / "run.json").is_file()  # kept on disk


def test_more_queued_runs_than_the_tracked_bound_fail_admission(tmp_path: Path) -> None:
    ids = _submit(tmp_path, [small_request(URL) for _ in range(4)], max_tracked_runs=8)
    registry, resumed = _restored(tmp_path, max_tracked_runs=2, max_active_runs=1)
    assert resumed == 2
    assert [registry.get(run_id).state for run_id in ids[1:3]] == ["queued", "queued"]
    dropped = _on_disk(tmp_path, ids[3])
    assert dropped["state"] == "failed"
    assert (dropped["failure"]["code"], dropped["failure"]["stage"]) == (
        "run_admission_failed",
        "restoration",
    )
    assert dropped["failure"]["retryable"] is True
    assert len(registry.list()) == 2


def test_unreadable_entries_are_skipped_and_residue_ignored(tmp_path: Path) -> None:
    ids = _submit(tmp_path, [small_request(URL) for _ in range(3)])
    root = tmp_path / ".openenv" / "runs"
    (root / ids[1] / "run.json").write_bytes(b'{"schema": "kiln.openenv-run.v5"')  # torn
    (root / ids[2] / "run.json").write_bytes(b" " * (MAX_RUN_STATUS_BYTES + 1))
    (root / ".deadbeef.incomplete-0011223344556677").mkdir()
    (root / "not-a-run").mkdir()
    os.symlink(root / ids[0], root / "00000000-0000-4000-8000-000000000000")
    registry, _ = _restored(tmp_path)
    assert [status.run_id for status in registry.list()] == [ids[0]]
    skipped = " ".join(registry.restore_skipped)
    assert ids[1] in skipped
    assert ids[2] in skipped
    assert "00000000-0000-4000-8000-000000000000: not a directory" in skipped


TOKEN_ENV = "KILN_TEST_RESTORE_TOKEN"


def test_a_retained_request_the_new_configuration_refuses_is_persisted_contract_invalid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "restore-token")
    slow, guarded = start_servers(
        [
            ServerConfig("bandit", faults=("delay-step=0.2",)),
            ServerConfig("bandit", faults=(f"require-bearer={TOKEN_ENV}",)),
        ]
    )
    handle = {"guarded": CredentialHandle(guarded.base_url, TOKEN_ENV)}
    first = config(tmp_path, max_active_runs=1, credentials=handle)
    try:
        server = start_in_thread(first)
        with httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as http:
            busy = http.post(
                "/v1/openenv/runs", json=small_request(slow.base_url, groups=4, max_steps=8)
            ).json()
            waiting = http.post(
                "/v1/openenv/runs", json=small_request(guarded.base_url, credential_ids=["guarded"])
            ).json()
            assert waiting["state"] == "queued"
        server.stop()  # a clean stop records nothing: the next start decides
        second = dataclasses.replace(
            first, openenv=dataclasses.replace(first.openenv, credentials={})
        )
        server = start_in_thread(second)
        with httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as http:
            stopped = http.get(f"/v1/openenv/runs/{busy['run_id']}").json()
            assert stopped["failure"]["code"] == "run_interrupted"
            refused = wait_terminal(http, waiting["run_id"])
        server.stop()
    finally:
        slow.stop()
        guarded.stop()
    assert refused["state"] == "failed"
    failure = refused["failure"]
    assert (failure["code"], failure["stage"], failure["retryable"]) == (
        "persisted_contract_invalid",
        "discovery",
        False,
    )
    assert "guarded" in failure["message"]


def test_a_run_cancelled_before_its_task_starts_is_settled(tmp_path: Path) -> None:
    async def main() -> None:
        registry = _registry(tmp_path, max_active_runs=1)
        registry.restore()
        status, _ = registry.submit(parse_run_request(small_request(URL)))
        registry.pump()  # admitted: its task exists but has not run a single step
        assert registry.active(status.run_id) is not None
        cancelled = await registry.cancel(status.run_id)
        assert cancelled.state == "cancelled"
        assert registry.active(status.run_id) is None
        assert registry.gauges().active == 0
        assert _on_disk(tmp_path, status.run_id)["state"] == "cancelled"

    asyncio.run(main())
