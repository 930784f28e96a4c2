"""A server-owned train run against a real OpenEnv 0.10.0 server, end to end.

The environment is the interop suite's openenv bandit peer (``openenv_peers.py``): OpenEnv's
own ``create_app`` serves it, so discovery, sessions, framing, validation and every reset and
step the collector sends are OpenEnv's code, written by others; only the game (the oracle
bandit's arms) is shared with our oracle. The bandit is chosen over ``openenv init``'s echo
template because its action (``{"arm": int}``) is one the resident model can play: the
warm-started tiny model (tests/models.py) pulls real arms, so rewards differ within a group
and training selection keeps groups to train on, while a tiny model has never learnt the
echo template's ``message`` action and every reply would be the same invalid-action penalty
(a run that completes without a trainer, proving nothing about the trainer).

``kiln-verify serve --model`` runs in a thread of this process over real sockets: collection
from the OpenEnv server, the bundle's ``train.py`` in a child process, the verified import
of its adapter; then ``kiln-verify openenv artifact RUN --all`` downloads the run and
``kiln-verify openenv verify-run`` checks every link of it offline (both in process).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv")
pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")

from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.control.config import ServerConfig
from kiln_verify.control.resident.store import adapters_root
from kiln_verify.server.runner import ServerHandle
from oracle.runner import ServerHandle as OracleHandle
from tests import models
from tests.control.support import client_of, resident_config, running, wait_terminal

pytestmark = [pytest.mark.interop, pytest.mark.slow]

OUTPUT = "openenv-bandit.v1"


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, bandit: OracleHandle) -> ServerConfig:
    model = models.warm_bandit_model(tmp_path_factory, bandit.base_url)
    return resident_config(tmp_path_factory.mktemp("train-openenv") / "state", model)


@pytest.fixture(scope="module")
def server(config: ServerConfig) -> Iterator[ServerHandle]:
    with running(config) as handle:
        yield handle


def _cli(*args: str) -> Any:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_train_run_on_an_openenv_server_trains_installs_and_verifies(
    server: ServerHandle, config: ServerConfig, openenv_urls: dict[str, str], tmp_path: Path
) -> None:
    url = openenv_urls["bandit"]
    body = {
        "kind": "train",
        "environment_urls": [url],
        "output_adapter": OUTPUT,
        "groups": 4,
        "group_size": 2,
        "max_steps": 1,
        "concurrency": 1,
        "max_action_tokens": 16,
        "thinking": False,
        "capacity_wait_seconds": 5,
        "training_config": {"learning_rate": 0.01, "lora_rank": 2, "lora_alpha": 4},
    }
    with client_of(server) as http:
        created = http.post("/v1/openenv/runs", json=body)
        assert created.status_code == 202, created.text
        run_id: str = created.json()["run_id"]
        status = wait_terminal(http, run_id, timeout=600)
        listed = http.get("/v1/adapters").json()
    assert status["state"] == "completed", status.get("failure")

    # the OpenEnv server is what was played: its own metadata, over its own wire
    (environment,) = status["environments"]
    assert environment["base_url"] == url
    assert environment["metadata"]["name"] == "BanditEnvironment"  # OpenEnv's: the class name
    stats = status["rollout_stats"]
    ended = ("done_count", "max_steps_count", "invalid_model_action_count")
    assert sum(stats[key] for key in ended) == 8
    assert stats["invalid_model_action_count"] < 8  # the model pulled real arms

    # the trainer ran on the groups selection kept, and its adapter was installed
    training = status["training"]
    assert (training["state"], training["progress"]) == ("completed", 1.0)
    assert training["training_data"]["rows"] >= 1
    installed = adapters_root(config) / OUTPUT
    assert training["adapter_path"] == str(installed)
    assert [a["status"] for a in listed["available"] if a["name"] == OUTPUT] == ["available"]
    kinds = [a["kind"] for a in status["artifacts"]]
    assert kinds == ["dataset", "replay", "summary", "train_receipt", "adapter_manifest"]

    # the whole run downloaded by the CLI, then every link verified offline
    out = tmp_path / f"run-{run_id}"
    url_flag = ("--url", server.base_url)
    downloaded = _cli("openenv", "artifact", run_id, "--all", "--output-dir", str(out), *url_flag)
    assert sorted(f["kind"] for f in downloaded["files"]) == sorted(kinds)
    report = _cli("openenv", "verify-run", str(out), "--adapter", str(installed))
    assert (report["run_id"], report["run_kind"], report["state"]) == (run_id, "train", "completed")
    assert report["training"]["output_adapter"] == OUTPUT
