"""`oracle.runner` (in-process servers) and `kiln-verify oracle list|serve`."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from oracle.faults import FaultError
from oracle.inventory import SERVERS
from oracle.runner import ServerConfig, ServerHandle, serve, start_server
from tests.oracle.serverkit import TinyEnvironment, ask, open_ws

URL = re.compile(r"http://127\.0\.0\.1:(\d+)")


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_serve_starts_many_servers_and_stops_them_all() -> None:
    with serve(["counter", ServerConfig("bandit", max_sessions=1)]) as (counter, bandit):
        assert (counter.name, bandit.name) == ("counter", "bandit")
        assert counter.port != bandit.port
        assert URL.fullmatch(counter.base_url)
        assert counter.ws_url == counter.base_url.replace("http://", "ws://") + "/ws"
        assert httpx.get(counter.base_url + "/metadata").json()["name"] == "CounterEnvironment"
        assert httpx.get(bandit.base_url + "/list_environments").json() == ["bandit_env"]
        with open_ws(bandit.ws_url) as ws:
            ask(ws, {"type": "reset", "data": {"seed": 1}})
            assert bandit.active_sessions == 1
        ports = (counter.port, bandit.port)
    assert all(_refused(port) for port in ports)
    assert not counter.running


def test_single_spec_and_explicit_port() -> None:
    with socket.socket() as finder:
        finder.bind(("127.0.0.1", 0))
        port = finder.getsockname()[1]
    with serve(ServerConfig("tiny", port=port, environment=TinyEnvironment)) as [handle]:
        assert handle.port == port
        assert handle.base_url == f"http://127.0.0.1:{port}"
        with pytest.raises(OSError, match="in use"):  # the port is taken now
            start_server(ServerConfig("tiny", port=port, environment=TinyEnvironment))
    handle.stop()  # idempotent


@pytest.mark.parametrize(
    ("config", "error"),
    [
        (ServerConfig("nope"), KeyError),
        (ServerConfig("tiny", environment=TinyEnvironment, faults=["bogus"]), FaultError),
        (ServerConfig("tiny", environment=TinyEnvironment, max_sessions=0), ValueError),
    ],
)
def test_start_failures_raise(config: ServerConfig, error: type[Exception]) -> None:
    with pytest.raises(error):
        start_server(config)


def test_handles_are_independent() -> None:
    handles = [start_server(ServerConfig("tiny", environment=TinyEnvironment)) for _ in range(3)]
    try:
        handles[0].stop()
        assert httpx.get(handles[1].base_url + "/health").status_code == 200
    finally:
        for handle in handles:
            handle.stop()
    assert isinstance(handles[2], ServerHandle)
    assert "tiny" in repr(handles[2])


# -- CLI -------------------------------------------------------------------------------------


def test_cli_list_json() -> None:
    result = CliRunner().invoke(app, ["oracle", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [row["name"] for row in rows] == list(SERVERS)
    counter = rows[0]
    assert counter["available"]
    assert counter["category"] == "counter"
    assert counter["env_name"] == "counter_env"
    assert counter["task_api"] is False
    assert counter["action"][0] == {"name": "amount", "type": "integer", "required": True}


def test_cli_list_table() -> None:
    result = CliRunner().invoke(app, ["oracle", "list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "bandit_env" in result.output
    assert "arm: integer" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["oracle", "serve", "nope"], "kiln-verify oracle list"),
        (["oracle", "serve", "counter", "--fault", "bogus"], "unknown fault profile"),
        (["oracle", "serve", "counter", "--fault", "delay-step"], "needs a value"),
        (
            ["oracle", "serve", "counter", "--fault", "require-bearer=ORACLE_CLI_UNSET_VAR"],
            "ORACLE_CLI_UNSET_VAR is unset",
        ),
        (["oracle", "serve", "counter", "--max-sessions", "0"], "max-sessions"),
    ],
)
def test_cli_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def _serve_subprocess(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-c",
        "from kiln_verify.cli import main; main()",
        "oracle",
        "serve",
        *args,
    ]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _first_line(process: subprocess.Popen[str], timeout: float = 30) -> str:
    assert process.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()))  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    assert lines, "the server printed no URL in time"
    return lines[0].strip()


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_cli_serve_prints_its_url_and_stops_cleanly(stop_signal: signal.Signals) -> None:
    process = _serve_subprocess(
        "counter",
        "--port",
        "0",
        "--max-sessions",
        "1",
        "--fault",
        "delay-step=0",
        "--ping-interval",
        "5",
    )
    try:
        match = URL.fullmatch(_first_line(process))
        assert match, "expected exactly the base URL on the first line"
        base_url = match.group(0)
        assert httpx.get(base_url + "/health").json() == {"status": "healthy"}
        with open_ws(base_url.replace("http", "ws") + "/ws") as ws:
            reply: dict[str, Any] = ask(ws, {"type": "reset", "data": {"seed": 17}})
            assert reply["data"]["observation"]["total"] == 0
        process.send_signal(stop_signal)
        assert process.wait(15) == 0
        assert _refused(int(match.group(1)))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
