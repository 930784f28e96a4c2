"""`kiln-verify openenv runs|start|status|cancel` and `serve` against a real server process."""

from __future__ import annotations

import io
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from kiln_verify.cli import app
from kiln_verify.limits import MAX_CONTROL_REQUEST_BYTES
from kiln_verify.testing.serve import ServeProcess
from oracle.runner import ServerHandle as OracleHandle
from tests.control.support import small_request

runner = CliRunner()


def _cli(serve: ServeProcess, *args: str) -> Result:
    return runner.invoke(app, ["openenv", *args, "--url", serve.url])


def _request_file(tmp_path: Path, body: dict[str, Any], name: str = "run.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def _run_count(serve: ServeProcess) -> int:
    return len(httpx.get(serve.url + "/v1/openenv/runs", trust_env=False).json()["runs"])


def test_start_follow_and_retry_with_the_same_key(
    serve_process: ServeProcess, bandit: OracleHandle, tmp_path: Path
) -> None:
    request = _request_file(tmp_path, small_request(bandit.base_url))
    key = f"cli:{os.getpid()}:{tmp_path.name}"
    first = _cli(
        serve_process,
        "start",
        "--request",
        str(request),
        "--idempotency-key",
        key,
        "--follow",
        "--json",
    )
    assert first.exit_code == 0, first.output
    status = json.loads(first.stdout)
    assert status["state"] == "rollout_ready"
    assert status["request"]["idempotency_key"] == key
    assert f"started run {status['run_id']}" in first.stderr
    assert f"run {status['run_id']}: rollout_ready, groups 1/1, rollouts 2/2" in first.stderr
    again = _cli(serve_process, "start", "--request", str(request), "--idempotency-key", key)
    assert again.exit_code == 0
    assert f"existing run (idempotent retry) {status['run_id']} (rollout_ready)" in again.stdout
    shown = _cli(serve_process, "status", status["run_id"], "--json")
    assert json.loads(shown.stdout) == status
    listed = json.loads(_cli(serve_process, "runs", "--json").stdout)
    assert listed["schema"] == "kiln.openenv-run-list.v5"
    assert status["run_id"] in [run["run_id"] for run in listed["runs"]]
    table = _cli(serve_process, "status", status["run_id"])
    assert "rollout_ready" in table.stdout
    assert "artifact summary" in table.stdout
    refused = _cli(serve_process, "cancel", status["run_id"])
    assert refused.exit_code == 1
    assert "openenv_run_not_cancellable" in refused.stderr


def test_follow_exits_1_with_the_typed_diagnosis(
    serve_process: ServeProcess, tmp_path: Path
) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()
    request = _request_file(tmp_path, small_request(dead))
    result = _cli(serve_process, "start", "--request", str(request), "--follow")
    assert result.exit_code == 1
    assert "run_unsuccessful" in result.stderr
    assert "environment_unavailable at stage discovery (retryable: yes)" in result.stderr
    assert "(fix: " in result.stderr
    assert "failure" in result.stdout  # the status table shows the record as well


def test_request_files_are_checked_before_anything_is_sent(
    serve_process: ServeProcess, bandit: OracleHandle, tmp_path: Path
) -> None:
    body = small_request(bandit.base_url, idempotency_key="in-file")
    regular = _request_file(tmp_path, body)
    link = tmp_path / "link.json"
    link.symlink_to(regular)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * MAX_CONTROL_REQUEST_BYTES + b"{}")
    array = tmp_path / "array.json"
    array.write_text("[1]", encoding="utf-8")
    duplicate = tmp_path / "dup.json"
    duplicate.write_text('{"groups": 1, "groups": 2}', encoding="utf-8")
    before = _run_count(serve_process)
    cases = [
        (["--request", str(link)], "run_request_file_invalid"),
        (["--request", str(big)], "run_request_file_invalid"),
        (["--request", str(array)], "run_request_file_invalid"),
        (["--request", str(duplicate)], "run_request_file_invalid"),
        (["--request", str(tmp_path)], "run_request_file_invalid"),
        (["--request", str(regular), "--idempotency-key", "other"], "idempotency_key_disagrees"),
    ]
    for args, code in cases:
        result = _cli(serve_process, "start", *args)
        assert result.exit_code == 2, (args, result.output)
        assert code in result.stderr
    assert _run_count(serve_process) == before
    same = _cli(serve_process, "start", "--request", str(regular), "--idempotency-key", "in-file")
    assert same.exit_code == 0, same.output


def test_server_refusals_and_bad_arguments(serve_process: ServeProcess, tmp_path: Path) -> None:
    remote = _request_file(tmp_path, small_request("http://example.com"))
    refused = _cli(serve_process, "start", "--request", str(remote))
    assert refused.exit_code == 1
    assert "HTTP 403 'openenv_remote_environment_forbidden'" in refused.stderr
    assert "allow_remote_environments" in refused.stderr  # the server's hint
    unknown = _cli(serve_process, "status", "00000000-0000-4000-8000-000000000000")
    assert unknown.exit_code == 1
    assert "openenv_run_not_found" in unknown.stderr
    malformed = _cli(serve_process, "status", "../../etc/passwd")
    assert malformed.exit_code == 2
    bad_url = runner.invoke(app, ["openenv", "runs", "--url", "ftp://x"])
    assert bad_url.exit_code == 2
    assert "control_url_invalid" in bad_url.stderr
    nowhere = runner.invoke(app, ["openenv", "runs", "--url", "http://127.0.0.1:9"])
    assert nowhere.exit_code == 1
    assert "control_transport" in nowhere.stderr


def test_cancel_a_running_run(serve_process: ServeProcess, tmp_path: Path) -> None:
    # an environment that accepts connections but never answers keeps the run in discovery
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        hanging = f"http://127.0.0.1:{listener.getsockname()[1]}"
        started = _cli(
            serve_process,
            "start",
            "--request",
            str(_request_file(tmp_path, small_request(hanging))),
            "--json",
        )
        run_id = json.loads(started.stdout)["run_id"]
        cancelled = _cli(serve_process, "cancel", run_id, "--json")
        assert cancelled.exit_code == 0, cancelled.output
        assert json.loads(cancelled.stdout)["state"] == "cancelled"
        followed = _cli(serve_process, "status", run_id, "--follow")
        assert followed.exit_code == 1
        assert "ended cancelled" in followed.stderr
    finally:
        listener.close()


def test_serve_refuses_a_bad_configuration(tmp_path: Path) -> None:
    config = tmp_path / "kiln.toml"
    config.write_text("[openenv]\nmax_active_runs = 0\n", encoding="utf-8")
    result = runner.invoke(app, ["serve", "--config", str(config), "--port", "0"])
    assert result.exit_code == 2
    assert "max_active_runs" in result.stderr
    occupied = tmp_path / "a-file"
    occupied.write_bytes(b"")
    unusable = runner.invoke(app, ["serve", "--port", "0", "--state-dir", str(occupied)])
    assert unusable.exit_code == 1
    assert "cannot use the state directory" in unusable.stderr


@pytest.mark.parametrize("command", ["runs", "start", "status", "cancel", "artifact"])
def test_every_command_has_help_and_json(command: str) -> None:
    result = runner.invoke(app, ["openenv", command, "--help"])
    assert result.exit_code == 0
    assert "--url" in result.stdout
    assert "--json" in result.stdout


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_follow_draws_a_progress_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from kiln_verify.cli.control_common import follow_renderer
    from kiln_verify.control.admission import parse_run_request
    from kiln_verify.control.status import RUN_SCHEMA, OpenEnvRunStatus, RunAdmission, RunProgress

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    status = OpenEnvRunStatus(
        schema=RUN_SCHEMA,
        run_id="0d0f3650-9614-4ccc-b507-a98394e2a3c4",
        kind="rollout",
        state="collecting",
        request=parse_run_request({"environment_urls": ["http://h:1"]}),
        submitted_unix_ms=1,
        admission=RunAdmission(max_active_runs=1, sequence=1),
        progress=RunProgress(
            groups_completed=3, groups_total=8, rollouts_completed=12, rollouts_total=32
        ),
    )
    with follow_renderer(True) as show:
        show(status)
    drawn = terminal.getvalue()
    assert "groups (collecting)" in drawn
    assert "3/8" in drawn
    assert "12/32" in drawn
