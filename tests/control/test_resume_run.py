"""An interrupted server-owned rollout run, resumed as a new attempt (kiln-verify's own route).

A control-plane process (forked from a preloaded fork server, as in ``test_kill_restart``)
collects from an oracle whose steps answer 0.1 s late and is SIGKILLed once some groups
are journaled. Restarted on the same state directory, the run is ``failed`` with
``run_interrupted`` and keeps its journal; ``kiln-verify openenv resume RUN_ID --follow``
creates a new run that takes the journal over (the journaled entries are the same files,
never rewritten) and publishes the bytes an uninterrupted run of the same request
publishes. A second resume, a resume of a completed run and of an unknown id are refused.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.control.config import PolicySpec
from kiln_verify.control.layout import RESUMED_AS_FILE, RESUMED_FROM_FILE, RUN_JOURNAL_DIR
from oracle.runner import ServerHandle as OracleHandle
from tests.control.kill_child import serve_child
from tests.control.support import client_of, control_server, small_request, wait_terminal

FILES = ("openenv.rollouts.jsonl", "openenv.replay.json", "openenv.rollout-summary.json")
GROUPS = 8
JOURNALED_BEFORE_KILL = 3


class _Child:
    def __init__(self, context: Any, state_dir: Path) -> None:
        receive, send = context.Pipe(duplex=False)
        self.process = context.Process(target=serve_child, args=(str(state_dir), send), daemon=True)
        self.process.start()
        send.close()
        assert receive.poll(60), "the control plane child did not start"
        self.url: str = receive.recv()
        receive.close()
        self.http = httpx.Client(base_url=self.url, trust_env=False, timeout=30)

    def kill(self) -> None:
        self.http.close()
        self.process.kill()
        self.process.join(30)
        assert self.process.exitcode == -9


def _entries(journal: Path) -> dict[str, int]:
    """Group entry name -> inode (a moved journal keeps its files' inodes)."""
    if not journal.is_dir():
        return {}
    return {p.name: p.stat().st_ino for p in journal.glob("group-*.entry")}


def _code(answer: httpx.Response) -> str:
    code: str = answer.json()["error"]["code"]
    return code


def test_an_interrupted_run_resumes_to_the_uninterrupted_bytes(
    slow_bandit: OracleHandle, tmp_path: Path
) -> None:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.control.kill_child"])
    state = tmp_path / "state"
    runs_root = state / ".openenv" / "runs"
    body = small_request(slow_bandit.base_url, groups=GROUPS)
    children: list[_Child] = []
    try:
        child = _Child(context, state)
        children.append(child)
        created = child.http.post("/v1/openenv/runs", json={**body, "idempotency_key": "k1"})
        assert created.status_code == 202, created.text
        old_id = created.json()["run_id"]
        journal = runs_root / old_id / RUN_JOURNAL_DIR
        deadline = time.monotonic() + 60
        while len(_entries(journal)) < JOURNALED_BEFORE_KILL:
            assert time.monotonic() < deadline, "no groups were journaled"
            time.sleep(0.01)
        child.kill()
        before = _entries(journal)
        assert JOURNALED_BEFORE_KILL <= len(before) < GROUPS

        child = _Child(context, state)
        children.append(child)
        old = child.http.get(f"/v1/openenv/runs/{old_id}").json()
        assert old["state"] == "failed"
        assert old["failure"]["code"] == "run_interrupted"
        assert "artifacts" not in old or old["artifacts"] is None
        assert _entries(journal) == before  # the restart keeps the journal
        # an uninterrupted run of the same request, beside the resumed one
        plain = child.http.post("/v1/openenv/runs", json=body)
        assert plain.status_code == 202, plain.text

        resumed = CliRunner().invoke(
            app, ["openenv", "resume", old_id, "--follow", "--json", "--url", child.url]
        )
        assert resumed.exit_code == 0, resumed.output
        new = json.loads(resumed.stdout)
        new_id = new["run_id"]
        assert new_id != old_id
        assert new["state"] == "rollout_ready"
        assert new["request"] == old["request"]
        assert f"resumed run {old_id} as run {new_id}" in resumed.stderr
        moved = _entries(runs_root / new_id / RUN_JOURNAL_DIR)
        assert len(moved) == GROUPS
        assert {name: moved[name] for name in before} == before  # continued, not redone
        assert not journal.exists()
        link = json.loads((runs_root / new_id / RESUMED_FROM_FILE).read_text())
        assert link == json.loads((runs_root / old_id / RESUMED_AS_FILE).read_text())
        assert link["resumed_from"] == old_id
        assert link["resumed_as"] == new_id

        plain_status = wait_terminal(child.http, plain.json()["run_id"])
        assert plain_status["state"] == "rollout_ready"
        for name in FILES:
            resumed_bytes = (runs_root / new_id / name).read_bytes()
            assert resumed_bytes == (runs_root / plain_status["run_id"] / name).read_bytes()
        assert [a["sha256"] for a in new["artifacts"]] == [
            a["sha256"] for a in plain_status["artifacts"]
        ]
        # the idempotency key now binds the newest run (as after a restart)
        again = child.http.post("/v1/openenv/runs", json={**body, "idempotency_key": "k1"})
        assert again.status_code == 200
        assert again.json()["run_id"] == new_id

        for run_id in (old_id, new_id):  # resumed already; completed
            refused = child.http.post(f"/v1/openenv/runs/{run_id}/resume")
            assert refused.status_code == 409
            assert _code(refused) == "openenv_run_not_resumable"
        unknown = child.http.post(f"/v1/openenv/runs/{'0' * 8}-0000-4000-8000-{'0' * 12}/resume")
        assert unknown.status_code == 404
        assert _code(unknown) == "openenv_run_not_found"
        cli = CliRunner().invoke(app, ["openenv", "resume", new_id, "--url", child.url])
        assert cli.exit_code != 0
        assert "openenv_run_not_resumable" in cli.output
        document = child.http.get("/openapi.json").json()
        route = document["paths"]["/v1/openenv/runs/{run_id}/resume"]["post"]
        assert route["summary"].startswith("kiln-verify extension (not Kiln's)")
        runs = child.http.get("/v1/openenv/runs").json()["runs"]
        assert len(runs) == 3  # no run created by a refusal
        child.kill()
    finally:
        for started in children:
            if started.process.is_alive():
                started.kill()
    assert os.path.isdir(runs_root / old_id)


def test_a_resume_under_another_policy_fails_with_the_journal_code(
    slow_bandit: OracleHandle, tmp_path: Path
) -> None:
    """The new attempt runs ``--resume``'s checks: the server's policy for the adapter
    changed across the restart, so the journal's behaviour policy no longer matches."""
    state = tmp_path / "state"
    body = small_request(slow_bandit.base_url, groups=GROUPS)
    with control_server(state) as first, client_of(first) as http:
        old_id = http.post("/v1/openenv/runs", json=body).json()["run_id"]
        journal = state / ".openenv" / "runs" / old_id / RUN_JOURNAL_DIR
        deadline = time.monotonic() + 60
        while not _entries(journal):
            assert time.monotonic() < deadline, "no group was journaled"
            time.sleep(0.01)
    # a clean stop records nothing: the restart fails the run as interrupted
    script = tmp_path / "script.json"
    script.write_text('["0"]', encoding="utf-8")
    other = {"base": PolicySpec("scripted", {"script": str(script)})}
    with control_server(state, policies=other) as second, client_of(second) as http:
        assert http.get(f"/v1/openenv/runs/{old_id}").json()["failure"]["code"] == (
            "run_interrupted"
        )
        created = http.post(f"/v1/openenv/runs/{old_id}/resume")
        assert created.status_code == 202, created.text
        new = wait_terminal(http, created.json()["run_id"])
    assert new["state"] == "failed"
    assert "journal_controls_changed" in new["failure"]["message"]
    assert "policy" in new["failure"]["message"]
    assert new.get("artifacts") is None
