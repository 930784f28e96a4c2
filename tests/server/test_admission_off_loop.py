"""A train request's admission loads the resident model (seconds for a real one); the server
keeps answering other requests meanwhile, because admission runs in a worker thread.

The load is held open by a gate (a real load of the tiny model is too quick to observe);
everything else is the real server over real sockets."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.control.resident.model import ResidentModel
from kiln_verify.errors import ApiModelNotLoaded
from oracle.runner import ServerHandle as OracleHandle
from tests.control.support import client_of, resident_config, running, small_request


def test_status_answers_while_a_train_admission_loads_the_model(
    tmp_path: Path, bandit: OracleHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    loading = threading.Event()
    release = threading.Event()

    def held_load(self: ResidentModel) -> None:
        loading.set()
        assert release.wait(30)
        raise ApiModelNotLoaded("the held load ends here")

    monkeypatch.setattr(ResidentModel, "_load_base", held_load)
    model = tmp_path / "model"
    model.mkdir()
    body = small_request(bandit.base_url, kind="train", output_adapter="next", max_steps=1)
    answers: dict[str, Any] = {}
    with (
        running(resident_config(tmp_path / "state", model)) as server,
        client_of(server, timeout=30) as http,
    ):

        def submit() -> None:
            answers["train"] = http.post("/v1/openenv/runs", json=body)

        poster = threading.Thread(target=submit)
        poster.start()
        try:
            assert loading.wait(30)
            listed = http.get("/v1/openenv/runs", timeout=5)
            assert listed.status_code == 200
            assert listed.json()["runs"] == []
        finally:
            release.set()
            poster.join(30)
        metrics = http.get("/metrics").text
    refused = answers["train"]
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "model_not_loaded"
    assert 'kiln_openenv_runs_total{status="training_preflight_rejected"} 1' in metrics
    assert not any((tmp_path / "state").glob("**/run.json"))
