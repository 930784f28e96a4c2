"""``kiln-verify hf import-peft --url`` (docs/hf-http-import.md): against a real ``serve
--model`` server, and against a small socket stub for the answers a real server cannot give
(an invalid 201, a weak or wrong ETag, another status, a connection dropped after the body).

The real server is the module's own (in a thread) over the session-shared tiny model and
completed SFT bundle (tests/hf/importer).
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")

from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.control.config import ServerConfig
from kiln_verify.control.resident.store import adapters_root
from kiln_verify.control_client import hf_import
from kiln_verify.control_client.hf_import import predict_answer
from kiln_verify.hf.envelope import materialized_envelope
from kiln_verify.hf.importer import INSTALLED_FILES, import_peft
from kiln_verify.server.runner import ServerHandle
from tests.control.support import resident_config, running
from tests.hf.importer.conftest import tree


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, completed: tuple[Path, Path]) -> ServerConfig:
    return resident_config(tmp_path_factory.mktemp("hf-import-cli") / "state", completed[0])


@pytest.fixture(scope="module")
def server(config: ServerConfig) -> Iterator[ServerHandle]:
    with running(config) as handle:
        yield handle


@pytest.fixture(scope="module")
def predicted(completed: tuple[Path, Path]) -> dict[str, Any]:
    """The answer a server must give to an import of the bundle as ``stubbed``."""
    with (
        tempfile.TemporaryDirectory() as scratch,
        materialized_envelope(completed[1], "stubbed", scratch) as (envelope, report, _),
    ):
        return predict_answer(envelope, report, "stubbed").to_json()


def cli(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(app, ["hf", "import-peft", *args, "--json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


def test_the_cli_imports_over_http_exactly_what_it_predicted(
    server: ServerHandle,
    config: ServerConfig,
    completed: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model, bundle = completed
    scratch = tmp_path / "tmp"  # where the client's private envelope goes
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    before = tree(bundle)
    code, report = cli("--bundle", str(bundle), "--name", "cli.v1", "--url", server.base_url)
    assert code == 0, report
    local = import_peft(bundle=bundle, name="cli.v1", model=model, registry=tmp_path / "reg")
    assert report["import_sha256"] == local.installed.receipt.import_sha256
    assert report["size_bytes"] == local.installed.installed_bytes
    assert report["content_revision"] == local.installed.content_revision
    for file in INSTALLED_FILES:
        installed = adapters_root(config) / "cli.v1" / file
        assert installed.read_bytes() == (local.directory / file).read_bytes(), file
    assert tree(bundle) == before  # the bundle is only read
    assert list(scratch.iterdir()) == []  # the private envelope is gone

    code, again = cli("--bundle", str(bundle), "--name", "cli.v1", "--url", server.base_url)
    assert code == 1
    error = again["error"]
    assert (error["code"], error["server_code"]) == (
        "control_http_status",
        "adapter_already_exists",
    )


def test_the_two_forms_exclude_each_other(completed: tuple[Path, Path], tmp_path: Path) -> None:
    model, bundle = completed
    base = ("--bundle", str(bundle), "--name", "x")
    code, report = cli(*base, "--url", "http://127.0.0.1:9", "--model", str(model))
    assert (code, report["error"]["code"]) == (2, "usage")
    code, report = cli(*base, "--model", str(model))
    assert (code, report["error"]["code"]) == (2, "usage")
    code, report = cli(*base, "--url", "http://127.0.0.1:1")  # nothing listens, nothing sent
    assert (code, report["error"]["code"]) == (1, "control_transport")
    broken = Path(shutil.copytree(bundle, tmp_path / bundle.name))
    (broken / "adapter_model.safetensors").unlink()
    with stub(lambda _: b"HTTP/1.1 500 X\r\ncontent-length: 0\r\n\r\n") as (url, seen):
        code, report = cli("--bundle", str(broken), "--name", "x", "--url", url)
    assert (code, report["error"]["code"]) == (1, "hf_bundle_missing_file")
    assert seen == []  # a broken bundle never contacts the server


def _read_request(sock: socket.socket) -> bytes:
    """One request's body (chunked or Content-Length), read whole."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").lower().split("\r\n")
    length = next((int(v.split(":")[1]) for v in lines if v.startswith("content-length:")), None)

    def more(n: int) -> None:
        nonlocal rest
        while len(rest) < n:
            chunk = sock.recv(65536)
            assert chunk, "the client closed early"
            rest += chunk

    if length is not None:
        more(length)
        return rest[:length]
    body = b""
    while True:
        while b"\r\n" not in rest:
            more(len(rest) + 1)
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line.split(b";")[0], 16)
        more(size + 2)
        body += rest[:size]
        rest = rest[size + 2 :]
        if size == 0:
            return body


Answer = Callable[[bytes], bytes | None]


class stub:
    """A one-thread HTTP stub on a free port: ``answer(body)`` gives the raw response, or
    ``None`` to drop the connection once the whole body has arrived."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.seen: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(30)
            with conn:
                body = _read_request(conn)
                self.seen.append(body)
                response = self.answer(body)
                if response is not None:
                    conn.sendall(response)

    def __enter__(self) -> tuple[str, list[bytes]]:
        self.thread.start()
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}", self.seen

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        self.listener.close()


def _response(status: str, body: dict[str, Any], **headers: str) -> bytes:
    data = json.dumps(body).encode()
    fields = {"content-type": "application/json", "content-length": str(len(data)), **headers}
    head = "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + data


def test_answers_a_real_server_cannot_give_are_never_accepted(
    completed: tuple[Path, Path], predicted: dict[str, Any]
) -> None:
    bundle = completed[1]
    etag = f'"{predicted["import_sha256"]}"'
    cases: dict[str, tuple[Answer, str]] = {
        "exact": (lambda _: _response("201 Created", predicted, etag=etag), ""),
        "size_differs": (
            lambda _: _response("201 Created", {**predicted, "size_bytes": 1}, etag=etag),
            "hf_import_answer_invalid",
        ),
        "weak_etag": (
            lambda _: _response("201 Created", predicted, etag="W/" + etag),
            "hf_import_answer_invalid",
        ),
        "other_etag": (
            lambda _: _response("201 Created", predicted, etag='"sha256:' + "0" * 64 + '"'),
            "hf_import_answer_invalid",
        ),
        "no_etag": (lambda _: _response("201 Created", predicted), "hf_import_answer_invalid"),
        "extra_field": (
            lambda _: _response("201 Created", {**predicted, "more": 1}, etag=etag),
            "hf_import_answer_invalid",
        ),
        "status_200": (
            lambda _: _response("200 OK", predicted, etag=etag),
            "hf_import_answer_invalid",
        ),
        "no_content": (
            lambda _: b"HTTP/1.1 204 No Content\r\n\r\n",
            "hf_import_answer_invalid",
        ),
        "redirect": (
            lambda _: (
                b"HTTP/1.1 307 Temporary\r\nlocation: http://elsewhere/\r\n"
                b"content-length: 0\r\n\r\n"
            ),
            "hf_import_answer_invalid",
        ),
        "unstructured_502": (
            lambda _: b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 3\r\n\r\nbad",
            "hf_import_answer_invalid",
        ),
        "dropped": (lambda _: None, "hf_import_outcome_unknown"),
        "refused": (
            lambda _: _response(
                "409 Conflict", {"error": {"code": "adapter_already_exists", "message": "m"}}
            ),
            "control_http_status",
        ),
    }
    for case, (answer, expected) in cases.items():
        with stub(answer) as (url, seen):
            code, report = cli("--bundle", str(bundle), "--name", "stubbed", "--url", url)
        assert len(seen) == 1, case
        assert seen[0][:2] == b"\x1f\x8b", case
        if not expected:
            assert (code, report) == (0, predicted), case
            continue
        assert (code, report["error"]["code"]) == (1, expected), (case, report)
        if expected != "control_http_status":
            assert "may already be installed" in report["error"]["rule"], case


def test_a_body_over_the_compressed_cap_stops_and_installs_nothing(
    server: ServerHandle,
    config: ServerConfig,
    completed: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cap lowered under this archive: the upload stops mid-body with the local code,
    and the server, seeing a truncated body, installs nothing and keeps no staging."""
    monkeypatch.setattr(hf_import, "HTTP_IMPORT_UPLOAD_CHUNK_BYTES", 4096)  # chunks flow
    monkeypatch.setattr(hf_import, "MAX_IMPORT_COMPRESSED_BYTES", 20 * 1024)  # body ~37 KB
    root = adapters_root(config)

    def listing() -> list[str]:
        return sorted(p.name for p in root.iterdir()) if root.exists() else []

    before = listing()
    code, report = cli("--bundle", str(completed[1]), "--name", "capped", "--url", server.base_url)
    assert (code, report["error"]["code"]) == (1, "limit_exceeded")
    deadline = time.monotonic() + 10
    while listing() != before:  # the server cleans up after the truncated body
        assert time.monotonic() < deadline, listing()
        time.sleep(0.05)
