"""The recorder's worker process: from a training script as users write them, and its
re-inspection and publication jobs against the in-process ones.

A script without an ``if __name__ == "__main__"`` guard is the common case; a worker
started through ``multiprocessing`` (spawn, forkserver) would import that script again in
the child and run its training a second time. The worker is ``python -m
kiln_verify.trl.worker`` instead, so the script's top level runs once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kiln_verify.errors import EnvironmentHttpStatus, KilnError, TargetExists
from kiln_verify.openenv.collect.controls import CollectionOptions
from kiln_verify.trl.batch import reinspect
from kiln_verify.trl.run import OpenEnvRun
from kiln_verify.trl.worker import RecordingWorker
from pytest_kiln.fixtures import OracleFactory

SECRET = "worker-secret-token-5d1c"

SCRIPT = """
import sys
from kiln_verify.trl.identity import BaseModel
from kiln_verify.trl.worker import RecordingWorker

print("top level ran", flush=True)
worker = RecordingWorker(BaseModel(sys.argv[1]).rerender_sources())
options = {"group_size": 2, "stop_ids": frozenset(), "behavior": None, "tokenizer": {},
           "invocation": {}, "sampling": {}}
print("corpus", worker.corpus([], options).result(), flush=True)
print("worker", RecordingWorker.process().pid != 0, flush=True)
"""


def test_a_script_without_a_main_guard_runs_its_top_level_once(
    tool_model: Path, tmp_path: Path
) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    repo = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, str(script), str(tool_model)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": repo},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["top level ran", "corpus b''", "worker True"]


def _options() -> CollectionOptions:
    return CollectionOptions(group_size=2, thinking=False)


def test_the_worker_re_inspects_as_the_run_does_with_its_credential(
    start: OracleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The identity and schema the worker's own client reads equal the run's inspection
    and its in-process re-inspection; the bearer credential travels with the job (a job
    without it gets the server's 401, the client's own error), and no job's answer holds
    the token."""
    monkeypatch.setenv("KILN_WORKER_TOKEN", SECRET)
    handle = start("counter", faults=["require-bearer=KILN_WORKER_TOKEN"])
    run = OpenEnvRun(handle.base_url, options=_options(), credential_env="KILN_WORKER_TOKEN")
    try:
        worker = RecordingWorker()
        identity, schema = worker.inspect(run.url, run.credential()).result(60)
        assert identity == run.inspection.identity
        assert identity.authentication == "bearer"
        assert schema == run.inspection.environment_schema
        assert run.loop.run(reinspect(run.client)) == (identity, schema)
        assert SECRET not in identity.model_dump_json()
        with pytest.raises(EnvironmentHttpStatus, match="401") as refused:
            worker.inspect(run.url, None).result(60)
        assert refused.value.code == "environment_http_status"
        assert SECRET not in str(refused.value)
    finally:
        run.close()


def test_a_credential_the_run_no_longer_has_is_the_client_s_refusal(
    start: OracleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run given ``environ`` keeps reading the token there: a variable removed since the
    run started fails the re-inspection with the client's credential code."""
    monkeypatch.setenv("KILN_WORKER_TOKEN", SECRET)  # the server's
    handle = start("counter", faults=["require-bearer=KILN_WORKER_TOKEN"])
    environ = {"KILN_WORKER_TOKEN": SECRET}
    run = OpenEnvRun(
        handle.base_url, options=_options(), credential_env="KILN_WORKER_TOKEN", environ=environ
    )
    try:
        assert run.credential() == environ
        del environ["KILN_WORKER_TOKEN"]
        with pytest.raises(KilnError) as refused:
            RecordingWorker().inspect(run.url, run.credential()).result(60)
        assert refused.value.code == "credential_invalid"
    finally:
        run.close()


def test_the_worker_publishes_atomically_and_never_replaces(tmp_path: Path) -> None:
    """Exact bytes and the directory mode; a taken target is the publication's own refusal
    (``target_exists``) and what was there is kept; a layout the publisher refuses writes
    nothing."""
    worker = RecordingWorker()
    target = tmp_path / "rank-00000" / "step-000001"
    target.parent.mkdir(parents=True)
    files = {"a.jsonl": b'{"x":1}\n', "adapter/adapter_model.safetensors": bytes(range(256))}
    assert worker.publish(target, files, 0o755).result(60) is None
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*")) == [
        "a.jsonl", "adapter", "adapter/adapter_model.safetensors"
    ]  # fmt: skip
    assert (target / "adapter" / "adapter_model.safetensors").read_bytes() == bytes(range(256))
    assert target.stat().st_mode & 0o777 == 0o755
    with pytest.raises(TargetExists) as taken:
        worker.publish(target, {"a.jsonl": b"other"}, 0o755).result(60)
    assert taken.value.code == "target_exists"
    assert (target / "a.jsonl").read_bytes() == b'{"x":1}\n'
    other = tmp_path / "rank-00000" / "step-000002"
    with pytest.raises(KilnError) as refused:
        worker.publish(other, {"d": b"file", "d/e": b"and directory"}, 0o755).result(60)
    assert refused.value.code == "path_invalid"
    assert sorted(p.name for p in target.parent.iterdir()) == ["step-000001"]
