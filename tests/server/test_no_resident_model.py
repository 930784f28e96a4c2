"""Without a resident model, train requests and the adapter routes say what is missing;
``kiln-verify serve --model DIR`` starts without loading anything (docs/resident-model.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.control.resident.store import adapters_root, install_adapter
from kiln_verify.errors import ApiModelNotLoaded
from kiln_verify.server.runner import ServerHandle
from kiln_verify.testing.serve import ServeProcess
from oracle.runner import ServerHandle as OracleHandle
from tests.control.support import client_of, config, control_server, small_request


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    with control_server(tmp_path_factory.mktemp("no-model") / "state") as handle:
        yield handle


@pytest.fixture(scope="module")
def http(server: ServerHandle) -> Iterator[httpx.Client]:
    with client_of(server, timeout=30) as client:
        yield client


def _error(answer: httpx.Response) -> dict[str, str]:
    error: dict[str, str] = answer.json()["error"]
    return error


def test_the_adapter_route_names_what_is_missing(http: httpx.Client) -> None:
    answer = http.get("/v1/adapters")
    assert answer.status_code == 409
    error = _error(answer)
    assert error["code"] == "model_not_loaded"
    assert "resident model" in error["message"]
    assert "--model" in error["hint"]
    assert "retry-after" not in answer.headers  # waiting does not help


def test_a_train_request_names_what_is_missing(http: httpx.Client, bandit: OracleHandle) -> None:
    body = small_request(bandit.base_url, kind="train", output_adapter="next")
    answer = http.post("/v1/openenv/runs", json=body)
    assert answer.status_code == 409
    assert _error(answer)["code"] == "model_not_loaded"
    assert "kind=train" in _error(answer)["message"]
    assert http.get("/v1/openenv/runs").json()["runs"] == []


def test_installing_without_a_model_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    settings = config(tmp_path / "state")
    with pytest.raises(ApiModelNotLoaded):
        install_adapter(settings, bundle=tmp_path / "missing.kiln-hf", name="next")
    assert not adapters_root(settings).exists()


def test_the_cli_reports_it(server: ServerHandle) -> None:
    shown = CliRunner().invoke(app, ["adapters", "list", "--url", server.base_url, "--json"])
    assert shown.exit_code == 1
    assert json.loads(shown.output)["error"]["server_code"] == "model_not_loaded"


def test_serve_model_starts_without_loading_and_lists_an_empty_set(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")  # nothing is loaded before a run needs it
    served = ServeProcess(tmp_path / "state", "--model", str(model))
    try:
        with httpx.Client(base_url=served.url, trust_env=False, timeout=30) as http:
            answer = http.get("/v1/adapters")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["available"] == []
        assert body["loaded_adapters"] == []
        assert body["adapter_dir"] == str(tmp_path / "state" / "adapters")
    finally:
        assert served.stop() == 0


def test_serve_refuses_a_missing_model_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    shown = CliRunner().invoke(
        app, ["serve", "--state-dir", str(tmp_path / "state"), "--model", str(missing)]
    )
    assert shown.exit_code == 2
    assert "--model" in shown.output
    assert "does not exist" in shown.output
