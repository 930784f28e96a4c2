"""The mistakes a newcomer makes with an environment URL, as the CLI reports them.

Each error names the URL it tried, and each of the usual mistakes gets its own hint: a
server that is not running, ``https://`` to a plain-HTTP server, a base URL that already
ends in ``/ws``, and a URL that is not an OpenEnv server at all (no ``/health``). Real
sockets throughout: our oracle and a plain ``http.server``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from oracle.runner import ServerHandle


@pytest.fixture(scope="module")
def not_openenv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("site")
    (root / "index.html").write_text("<h1>a web site</h1>")

    class Quiet(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _error(url: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["openenv", "inspect", "--environment", url, "--json"])
    assert result.exit_code == 1, result.output
    error: dict[str, Any] = json.loads(result.stdout)["error"]
    return error


def test_nothing_listening() -> None:
    error = _error("http://127.0.0.1:9")
    assert error["code"] == "environment_transport"
    assert error["rule"].startswith("GET http://127.0.0.1:9/health failed: ConnectError")
    assert error["hint"] == (
        "check that an OpenEnv server is running at http://127.0.0.1:9 and reachable from here"
    )


def test_https_to_a_plain_http_server(servers: dict[str, ServerHandle]) -> None:
    plain = servers["counter"].base_url
    error = _error(plain.replace("http://", "https://"))
    assert error["code"] == "environment_transport"
    assert error["hint"].startswith(f"the TLS handshake failed: if the server speaks plain HTTP, "
                                    f"use {plain};")  # fmt: skip


def test_a_base_url_ending_in_ws(servers: dict[str, ServerHandle]) -> None:
    base = servers["counter"].base_url
    error = _error(base + "/ws")
    assert error["code"] == "environment_http_status"
    assert error["rule"] == f"GET {base}/ws/health answered HTTP 404, expected 200"
    assert error["hint"] == (
        f"the URL ends in /ws, but the client adds /ws itself: give the server's base URL ({base})"
    )


def test_a_server_that_is_not_openenv(not_openenv: str) -> None:
    error = _error(not_openenv)
    assert error["code"] == "environment_http_status"
    assert error["hint"] == (
        f"{not_openenv} has no /health route: this does not look like an OpenEnv server "
        "(check the host, port and any path prefix)"
    )


def test_the_human_form_is_one_line_on_stderr(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["openenv", "inspect", "--environment", "http://127.0.0.1:9"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: environment_transport: GET http://127.0.0.1:9/health")
