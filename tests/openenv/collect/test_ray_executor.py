"""``openenv rollout --executor ray`` on a local Ray cluster of 2 CPUs, against the oracle.

The oracle here needs a bearer token (``require-bearer``) and answers each step 0.1 s late,
so a range runs long enough to be caught. The Ray workers publish the bytes of one
single-process collection with the same flags, and the token reaches them (they inherit
the variable) without entering any published byte. A worker SIGKILLed inside its range
(found by the process title Ray gives a running task, ``ray::collect_range``) is retried
from scratch to the same bytes; with no retries left the run fails with
``executor_worker_failed`` and publishes nothing. A collector's refusal on a worker (a
credential variable the workers lack) comes back as its own code, any other exception as
``executor_worker_failed`` naming it. Without Ray the command is a usage error naming the
extra; executor flags that do not combine are usage errors. Ray is started once for the
module (its cost: docs/ray.md); one test starts a second cluster with ``ray start --head``
and reaches it by ``--ray-address`` from a driver process, and a cluster Ray cannot reach
(its ``ConnectionError`` stubbed: Ray takes minutes to raise it) is
``executor_worker_failed``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from kiln_verify.cli import main
from kiln_verify.errors import CredentialInvalid, ExecutorWorkerFailed
from kiln_verify.openenv.collect import CollectionControls
from kiln_verify.openenv.collect.ray_executor import RaySettings, run_ray, split_plan
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.openenv.verify import verify_bundle
from oracle.runner import ServerConfig, ServerHandle, start_servers
from tests.openenv.collect.journals import NAMES, controls_in, files_of, reference

TOKEN_VAR = "KILN_RAY_TEST_TOKEN"
TOKEN = "ray-test-bearer-7f3a9c"
GROUPS = 6
FLAGS = ("--groups", str(GROUPS), "--group-size", "2", "--max-steps", "3")


@pytest.fixture(scope="module")
def guarded() -> Iterator[ServerHandle]:
    """A local Ray cluster (2 CPUs, no dashboard, worker logs kept off the driver) started
    with the token in its environment, and a bandit that demands that token."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(TOKEN_VAR, TOKEN)
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(
            num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR
        )
        config = ServerConfig("bandit", faults=(f"require-bearer={TOKEN_VAR}", "delay-step=0.1"))
        (handle,) = start_servers([config])
        try:
            yield handle
        finally:
            handle.stop()
            ray.shutdown()


def _run(*args: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["kiln-verify", *args])
    try:
        main()
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 1
    return 0


def _ours(pid: int) -> bool:
    """Whether ``pid`` descends from this process (our cluster's raylet started it), not from
    another test process's cluster running beside this one."""
    while pid > 1:
        if pid == os.getpid():
            return True
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return False


def _range_workers() -> list[int]:
    """Our processes running a range right now (Ray titles a running task ``ray::NAME``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes()
                if title.startswith(b"ray::collect_range") and _ours(int(entry.name)):
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):  # a process that ended meanwhile
                continue
    return found


def _kill_one_worker_in_its_range() -> tuple[threading.Thread, list[int]]:
    killed: list[int] = []

    def hunt() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for pid in _range_workers():
                time.sleep(0.3)  # into its groups (a range takes about 1 s here)
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.01)

    thread = threading.Thread(target=hunt, daemon=True)
    thread.start()
    return thread, killed


def _single_process_bundle(
    guarded: ServerHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[tuple[str, ...], Path, Path]:
    """The rollout's source flags, the folder holding its single-process bundle (collected
    here, in ``single``) and an empty folder for the Ray run's bundle."""
    source = ("--environment", guarded.base_url, "--credential-env", TOKEN_VAR, *FLAGS)
    single, spread = tmp_path / "single", tmp_path / "ray"
    single.mkdir()
    spread.mkdir()
    monkeypatch.chdir(single)
    assert _run("openenv", "rollout", *source, "--json", monkeypatch=monkeypatch) == 0
    return source, single, spread


def test_ray_workers_publish_the_single_process_bytes(
    guarded: ServerHandle,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, single, spread = _single_process_bundle(guarded, tmp_path, monkeypatch)
    monkeypatch.chdir(spread)
    capsys.readouterr()
    args = ("openenv", "rollout", *source, "--executor", "ray", "--workers", "2", "--json")
    assert _run(*args, monkeypatch=monkeypatch) == 0, capsys.readouterr()
    assert json.loads(capsys.readouterr().out)["executor"] == "ray"
    expected = tuple((single / name).read_bytes() for name in NAMES)
    assert tuple((spread / name).read_bytes() for name in NAMES) == expected
    assert sorted(path.name for path in spread.iterdir()) == sorted(NAMES)
    assert not any(TOKEN.encode() in data for data in expected)
    assert verify_bundle(spread / NAMES[2]).rollouts == GROUPS * 2
    assert split_plan(GROUPS, 4) == [range(0, 1), range(1, 3), range(3, 4), range(4, 6)]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _in_session(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid`` but its leader."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != sid:
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # ended meanwhile
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def _stop_session(sid: int) -> None:
    """``ray stop`` for one cluster: it stops every Ray of the machine, so the head's own
    session is stopped by process id (TERM, then KILL after 3 s: Ray 2.60's GCS server and
    autoscaler monitor outlive a TERM by more than 15 s, so a longer grace only idles)."""
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        for pid in _in_session(sid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while _in_session(sid) and time.monotonic() < deadline:
            time.sleep(0.1)


@pytest.fixture
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Ray head started by ``ray start --head`` (2 CPUs) in a session of its own, the
    token variable in its environment; its address. Stopped by session, even on failure.
    Without a log monitor (a Python process, ~0.5 s of CPU): it only streams worker logs
    to drivers that ask for them, and the executor's drivers never do (``log_to_driver``)."""
    ray_cli = Path(sys.executable).with_name("ray")
    temp = Path(tempfile.mkdtemp(prefix="kr-", dir="/tmp"))  # Ray's socket paths stay short
    port = _free_port()
    env = {**os.environ, TOKEN_VAR: TOKEN, "RAY_USAGE_STATS_ENABLED": "0"}
    command = [str(ray_cli), "start", "--head", "--num-cpus", "2", "--port", str(port)]
    command += ["--node-ip-address", "127.0.0.1", "--include-dashboard", "false"]
    command += ["--dashboard-agent-listen-port", str(_free_port()), "--disable-usage-stats"]
    command += ["--temp-dir", str(temp), "--include-log-monitor", "false"]
    log = tmp_path_factory.mktemp("ray-head") / "start.log"
    with log.open("wb") as out:
        head = subprocess.Popen(command, env=env, stdout=out, stderr=out, start_new_session=True)
    try:
        assert head.wait(120) == 0, log.read_text()
        yield f"127.0.0.1:{port}"
    finally:
        if head.poll() is None:
            head.kill()
            head.wait()
        _stop_session(head.pid)
        assert _in_session(head.pid) == []
        shutil.rmtree(temp, ignore_errors=True)


def test_a_cluster_started_by_ray_start_is_reached_by_address(
    guarded: ServerHandle,
    ray_head: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--ray-address`` to a head started by ``ray start`` (docs/ray.md, "A real cluster"):
    the driver is a process of its own (this one already runs the module's cluster, and a
    process initialised by Ray ignores an address), with ``RAY_AUTH_MODE=token``: Ray
    2.60's ``ray start`` turns token authentication on, and a driver that connects by
    address sends the token (``~/.ray/auth_token``) only when told to."""
    source, single, spread = _single_process_bundle(guarded, tmp_path, monkeypatch)
    driver = [str(Path(sys.executable).with_name("kiln-verify")), "openenv", "rollout", *source]
    driver += ["--executor", "ray", "--ray-address", ray_head, "--workers", "2", "--json"]
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop(TOKEN_VAR, None)  # the workers read the token the head was started with
    done = subprocess.run(driver, cwd=spread, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert json.loads(done.stdout)["executor"] == "ray"
    for name in NAMES:
        assert (spread / name).read_bytes() == (single / name).read_bytes(), name
    assert sorted(path.name for path in spread.iterdir()) == sorted(NAMES)


@pytest.fixture(scope="module")
def expected(guarded: ServerHandle) -> tuple[bytes, bytes, bytes]:
    """The single-process bundle of the library tests' controls (relative output names)."""
    return files_of(reference(_controls(guarded)))


def _controls(server: ServerHandle) -> CollectionControls:
    controls = controls_in(Path("."), server.base_url, groups=GROUPS)
    return CollectionControls.create(
        controls.environments,
        credential_envs=[TOKEN_VAR],
        options=controls.options,
        output=controls.output,
        replay_output=controls.replay_output,
        summary_output=controls.summary_output,
    )


def test_a_worker_killed_in_its_range_is_retried_to_the_same_bytes(
    guarded: ServerHandle,
    expected: tuple[bytes, bytes, bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    thread, killed = _kill_one_worker_in_its_range()
    bundle = run_ray(_controls(guarded), RandomPolicy, RaySettings(workers=2, retries=1))
    thread.join()
    assert len(killed) == 1
    assert files_of(bundle) == expected
    assert tuple((tmp_path / name).read_bytes() for name in NAMES) == expected


def test_a_worker_killed_with_no_retry_left_fails_the_run_and_publishes_nothing(
    guarded: ServerHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    thread, killed = _kill_one_worker_in_its_range()
    with pytest.raises(ExecutorWorkerFailed) as failed:
        run_ray(_controls(guarded), RandomPolicy, RaySettings(workers=2, retries=0))
    thread.join()
    assert len(killed) == 1
    assert "retried 0 times" in failed.value.rule
    assert list(tmp_path.iterdir()) == []


def test_a_refusal_on_a_worker_keeps_its_code_a_failure_is_typed_and_nothing_is_published(
    guarded: ServerHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    controls = _controls(guarded)
    unset = dataclasses.replace(controls, credential_envs=("KILN_RAY_TEST_UNSET",))
    with pytest.raises(CredentialInvalid) as refused:  # the workers lack the variable
        run_ray(unset, RandomPolicy, RaySettings(workers=2))
    assert "KILN_RAY_TEST_UNSET" in refused.value.rule

    def broken() -> Policy:  # nested: Ray sends it by value, the workers cannot import tests
        raise RuntimeError("a broken factory")

    with pytest.raises(ExecutorWorkerFailed, match="RuntimeError: a broken factory"):
        run_ray(controls, broken, RaySettings(workers=2))  # not a refusal: a failure
    assert list(tmp_path.iterdir()) == []


def test_without_ray_the_executor_is_a_usage_error_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    argv = ("openenv", "rollout", "--environment", "http://127.0.0.1:1", "--json")
    assert _run(*argv, "--executor", "ray", monkeypatch=monkeypatch) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "executor_unavailable"
    assert "kiln-verify[ray]" in error["hint"]
    for bad in (
        ("--workers", "2"),  # without --executor ray
        ("--ray-address", "auto"),
        ("--executor", "dask"),
        ("--executor", "ray", "--journal", "j"),
        ("--executor", "ray", "--workers", "0"),
        ("--executor", "ray", "--groups", "2", "--workers", "3"),
        ("--executor", "ray", "--policy", "random", "--policy-option", "seed=1"),
        ("--executor", "ray", "--policy", "sampled"),
    ):
        assert _run(*argv, *bad, monkeypatch=monkeypatch) == 2, bad
        code = json.loads(capsys.readouterr().out)["error"]["code"]
        assert code in ("usage", "policy_config_invalid"), bad
    assert _run("openenv", "rollout", "--executor", "ray", "--json", monkeypatch=monkeypatch) == 2
    assert "environment" in json.loads(capsys.readouterr().out)["error"]["rule"]
    assert list(tmp_path.iterdir()) == []
    probe = "import sys, kiln_verify.cli.openenv_rollout; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_a_cluster_that_cannot_be_reached_is_a_typed_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ray's own ``ConnectionError`` from ``ray.init(address=...)`` (a wrong address, or a
    token-authenticated head the driver sends no token to) is ``executor_worker_failed``
    naming ``ray_address``, not a traceback. Ray itself takes from 20 s to 14 minutes to
    give up on an address, so its answer is stubbed here (what it raises, verbatim)."""

    def refuse(**_: object) -> None:
        raise ConnectionError("Failed to connect to Ray cluster at 192.0.2.2:6379")

    stub = types.SimpleNamespace(is_initialized=lambda: False, init=refuse)
    monkeypatch.setitem(sys.modules, "ray", stub)
    monkeypatch.chdir(tmp_path)
    argv = ("openenv", "rollout", "--environment", "http://127.0.0.1:1", "--json")
    assert _run(*argv, "--executor", "ray", "--ray-address", "10.0.0.1:6379",
                monkeypatch=monkeypatch) == 1  # fmt: skip
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "executor_worker_failed"
    assert error["rule"] == (
        "cannot reach the Ray cluster at '10.0.0.1:6379': Failed to connect to Ray cluster "
        "at 192.0.2.2:6379"
    )
    assert "RAY_AUTH_MODE=token" in error["hint"]
    assert list(tmp_path.iterdir()) == []
