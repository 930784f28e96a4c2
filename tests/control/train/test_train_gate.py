"""Train runs through the HTTP routes with a held-out evaluation gate, and from an installed
behaviour adapter (kiln-openenv-contract §5.8, §9; docs/environment-eval.md).

The gated run is one real run of the module's resident server (the warm-started tiny model,
tests/control/train/conftest.py): it collects and trains for real, then plays 20 held-out
groups with the behaviour policy and 20 with its candidate. Its gate asks for a mean return
no episode of one pull can reach, so the decision is ``rejected`` whatever the candidate
plays, and the test can hold the server to what a rejection means: ``auto_load`` deferred
and then refused, the adapter never listed by ``GET /v1/adapters`` and never played.

Its completed bundle then serves a second purpose: an operator installs the kept-back
adapter by hand through the verified import (``install_adapter``, ``hf import-peft``'s
checks), and a second train run names it as its behaviour policy. That run's contract, its
summary and its trainer must all start from that adapter, by name and content revision.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.resident.store import adapters_root, install_adapter
from kiln_verify.control_client.client import ControlClient
from kiln_verify.control_client.download_run import download_run
from kiln_verify.openenv.runcheck.engine import verify_run
from oracle.runner import ServerHandle as OracleHandle
from tests.control.support import small_request
from tests.openenv.records.kiln_published import differences

from .conftest import train_request, wait_terminal

GATED = "gated.v1"
BEHAVIOUR = "behaviour.v1"
FROM_BEHAVIOUR = "from-behaviour.v1"
#: every episode is one pull of a 0/1 arm, so no candidate's mean return reaches 2
GATE: dict[str, Any] = {
    "groups": 20,
    "group_size": 1,
    "seed_start": 100,
    "gate": {"min_mean_improvement": 0.0, "min_mean_return": 2.0},
}
EVALUATION_KINDS = [
    f"environment_eval_{side}_{part}"
    for side in ("baseline", "candidate")
    for part in ("dataset", "replay", "summary")
] + ["environment_eval_receipt"]
#: §9: the decision allows these outcomes (Kiln's gate_outcome word in the training section)
OUTCOMES = {"diagnostic": {"diagnostic"}, "passed": {"promoted", "kept", "error"},
            "rejected": {"rejected"}, "inconclusive": {"inconclusive"}}  # fmt: skip
GATE_OUTCOME = {"promoted": "promoted", "kept": "kept", "rejected": "regression",
                "inconclusive": "inconclusive", "error": "error"}  # fmt: skip


def _start(http: httpx.Client, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    created = http.post("/v1/openenv/runs", json=body)
    assert created.status_code == 202, created.text
    answer: dict[str, Any] = created.json()
    return answer["run_id"], answer


def _artifact(http: httpx.Client, status: dict[str, Any], kind: str) -> Any:
    (entry,) = [a for a in status["artifacts"] if a["kind"] == kind]
    answer = http.get(entry["url"])
    assert answer.status_code == 200, answer.text
    return json.loads(answer.content)


def _served(http: httpx.Client, name: str) -> bool:
    listed = http.get("/v1/adapters").json()
    names = {entry["name"] for entry in listed["available"]}
    return name in names or name in listed["loaded_adapters"]


@pytest.fixture(scope="module")
def gated(http: httpx.Client, bandit: OracleHandle) -> tuple[str, dict[str, Any]]:
    """The gated train run: (run id, terminal status)."""
    body = train_request(bandit.base_url, output_adapter=GATED, environment_eval=GATE)
    run_id, _ = _start(http, body)
    return run_id, wait_terminal(http, run_id, timeout=600)


def test_a_rejected_candidate_is_evaluated_recorded_and_never_served(
    http: httpx.Client,
    config: ServerConfig,
    bandit: OracleHandle,
    gated: tuple[str, dict[str, Any]],
    tmp_path: Path,
) -> None:
    run_id, status = gated
    assert status["state"] == "completed", status.get("failure")
    assert differences("OpenEnvRunStatus", status) == []  # the evaluation section included
    section = status["environment_evaluation"]
    receipt = _artifact(http, status, "environment_eval_receipt")

    # the outcome is one §9 allows for the receipt's decision, and everyone reports the same
    decision, outcome = receipt["evidence"]["decision"], receipt["outcome"]
    assert outcome in OUTCOMES[decision]
    assert (decision, outcome) == ("rejected", "rejected"), receipt["evidence"]["reason"]
    assert section["outcome"] == outcome
    assert section["evidence"] == receipt["evidence"]
    assert section["verdict"] == receipt["verdict"]
    assert status["training"]["gate_outcome"] == GATE_OUTCOME[outcome]
    assert receipt["evidence"]["paired_groups"] == 20
    assert (receipt["seed_start"], receipt["run_id"]) == (100, run_id)
    assert section["progress"]["groups_completed"] == section["progress"]["groups_total"] == 20

    # auto_load (the default) was deferred to the gate, which refused: nothing served
    assert status["training_contract"]["effective_config"]["auto_load"] is True
    assert status["training"]["state"] == "completed"
    assert status["training"].get("adapter_path") is None
    assert not (adapters_root(config) / GATED).exists()
    assert not _served(http, GATED)
    refused = http.post("/v1/openenv/runs", json=small_request(bandit.base_url, adapter=GATED))
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "openenv_adapter_unknown"
    metrics = http.get("/metrics").text
    assert 'kiln_openenv_environment_gates_total{decision="rejected"} 1.0' in metrics

    # the layout in the run directory, and the manifest's seven evaluation kinds
    run_dir = config.runs_root / run_id
    for side in ("baseline", "candidate"):
        names = sorted(p.name for p in (run_dir / "environment-evaluation" / side).iterdir())
        assert names == [
            "openenv.replay.json",
            "openenv.rollout-summary.json",
            "openenv.rollouts.jsonl",
        ]
    assert (run_dir / "environment-evaluation" / "receipt.json").is_file()
    kinds = [a["kind"] for a in status["artifacts"]]
    assert kinds == ["dataset", "replay", "summary", "train_receipt", "adapter_manifest",
                     *EVALUATION_KINDS]  # fmt: skip

    # downloaded whole and verified offline against the quarantined (never served) adapter
    with ControlClient(str(http.base_url)) as client:
        download_run(client, run_id, str(tmp_path / "run"))
    candidate = run_dir / "trainer" / "candidate" / GATED
    report = verify_run(tmp_path / "run", adapter_dir=candidate)
    assert report.evaluation is not None
    assert (report.evaluation.decision, report.evaluation.outcome) == (decision, outcome)
    assert report.evaluation.paired_groups == 20


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_train_run_from_an_installed_behaviour_adapter_starts_from_it(
    http: httpx.Client,
    config: ServerConfig,
    bandit: OracleHandle,
    gated: tuple[str, dict[str, Any]],
) -> None:
    # the gated run's kept-back adapter, installed by hand through the verified import
    completed = config.runs_root / gated[0] / "trainer" / "train.kiln-hf"
    outcome = install_adapter(config, bundle=completed, name=BEHAVIOUR)
    revision = "sha256:" + outcome.installed.content_revision
    installed = adapters_root(config) / BEHAVIOUR

    body = train_request(bandit.base_url, adapter=BEHAVIOUR, output_adapter=FROM_BEHAVIOUR)
    # the trainer starts from the adapter in its own LoRA shape: another one is refused
    shaped = http.post("/v1/openenv/runs", json=body)
    assert shaped.status_code == 400, shaped.text
    assert shaped.json()["error"]["code"] == "openenv_training_config_unsupported"
    assert "lora_rank" in shaped.json()["error"]["message"]
    body["training_config"] = {"learning_rate": 0.01}
    # a diagnostic evaluation (no gate): its baseline must be the behaviour adapter too
    body["environment_eval"] = {"groups": 4, "group_size": 1, "seed_start": 200}
    run_id, created = _start(http, body)
    contract = created["training_contract"]
    assert contract["effective_config"]["base_adapter"] == BEHAVIOUR
    assert contract["behavior_policy"]["adapter"] == {"name": BEHAVIOUR, "content_sha256": revision}
    status = wait_terminal(http, run_id, timeout=600)
    assert status["state"] == "completed", status.get("error")
    assert differences("OpenEnvRunStatus", status) == []
    assert status["training_contract"] == contract  # sealed at admission, never changed

    summary = _artifact(http, status, "summary")
    assert summary["adapter"] == BEHAVIOUR
    assert summary["behavior_policy"] == contract["behavior_policy"]
    assert summary["training_contract"] == contract

    # the trainer started from the behaviour adapter: exported as the bundle's input adapter
    # (the installed bytes), loaded as the trainable LoRA, with its own shape kept
    bundle = config.runs_root / run_id / "trainer" / "train.kiln-hf"
    export = json.loads((bundle / "kiln_hf_export.json").read_text())
    assert export["input_adapter"]["model"]["sha256"].removeprefix("sha256:") == _sha256(
        installed / "adapter_model.safetensors"
    )
    result = json.loads((bundle / "kiln_hf_result.json").read_text())["effective_config"]
    assert result["input_adapter"]["value"] is True
    assert result["kl_reference_policy"]["value"] == "initial_adapter"
    trained = adapters_root(config) / FROM_BEHAVIOUR
    assert status["training"]["adapter_path"] == str(trained)
    shape = json.loads((installed / "adapter_config.json").read_text())
    assert json.loads((trained / "adapter_config.json").read_text())["r"] == shape["r"] == 2
    assert _sha256(trained / "adapter_model.safetensors") != _sha256(
        installed / "adapter_model.safetensors"
    )
    assert _served(http, BEHAVIOUR)
    assert _served(http, FROM_BEHAVIOUR)  # diagnostic: auto_load installs as without a gate

    receipt = _artifact(http, status, "environment_eval_receipt")
    assert receipt["baseline"]["adapter"] == BEHAVIOUR
    assert receipt["baseline"]["adapter_content_revision"] == revision
    assert receipt["candidate"]["adapter"] == FROM_BEHAVIOUR
    assert (receipt["evidence"]["decision"], receipt["outcome"]) == ("diagnostic", "diagnostic")
    baseline = _artifact(http, status, "environment_eval_baseline_summary")
    assert baseline["behavior_policy"] == contract["behavior_policy"]  # the same policy played
    report = verify_run(config.runs_root / run_id)
    assert report.training is not None
    assert report.training.output_adapter == FROM_BEHAVIOUR
