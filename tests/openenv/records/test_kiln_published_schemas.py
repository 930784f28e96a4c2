"""Every record we write under a Kiln schema name is exactly Kiln's record.

Each record is written in its richest form, by our real code paths where they can run here
(a bearer-authenticated collection with a thinking budget, offline verification, a replay
of a moved deployment with volatile state and a remap, a paired evaluation with a gate,
a control-plane run with its status, list, inspection and task catalog) and otherwise built
with every optional field set (training fields, failures, HF/TRL manifests). Each is then
checked against the field lists of Kiln's newest published schemas
(:mod:`tests.openenv.records.kiln_published`, ericflo/kiln @7b449586): a key Kiln's closed record
does not have, or a required key we leave out, fails here. What we know beyond Kiln's
record lives beside it, under our own schema names (docs/contract.md, "Kiln's published
schemas").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.control import status as control
from kiln_verify.control.request import OpenEnvRunRequest, RunKind
from kiln_verify.control.training import evaluation_status, trainer_status
from kiln_verify.errors import TaskApiInvalid
from kiln_verify.hf.manifest import export, grpo, import_receipt, provenance, result, sft, shards
from kiln_verify.hf.manifest.fields import FileIdentity
from kiln_verify.openenv.evaluate.engine import TrainingInterval, evaluate_bundles
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.openenv.protocol.tasks import TaskCatalog
from kiln_verify.openenv.protocol.tasks import _splits as task_splits
from kiln_verify.openenv.records import (
    environment,
    evaluation,
    observation,
    replay,
    reports,
    rollout,
    summary,
)
from kiln_verify.openenv.records.serialize import report_bytes
from kiln_verify.openenv.training import lineage
from kiln_verify.openenv.verify import verify_bundle
from kiln_verify.records import Record
from kiln_verify.records.policy import AdapterIdentity, BehaviorPolicyIdentity
from oracle.runner import ServerHandle
from tests.control.support import control_server, run_to_end, small_request
from tests.hf import fixtures as hf
from tests.openenv.records.kiln_published import KILN, KILN_COMMIT, KILN_ENUMS, differences
from tests.openenv.replay.conftest import Start, collect_bundle

VAR = "KILN_PUBLISHED_TEST_TOKEN"
DIGEST = "sha256:" + "7" * 64

#: Our model -> Kiln's record. Every field a model can write must be one Kiln's record has.
MODELS: list[tuple[type[Record], str]] = [
    (summary.RolloutSummary, "OpenEnvRolloutSummary"),
    (summary.RolloutRecord, "RolloutRecord"),
    (summary.RolloutStats, "RolloutStats"),
    (summary.RolloutStats, "OpenEnvRolloutStats"),
    (summary.TrainingSelection, "OpenEnvTrainingSelection"),
    (summary.TrainingContract, "OpenEnvTrainingContract"),
    (environment.EnvironmentInspection, "EnvironmentInspection"),
    (environment.EnvironmentInspection, "OpenEnvInspection"),
    (environment.EnvironmentIdentityRecord, "EnvironmentIdentity"),
    (environment.EnvironmentIdentityRecord, "OpenEnvIdentity"),
    (environment.EnvironmentMetadataRecord, "OpenEnvMetadata"),
    (environment.EnvironmentSchema, "EnvironmentSchema"),
    (observation.ObservationRecord, "Observation"),
    (observation.ProtocolErrorRecord, "ProtocolError"),
    (replay.ReplayManifest, "OpenEnvReplayManifest"),
    (replay.ReplayGroup, "ReplayGroup"),
    (replay.ReplayCandidate, "ReplayCandidate"),
    (replay.ReplayExchange, "ReplayExchange"),
    (replay.ObservationResult, "ReplayExchangeResult.observation"),
    (replay.ProtocolErrorResult, "ReplayExchangeResult.protocol_error"),
    (rollout.OpenEnvRolloutProvenance, "OpenEnvRolloutProvenanceV1"),
    (reports.VerificationReport, "VerificationReport"),
    (reports.ReplayRunReport, "ReplayRunReport"),
    (reports.ArtifactDownloadReceipt, "OpenEnvArtifactDownloadReceipt"),
    (evaluation.EnvironmentEvaluationReceipt, "EnvironmentEvaluationReceipt"),
    (evaluation.EnvironmentEvalConfig, "EnvironmentEvalConfig"),
    (evaluation.EnvironmentEvalGate, "EnvironmentEvalGate"),
    (evaluation.PolicyIdentity, "PolicyIdentity"),
    (evaluation.EnvironmentEvalEvidence, "EnvironmentEvalEvidence"),
    (BehaviorPolicyIdentity, "RolloutBehaviorPolicyIdentityV1"),
    (AdapterIdentity, "RolloutAdapterIdentityV1"),
    (control.OpenEnvRunStatus, "OpenEnvRunStatus"),
    (control.RunList, "OpenEnvRunList"),
    (OpenEnvRunRequest, "OpenEnvRunRequest"),
    (control.RunAdmission, "OpenEnvRunAdmission"),
    (control.RunProgress, "OpenEnvRunProgress"),
    (control.RunArtifact, "OpenEnvArtifact"),
    (control.RunFailure, "OpenEnvRunFailure"),
    (trainer_status.OpenEnvTrainingStatus, "OpenEnvTrainingStatus"),
    (trainer_status.TrainingDataProvenance, "TrainingDataProvenance"),
    (lineage.OpenEnvTrainingDataProvenanceV1, "OpenEnvTrainingDataProvenanceV1"),
    (lineage.OpenEnvTrainingEnvironmentV1, "OpenEnvTrainingEnvironmentV1"),
    (lineage.OpenEnvTerminationCountsV1, "OpenEnvTerminationCountsV1"),
    (evaluation_status.OpenEnvEnvironmentEvalStatus, "OpenEnvEnvironmentEvalStatus"),
    (evaluation_status.OpenEnvEnvironmentEvalProgress, "OpenEnvEnvironmentEvalProgress"),
    (evaluation.PolicyIdentity, "OpenEnvPolicyIdentity"),
    (evaluation.EnvironmentEvalEvidence, "OpenEnvEnvironmentEvalEvidence"),
    (control.InspectResponse, "OpenEnvInspectResponse"),
    (control.TaskCatalogResponse, "OpenEnvTaskCatalogResponse"),
    (control.TaskCatalogEntry, "OpenEnvTaskCatalogEntry"),
    (control.TaskCatalogRecord, "OpenEnvTaskCatalog"),
    (control.TaskSplitRecord, "OpenEnvTaskSplit"),
    (export.ExportManifest, "HfTrlExportManifestV1"),
    (export.ExportModel, "HfTrlModelIdentity"),
    (export.ExportData, "HfTrlDataExport"),
    (export.SftSelection, "HfTrlSftSelection"),
    (export.InputAdapter, "HfTrlInputAdapter"),
    (FileIdentity, "HfTrlFileIdentity"),
    (result.TrainingResult, "HfTrlTrainingResultV1"),
    (result.TrainerInfo, "HfTrlTrainerIdentity"),
    (result.OutputAdapter, "HfTrlOutputAdapter"),
    (import_receipt.ImportReceipt, "HfTrlImportReceiptV1"),
    (import_receipt.ResidentModelIdentity, "HfTrlResidentModelIdentityV1"),
    (shards.BaseWeightShardManifest, "BaseWeightShardManifest"),
    (shards.BaseWeightShard, "BaseWeightShard"),
    (provenance.ExecutionProvenance, "ExecutionProvenanceV1"),
    (provenance.BackendProvenance, "BackendProvenanceV1"),
    (provenance.BuildProvenance, "BuildProvenanceV1"),
    (provenance.ModelProvenance, "ModelProvenanceV1"),
    (provenance.PrecisionProvenance, "PrecisionProvenanceV1"),
    (provenance.KernelContract, "KernelContractV1"),
    (provenance.ConfigurationProvenance, "ConfigurationProvenanceV1"),
    (sft.SftIngestionReceipt, "SftIngestionReceipt"),
    (sft.RejectedRow, "SftRejectedRow"),
    (grpo.RolloutProvenance, "RolloutProvenanceV1"),
    (grpo.ActionToken, "RolloutActionTokenV1"),
    (grpo.TokenizerIdentity, "RolloutTokenizerIdentityV1"),
    (grpo.TemplateInvocation, "RolloutChatTemplateInvocationV1"),
    (grpo.SamplingRecord, "RolloutSamplingConfigV1"),
    (grpo.ThinkingBudget, "RolloutThinkingBudgetV1"),
]
READ_ONLY: dict[type[Record], frozenset[str]] = {
    # v2 summaries are read (verify, evaluate); only v5 is ever written, and v5 has no such key
    summary.RolloutSummary: frozenset({"reset_options_sha256"}),
}


def _names(model: type[Record]) -> set[str]:
    return {info.alias or name for name, info in model.model_fields.items()}


def check(name: str, value: Any) -> None:
    found = differences(name, value)
    assert not found, f"not Kiln's {name} (ericflo/kiln@{KILN_COMMIT[:8]}): {found}"


@pytest.mark.parametrize(
    ("model", "name"), MODELS, ids=lambda item: getattr(item, "__name__", item)
)
def test_every_field_a_model_can_write_is_one_kiln_s_record_has(
    model: type[Record], name: str
) -> None:
    kiln = KILN[name]
    writable = _names(model) - READ_ONLY.get(model, frozenset())
    if kiln.closed:
        assert writable <= kiln.allowed, f"{model.__name__} adds {writable - kiln.allowed}"
    assert kiln.required <= _names(model), f"{model.__name__} lacks {kiln.required - _names(model)}"


def _values(literal: Any) -> tuple[str, ...]:
    return tuple(literal.__args__)


#: Our closed value lists -> Kiln's: the same values in Kiln's order, none added or missing.
ENUMS: list[tuple[tuple[str, ...], str]] = [
    (_values(RunKind), "OpenEnvRunKind"),
    (control.RUN_STATES, "OpenEnvRunState"),
    (control.FAILURE_CODES, "OpenEnvRunFailureCode"),
    (control.FAILURE_STAGES, "OpenEnvRunFailureStage"),
    (control.ARTIFACT_KINDS, "OpenEnvArtifact.kind"),
    (_values(trainer_status.TrainingState), "TrainingState"),
    (_values(trainer_status.GateOutcome), "OpenEnvTrainingStatus.gate_outcome"),
    (evaluation_status.EVALUATION_STATES, "OpenEnvEnvironmentEvalState"),
    (_values(evaluation.EvaluationOutcome), "OpenEnvEnvironmentEvalOutcome"),
    (_values(evaluation.EvaluationDecision), "OpenEnvEnvironmentEvalDecision"),
]


@pytest.mark.parametrize(("ours", "name"), ENUMS, ids=[name for _, name in ENUMS])
def test_every_closed_value_list_is_kiln_s(ours: tuple[str, ...], name: str) -> None:
    assert ours == KILN_ENUMS[name]


def test_the_checker_catches_an_added_and_a_missing_field() -> None:
    report = dict.fromkeys(KILN["ReplayRunReport"].allowed, 0)
    assert differences("ReplayRunReport", report) == []
    assert differences("ReplayRunReport", {**report, "volatile": []}) == [
        "$: ReplayRunReport has no ['volatile']"
    ]
    del report["capacity_retries"]
    assert differences("ReplayRunReport", report) == [
        "$: ReplayRunReport requires ['capacity_retries']"
    ]
    artifact = {"kind": "checkpoint", "url": "u", "sha256": DIGEST, "bytes": 1}
    assert differences("OpenEnvArtifact", artifact) == [
        "$.kind: 'checkpoint' is not one of Kiln's OpenEnvArtifact.kind"
    ]
    training = {"job_id": "grpo-1", "state": "cancelled", "progress": 0.0, "loss": 1.0}
    assert differences("OpenEnvRunStatus", {"training": training})[-2:] == [
        "$.training: OpenEnvTrainingStatus has no ['loss']",
        "$.training.state: 'cancelled' is not one of Kiln's TrainingState",
    ]
    nested = {"report": None}
    assert differences("OpenEnvRunList", {"schema": "s", "runs": [nested]})[0].startswith(
        "$.runs[0]: OpenEnvRunStatus has no ['report']"
    )


@pytest.fixture
def bearer_bundle(
    start: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, ServerHandle, ServerHandle]:
    """A bearer-authenticated collection with a thinking budget, then the deployment moved
    to another port (same build, same token): replay needs a remap."""
    monkeypatch.setenv(VAR, "published-schema-token-0123456789")
    old = start("counter", faults=[f"require-bearer={VAR}"])
    path = collect_bundle(tmp_path, [old.base_url], RandomPolicy(), groups=2, group_size=2,
                          max_steps=2, credential_envs=[VAR], thinking=True,
                          thinking_budget_tokens=8)  # fmt: skip
    old.stop()
    new = start("counter", faults=[f"require-bearer={VAR}"])
    return path, old, new


def test_collection_verification_and_a_moved_replay_write_kiln_s_records(
    bearer_bundle: tuple[Path, ServerHandle, ServerHandle],
) -> None:
    path, old, new = bearer_bundle
    written = json.loads(path.read_text(encoding="utf-8"))
    check("OpenEnvRolloutSummary", written)
    assert written["environments"][0]["identity"]["authentication"] == "bearer"
    assert written["thinking_budget_tokens"] == 8
    check("OpenEnvReplayManifest", json.loads((path.parent / "openenv.replay.json").read_text()))
    for line in (path.parent / "openenv.rollouts.jsonl").read_text().splitlines():
        for completion in json.loads(line)["completions"]:
            check("OpenEnvRolloutProvenanceV1", completion["openenv"])
    check("VerificationReport", verify_bundle(path).to_json())
    args = ["openenv", "replay", "--summary", str(path), "--credential-env", VAR, "--json",
            "--environment-url", f"{old.base_url}={new.base_url}"]  # fmt: skip
    replayed = CliRunner().invoke(app, args)
    assert replayed.exit_code == 0, replayed.stdout
    printed = json.loads(replayed.stdout)
    check("ReplayRunReport", printed["report"])
    # the richest replay: what used to be squeezed into Kiln's closed record is beside it
    notes = printed["kiln_verify"]
    assert notes["schema"] == "kiln-verify.replay-run-notes.v1"
    assert notes["volatile"] == ["final_state.episode_id"]
    assert [remap["base_url"] for remap in notes["environment_remaps"]] == [new.base_url]


def test_training_fields_and_an_adapter_policy_are_written_as_kiln_s_summary(
    bearer_bundle: tuple[Path, ServerHandle, ServerHandle],
) -> None:
    path, _, _ = bearer_bundle
    document = json.loads(path.read_text(encoding="utf-8"))
    policy = {**document["behavior_policy"], "adapter": {"name": "agent", "content_sha256": DIGEST}}
    document["behavior_policy"] = policy
    document["adapter"] = "agent"
    document["training_selection"] = {
        "groups_submitted": 2,
        "rollouts_submitted": 4,
        "no_output_rollouts_discarded": 0,
        "no_usable_output_groups_skipped": 0,
        "no_reward_gradient_groups_skipped": 0,
        "warnings": ["every reward was equal in group 1"],
    }
    document["training_contract"] = {
        "schema": "kiln.openenv-training-contract.v1",
        "effective_config": {
            "base_adapter": "agent",
            "output_name": "agent-2",
            "behavior_policy": "no_importance_correction",
        },
        "post_eval": {"suite": "gsm8k"},
        "behavior_policy": policy,
    }
    document["training_submission"] = {"job_id": "grpo-1"}
    record = summary.RolloutSummary.from_json(document)
    check("OpenEnvRolloutSummary", record.to_json())
    assert record.to_json() == document


def test_a_paired_evaluation_receipt_is_kiln_s_record(start: Start, tmp_path: Path) -> None:
    bandit = start("bandit")
    sides = []
    for side in ("baseline", "candidate"):
        (tmp_path / side).mkdir()
        sides.append(collect_bundle(tmp_path / side, [bandit.base_url], RandomPolicy(),
                                    groups=2, group_size=2, max_steps=2, seed_start=5))  # fmt: skip
    gate = evaluation.EnvironmentEvalGate(min_mean_improvement=0.0, min_mean_return=0.25)
    done = evaluate_bundles(*sides, gate=gate, training=TrainingInterval(0, 2))
    written = json.loads(done.data)
    check("EnvironmentEvaluationReceipt", written)
    assert set(written["config"]) == KILN["EnvironmentEvalConfig"].allowed  # seed_start, gate
    for report in (done.baseline, done.candidate):
        check("VerificationReport", report.to_json())
    adapter = {"adapter": "agent", "adapter_content_revision": DIGEST}
    written["candidate"] = {**adapter, **written["candidate"]}
    richest = evaluation.EnvironmentEvaluationReceipt.from_json(written).to_json()
    check("EnvironmentEvaluationReceipt", richest)
    assert set(richest["candidate"]) == KILN["PolicyIdentity"].allowed


def test_an_artifact_download_receipt_is_kiln_s_record() -> None:
    run_id = "80a26e21-8451-4a64-8666-890c06fd80bd"
    receipt = reports.ArtifactDownloadReceipt(
        schema=reports.ARTIFACT_DOWNLOAD_SCHEMA,
        run_id=run_id,
        kind="environment_eval_receipt",
        source_url=f"/v1/openenv/runs/{run_id}/artifacts/environment_eval_receipt",
        output_path="evidence/receipt.json",
        sha256=DIGEST,
        bytes=2048,
    )
    check("OpenEnvArtifactDownloadReceipt", json.loads(report_bytes(receipt)))


def test_a_control_plane_run_and_its_answers_are_kiln_s_records(
    start: Start, tmp_path: Path
) -> None:
    bandit = start("bandit")
    with (
        control_server(tmp_path / "state") as server,
        httpx.Client(base_url=server.base_url, trust_env=False, timeout=60) as http,
    ):
        status = run_to_end(http, small_request(bandit.base_url, idempotency_key="k-1"))
        assert status["state"] == "rollout_ready", status
        check("OpenEnvRunStatus", status)
        check("OpenEnvRunList", http.get("/v1/openenv/runs").json())
        urls = {"environment_urls": [bandit.base_url]}
        check("OpenEnvInspectResponse", http.post("/v1/openenv/inspect", json=urls).json())
        catalog = http.post("/v1/openenv/tasks", json=urls).json()
        check("OpenEnvTaskCatalogResponse", catalog)
    # the failure diagnosis with its optional evidence, and admission as a queued run had it
    status["state"] = "failed"
    status["failure"] = {
        "schema": "kiln.openenv-run-failure.v1",
        "code": "environment_protocol_error",
        "stage": "collection",
        "retryable": False,
        "message": "SESSION_ERROR",
        "hint": "restart the environment",
        "occurred_unix_ms": 2,
        "protocol_code": "SESSION_ERROR",
        "http_status": 502,
    }
    status["error"] = "SESSION_ERROR"
    status["warnings"] = ["capacity was reached twice"]
    status["admission"] = {**status["admission"], "queue_wait_ms": 0, "admitted_unix_ms": 1}
    record = control.OpenEnvRunStatus.from_json(status)
    check("OpenEnvRunStatus", record.to_json())
    check(
        "OpenEnvRunList", control.RunList(schema=control.RUN_LIST_SCHEMA, runs=[record]).to_json()
    )


def test_the_hf_manifests_are_kiln_s_records() -> None:
    richest = provenance.ExecutionProvenance.create(
        **{
            **{key: getattr(hf.provenance(), key) for key in ("backend", "model", "precision")},
            "build": provenance.BuildProvenance(
                package_version="0.1.0",
                target="linux-x86_64",
                executable_sha256=DIGEST,
                git_commit="0123abc",
                source_tree_sha256=DIGEST,
                source_dirty=False,
            ),
            "kernels": hf.provenance().kernels,
            "configuration": hf.provenance().configuration,
        }
    )
    check("ExecutionProvenanceV1", richest.to_json())
    sft_export = hf.sft_export(optional=True)
    check("HfTrlExportManifestV1", sft_export.to_json())
    assert {"input_adapter"} <= set(sft_export.to_json())
    check("HfTrlExportManifestV1", hf.grpo_export().to_json())
    check("HfTrlTrainingResultV1", hf.result(sft_export).to_json())
    check("HfTrlImportReceiptV1", hf.import_receipt(sft_export).to_json())
    check("SftIngestionReceipt", hf.ingestion().to_json())
    for completion in hf.grpo_group().to_json()["completions"]:
        check("RolloutProvenanceV1", completion["provenance"])


def test_a_task_split_is_kiln_s_record_or_refused() -> None:
    """Kiln's split requires a non-empty name and type and keeps a provider's other fields."""
    splits = task_splits([{"name": "train", "type": "train", "difficulty": "easy"}])
    catalog = TaskCatalog(environment_name="math", task_api="available", splits=splits)
    entry = {"base_url": "http://127.0.0.1:1", "catalog": catalog.to_json()}
    answer = control.TaskCatalogResponse.from_json(
        {"schema": control.TASK_CATALOG_SCHEMA, "catalogs": [entry]}
    )
    check("OpenEnvTaskCatalogResponse", answer.to_json())
    assert answer.to_json()["catalogs"][0]["catalog"]["splits"][0]["difficulty"] == "easy"
    for bad in ({"name": "train"}, {"name": "train", "type": ""}, {"name": "", "type": "test"}):
        with pytest.raises(TaskApiInvalid):
            task_splits([bad])
