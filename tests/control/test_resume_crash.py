"""A server killed at every step of the resume route, restarted over what the crash left.

The resume route's steps (:mod:`kiln_verify.control.resume`, "Crashes"): the new run's
``run.json``, its ``resumed-from.json``, the old run's ``resumed-as.json``, the journal's
``rename`` (the commit), the fsyncs. A control-plane child (forked from a preloaded fork
server, :mod:`tests.control.crash_child`) SIGKILLs itself at one of them while answering
``POST /v1/openenv/runs/{id}/resume`` for a run interrupted with journaled groups; the
state is then restarted in this process. Whatever the point, exactly one run continues
the journal's groups (the same entry files), the old run is resumable exactly while it
still holds the journal, the orphaned new attempt is queued again and publishes the
uninterrupted bytes, and so does the attempt that continues the journal.
"""

from __future__ import annotations

import multiprocessing
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from kiln_verify.control.layout import RESUMED_AS_FILE, RESUMED_FROM_FILE, RUN_JOURNAL_DIR
from oracle.runner import ServerHandle as OracleHandle
from tests.control.crash_child import JOURNAL_MOVED, POINTS, serve_crashing
from tests.control.support import (
    client_of,
    control_server,
    run_to_end,
    small_request,
    wait_terminal,
)

FILES = ("openenv.rollouts.jsonl", "openenv.replay.json", "openenv.rollout-summary.json")
GROUPS = 4
JOURNALED = 2
RUNS = Path(".openenv") / "runs"


@dataclass(frozen=True, slots=True)
class Interrupted:
    """A state directory with an uninterrupted run and one stopped with journaled groups."""

    state: Path
    plain_id: str
    old_id: str
    body: dict[str, object]


def _entries(journal: Path) -> dict[str, int]:
    """Group entry name -> inode (a moved journal keeps its files' inodes)."""
    if not journal.is_dir():
        return {}
    return {p.name: p.stat().st_ino for p in journal.glob("group-*.entry")}


def _bundle(run_dir: Path) -> list[bytes]:
    return [(run_dir / name).read_bytes() for name in FILES]


@pytest.fixture(scope="module")
def interrupted(slow_bandit: OracleHandle, tmp_path_factory: pytest.TempPathFactory) -> Interrupted:
    state = tmp_path_factory.mktemp("interrupted") / "state"
    body = small_request(slow_bandit.base_url, groups=GROUPS)
    with control_server(state) as server, client_of(server) as http:
        plain = run_to_end(http, body)
        assert plain["state"] == "rollout_ready", plain
        old_id = http.post("/v1/openenv/runs", json=body).json()["run_id"]
        journal = state / RUNS / old_id / RUN_JOURNAL_DIR
        deadline = time.monotonic() + 60
        while len(_entries(journal)) < JOURNALED:
            assert time.monotonic() < deadline, "no groups were journaled"
            time.sleep(0.01)
    # a clean stop records nothing: the next start fails the run with run_interrupted
    assert JOURNALED <= len(_entries(journal)) < GROUPS
    return Interrupted(state, plain["run_id"], old_id, body)


def _crash(state: Path, old_id: str, point: str) -> None:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.control.crash_child"])
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=serve_crashing, args=(str(state), send, point), daemon=True)
    child.start()
    send.close()
    try:
        assert receive.poll(60), "the control plane child did not start"
        url = receive.recv()
        with httpx.Client(base_url=url, trust_env=False, timeout=30) as http:
            assert http.get(f"/v1/openenv/runs/{old_id}").json()["failure"]["code"] == (
                "run_interrupted"
            )
            with pytest.raises(httpx.TransportError):
                http.post(f"/v1/openenv/runs/{old_id}/resume")
        child.join(30)
        assert child.exitcode == -9
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
            child.join(30)


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_in_a_resume_loses_no_journaled_group(
    interrupted: Interrupted, tmp_path: Path, point: str
) -> None:
    state = tmp_path / "state"
    shutil.copytree(interrupted.state, state, symlinks=True)
    runs = state / RUNS
    old_dir = runs / interrupted.old_id
    before = _entries(old_dir / RUN_JOURNAL_DIR)
    reference = _bundle(runs / interrupted.plain_id)

    _crash(state, interrupted.old_id, point)

    (new_id,) = {p.name for p in runs.iterdir()} - {interrupted.plain_id, interrupted.old_id}
    new_dir = runs / new_id
    moved = point in JOURNAL_MOVED
    assert (new_dir / RESUMED_FROM_FILE).exists() == (point != "created")
    assert (old_dir / RESUMED_AS_FILE).exists() == (point not in ("created", "resumed_from"))
    assert _entries(old_dir / RUN_JOURNAL_DIR) == ({} if moved else before)
    assert _entries(new_dir / RUN_JOURNAL_DIR) == (before if moved else {})

    with control_server(state) as server, client_of(server) as http:
        old = http.get(f"/v1/openenv/runs/{interrupted.old_id}").json()
        assert old["failure"]["code"] == "run_interrupted"
        # the orphaned attempt was never admitted: queued again, it runs to the end
        orphan = wait_terminal(http, new_id)
        assert orphan["state"] == "rollout_ready", orphan
        assert orphan["request"] == old["request"]
        assert _bundle(new_dir) == reference
        new_entries = _entries(new_dir / RUN_JOURNAL_DIR)
        assert len(new_entries) == GROUPS
        again = http.post(f"/v1/openenv/runs/{interrupted.old_id}/resume")
        if moved:  # the journal is the new run's: continued there, the old run refused
            assert {name: new_entries[name] for name in before} == before
            assert again.status_code == 409, again.text
            assert again.json()["error"]["code"] == "openenv_run_not_resumable"
            return
        # the journal is still the old run's: the orphan collected from group 0, and
        # the old run resumes (again) into an attempt that continues its journal
        assert not set(new_entries.values()) & set(before.values())
        assert again.status_code == 202, again.text
        resumed_id = again.json()["run_id"]
        resumed = wait_terminal(http, resumed_id)
    assert resumed["state"] == "rollout_ready", resumed
    resumed_dir = runs / resumed_id
    assert _bundle(resumed_dir) == reference
    continued = _entries(resumed_dir / RUN_JOURNAL_DIR)
    assert len(continued) == GROUPS
    assert {name: continued[name] for name in before} == before
    assert not (old_dir / RUN_JOURNAL_DIR).exists()
    link = (old_dir / RESUMED_AS_FILE).read_bytes()
    assert link == (resumed_dir / RESUMED_FROM_FILE).read_bytes()
    assert f'"resumed_as": "{resumed_id}"'.encode() in link
