"""`POST /v1/openenv/training/preflight` and `kiln-verify openenv preflight`: Kiln's receipt
or a typed refusal; a refusal contacts no environment and writes nothing."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import string
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.control.config import ServerConfig
from kiln_verify.control.kinds import train_admission
from kiln_verify.control.kinds.train_admission import admit_train
from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.control.resident.store import adapters_root
from kiln_verify.control.sections.model import ModelSettings
from kiln_verify.control.training.effective import FIELDS
from kiln_verify.errors import ControlApiError
from kiln_verify.server.runner import start_in_thread
from kiln_verify.testing.serve import ServeProcess
from tests import models
from tests.control.support import resident_config
from tests.control.training.support import FixedSource
from tests.openenv.records.kiln_published import differences

PATH = "/v1/openenv/training/preflight"
UNSUPPORTED = "openenv_training_config_unsupported"
INVALID = "openenv_invalid_request"


class Recorder:
    """A listening port that only counts the connections made to it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


@pytest.fixture(scope="module")
def recorder() -> Iterator[Recorder]:
    found = Recorder()
    yield found
    found.sock.close()


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    """``kiln-verify serve --model`` in a thread (real socket) over the session's tiny model,
    with an adapter directory ``taken`` already present."""
    pytest.importorskip("torch")
    state = tmp_path_factory.mktemp("preflight") / "state"
    model = ModelSettings(models.tiny_model(tmp_path_factory))
    config = ServerConfig(host="127.0.0.1", port=0, state_dir=state, model=model)
    (adapters_root(config) / "taken").mkdir(parents=True)
    handle = start_in_thread(config)
    try:
        with httpx.Client(base_url=handle.base_url, trust_env=False, timeout=120) as http:
            yield http, state
    finally:
        handle.stop()


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _preflights(http: httpx.Client) -> dict[str, float]:
    lines = http.get("/metrics").text.splitlines()
    prefix = "kiln_openenv_training_preflights_total{status="
    return {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith(prefix)
    }


def test_an_admitted_intent_gets_kiln_s_receipt(plane: tuple[httpx.Client, Path]) -> None:
    http, _ = plane
    before = _preflights(http)
    body = {
        "adapter": " Base ",
        "output_adapter": "agent-2",
        "auto_load": False,
        "training_config": {"lora_rank": 8, "kl_estimator": "k3", "loss": {"echo": None}},
    }
    answer = http.post(PATH, json=body)
    assert answer.status_code == 200, answer.text
    receipt = answer.json()
    assert differences("OpenEnvTrainingPreflightReceipt", receipt) == []
    config = receipt["effective_config"]
    assert (config["output_name"], config["base_adapter"]) == ("agent-2", None)
    assert (config["auto_load"], config["behavior_policy"]) == (False, "no_importance_correction")
    assert (config["lora_rank"], config["kl_estimator"], config["loss"]["echo"]) == (8, "k3", None)
    assert receipt["behavior_policy"]["implementation"] == "kiln-verify/transformers"
    assert "adapter" not in receipt["behavior_policy"]  # the base model itself
    capacity = receipt["capacity"]
    assert capacity["queued_jobs"] < capacity["max_queued_jobs"] == 128
    assert receipt["capacity_reserved"] is False
    assert _preflights(http) == {**before, "accepted": before["accepted"] + 1}


REFUSALS: list[tuple[dict[str, Any], int, str]] = [
    ({"adapter": "base"}, 400, INVALID),
    ({"output_adapter": "base"}, 400, "adapter_name_invalid"),
    ({"output_adapter": "../up"}, 400, "adapter_name_invalid"),
    ({"output_adapter": "same", "adapter": "same"}, 400, "openenv_training_request_invalid"),
    ({"output_adapter": "taken"}, 409, "adapter_exists"),
    ({"output_adapter": "a2", "adapter": "unknown-1"}, 400, "openenv_adapter_unknown"),
    (
        {"output_adapter": "a2", "post_eval": {"suite": "gsm8k"}},
        501,
        "openenv_post_eval_unsupported",
    ),
    ({"output_adapter": "a2", "training_config": {"detect_anomaly": True}}, 400, UNSUPPORTED),
    ({"output_adapter": "a2", "training_config": {"output_name": "other"}}, 400, UNSUPPORTED),
    ({"output_adapter": "a2", "training_config": {"lora_rank": 0}}, 400, INVALID),
    ({"output_adapter": "a2", "environment_urls": ["http://127.0.0.1:9"]}, 400, INVALID),
]


def test_refusals_are_typed_and_leave_the_state_directory_alone(
    plane: tuple[httpx.Client, Path],
) -> None:
    http, state = plane
    tree, before = _tree(state), _preflights(http)
    for body, status, code in REFUSALS:
        answer = http.post(PATH, json=body)
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), body
    assert _tree(state) == tree
    assert _preflights(http)["rejected"] == before["rejected"] + len(REFUSALS)


# -- GrpoConfig values and unknown keys, through a train run's admission -----------------

_KNOWN = {rule.name for rule in FIELDS} | {"reference_policy"}
_REFUSED = st.one_of(  # (training_config, code), each case written out by hand
    st.floats(0.01, 100)
    .filter(lambda v: v != 5.0)
    .map(lambda v: ({"cispo_max_weight": v}, UNSUPPORTED)),
    st.floats(0.0, 1.0).map(lambda v: ({"entropy_aware_kl_quantile": v}, UNSUPPORTED)),
    st.floats(-5, 5).map(lambda v: ({"reward_filter_var_min": v}, UNSUPPORTED)),
    st.integers(2, 99).map(lambda v: ({"reward_filter_min_groups": v}, UNSUPPORTED)),
    st.sampled_from(["train-all", "skip"]).map(
        lambda v: ({"reward_filter_on_empty": v}, UNSUPPORTED)
    ),
    st.integers(1, 99).map(lambda v: ({"checkpoint_interval": v}, UNSUPPORTED)),
    st.text(min_size=1, max_size=8).map(lambda v: ({"resume_checkpoint": v}, UNSUPPORTED)),
    st.sampled_from(
        [
            "detect_anomaly",
            "adapter_smoke_test",
            "allow_high_lora_scale",
            "allow_adapter_shape_conversion",
        ]
    ).map(lambda k: ({k: True}, UNSUPPORTED)),
    st.just(({"dynamic_sampling": False}, UNSUPPORTED)),
    st.just(({"is_level": "cispo"}, UNSUPPORTED)),
    st.sampled_from(["sgd", "muon"]).map(lambda v: ({"optimizer": {"kind": v}}, UNSUPPORTED)),
    st.just(({"kl_reference_policy": {"kind": "ema"}}, UNSUPPORTED)),
    st.just(({"reference_policy": {"kind": "none"}, "kl_coeff": 0.5}, UNSUPPORTED)),
    st.just(({"loss": {"opd": {"lambda": 1.0}}}, UNSUPPORTED)),
    st.just(({"loss": {"echo": {"lambda": 0.2}}}, UNSUPPORTED)),
    st.floats(1.5, 9.5)
    .filter(lambda v: not v.is_integer())
    .map(lambda v: ({"lora_alpha": v}, UNSUPPORTED)),
    st.integers(2**32, 2**40).map(lambda v: ({"seed": v}, UNSUPPORTED)),
    st.just(({"behavior_policy": "recorded"}, UNSUPPORTED)),
    st.just(({"base_adapter": "someone"}, UNSUPPORTED)),
    st.text(string.ascii_lowercase + "_", min_size=1, max_size=12)
    .filter(lambda k: k not in _KNOWN)
    .map(lambda k: ({k: 1}, UNSUPPORTED)),
    st.sampled_from(["echo", "opd", "no_policy_loss"]).flatmap(
        lambda part: st.just(({"loss": {"extra_" + part: 1}}, UNSUPPORTED))
    ),
    st.just(({"optimizer": {"kind": "adam_w", "lr": 1}}, UNSUPPORTED)),
    st.integers(-3, 0).map(lambda v: ({"lora_rank": v}, INVALID)),
    st.sampled_from(["x", True, None, [1]]).map(lambda v: ({"kl_coeff": v}, INVALID)),
    st.just(({"advantage_mode": "other"}, INVALID)),
)


@pytest.fixture(scope="module")
def admission(tmp_path_factory: pytest.TempPathFactory) -> ServerConfig:
    """A server configuration with a resident model directory that is never loaded: every
    refusal comes before the behaviour policy is asked for."""
    root = tmp_path_factory.mktemp("admission")
    (root / "model").mkdir()
    (root / "model" / "config.json").write_text("{}")
    return resident_config(root / "state", root / "model")


def _admit(request: dict[str, Any], config: ServerConfig) -> None:
    """The production admission of a ``kind=train`` run (what ``POST /v1/openenv/runs``
    calls, and what the run seals)."""
    admit_train(OpenEnvRunRequest.from_json(request), config, evaluates=True)


@given(case=_REFUSED)
def test_a_config_the_trainer_cannot_honour_is_refused_before_any_contact(
    case: tuple[dict[str, Any], str], recorder: Recorder, admission: ServerConfig
) -> None:
    training_config, code = case
    request = {
        "kind": "train",
        "environment_urls": [recorder.url],
        "output_adapter": "out-1",
        "training_config": training_config,
    }
    with pytest.raises(ControlApiError) as refused:
        _admit(request, admission)
    assert refused.value.code == code, (training_config, refused.value.rule)
    assert recorder.accepted == 0


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"kind": "train"}, "openenv_training_request_invalid"),
        ({"post_eval": {"suite": "held-out-math"}}, "openenv_post_eval_unsupported"),
        ({"environment_eval": {"seed_start": 7}}, "openenv_environment_eval_invalid"),
        ({"environment_eval": {"groups": 19, "gate": {}}}, "openenv_environment_eval_invalid"),
        ({"adapter": "out-1"}, "openenv_training_request_invalid"),
    ],
)
def test_train_request_rules(
    fields: dict[str, Any], code: str, recorder: Recorder, admission: ServerConfig
) -> None:
    request = {
        "kind": "train",
        "environment_urls": [recorder.url],
        "output_adapter": "out-1",
        "seed_start": 5,
        "groups": 8,
        **fields,
    }
    if fields == {"kind": "train"}:
        del request["output_adapter"]
    with pytest.raises(ControlApiError) as refused:
        _admit(request, admission)
    assert refused.value.code == code
    assert recorder.accepted == 0


def test_an_evaluation_right_after_training_with_a_gate_is_admitted(
    recorder: Recorder, admission: ServerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fixed(config: ServerConfig, adapter: str) -> Any:
        return asyncio.run(FixedSource().behaviour(adapter))

    monkeypatch.setattr(train_admission, "_behaviour", fixed)
    request = {
        "kind": "train",
        "environment_urls": [recorder.url],
        "output_adapter": "out-1",
        "seed_start": 5,
        "groups": 8,
        "environment_eval": {"seed_start": 13, "gate": {}},
    }
    _admit(request, admission)
    assert recorder.accepted == 0


# -- the real `kiln-verify serve` process and the CLI -------------------------------------


def test_the_cli_asks_a_server(
    serve_process: ServeProcess, plane: tuple[httpx.Client, Path], tmp_path: Path
) -> None:
    """Accepted by the resident-model server; refused by the real `kiln-verify serve`
    process, which has no model (the refusal names what is missing)."""
    runner = CliRunner()
    intent = tmp_path / "intent.json"
    intent.write_text(json.dumps({"output_adapter": f"cli-{os.getpid()}"}), encoding="utf-8")
    args = ["openenv", "preflight", "--request", str(intent), "--url"]
    done = runner.invoke(app, [*args, str(plane[0].base_url), "--json"])
    assert done.exit_code == 0, done.output
    receipt = json.loads(done.stdout)
    assert differences("OpenEnvTrainingPreflightReceipt", receipt) == []
    assert receipt["effective_config"]["base_adapter"] is None
    shown = runner.invoke(app, [*args, str(plane[0].base_url)])
    assert shown.exit_code == 0
    assert "Training admitted" in shown.stdout
    refused = runner.invoke(app, [*args, serve_process.url, "--json"])
    assert refused.exit_code == 1
    assert json.loads(refused.stdout)["error"]["server_code"] == "model_not_loaded"
    intent.write_text(json.dumps({"output_adapter": "base"}), encoding="utf-8")
    invalid = runner.invoke(app, [*args, str(plane[0].base_url), "--json"])
    assert json.loads(invalid.stdout)["error"]["server_code"] == "adapter_name_invalid"
