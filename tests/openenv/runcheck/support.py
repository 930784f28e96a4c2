"""A complete train-run directory built from real pieces, as the server's train kind lays
one out (kiln_verify.control.layout), and the forgeries the tests make of it.

- the run's bundle is the real oracle collection of tests/openenv/training (its summary
  rewritten, as a train run publishes it, with the sealed training contract and the
  training selection of its own corpus);
- the training contract is a real preflight's, with the collection's behaviour policy;
- the train receipt and adapter manifest are written by the library's writer over the
  selected corpus and a small adapter directory (the chain checks bytes, not tensors);
- the paired evaluation is a real ``run_evaluation`` against the bandit oracle (baseline:
  the worst arm, adapter-less like the behaviour policy; candidate: the best arm under
  the trained adapter's identity), promoted as a server with ``auto_load`` would;
- ``run.json`` is a v5 ``kind=train`` status with the manifest of those files.

:meth:`TrainRun.remanifest` re-signs ``run.json``'s manifest after a tamper, so that only
the deeper link under test can catch it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.control.layout import ARTIFACT_PATHS, RUN_STATUS_FILE
from kiln_verify.control.training.evaluation_status import (
    OpenEnvEnvironmentEvalProgress,
    OpenEnvEnvironmentEvalStatus,
)
from kiln_verify.control.training.preflight import capacity_snapshot, preflight
from kiln_verify.control.training.trainer_status import (
    OPENENV_SOURCE,
    OpenEnvTrainingStatus,
    TrainingDataProvenance,
    job_id,
)
from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.errors import KilnError
from kiln_verify.openenv.evaluate import receipt_bytes, run_evaluation
from kiln_verify.openenv.policy.base import BehaviorPolicyIdentity, PolicyRequest
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.records.evaluation import (
    EnvironmentEvalGate,
    EnvironmentEvaluationReceipt,
)
from kiln_verify.openenv.records.serialize import summary_bytes
from kiln_verify.openenv.records.summary import RolloutSummary, read_summary
from kiln_verify.openenv.runcheck.engine import verify_run
from kiln_verify.openenv.runcheck.records import RunVerificationReport
from kiln_verify.openenv.training.corpus import lineage_from_corpus
from kiln_verify.openenv.training.evidence import (
    TRAIN_RECEIPT_SCHEMA,
    TrainerRun,
    TrainReceipt,
    contract_sha256,
)
from kiln_verify.openenv.training.evidence_io import (
    build_adapter_manifest,
    evidence_bytes,
    write_evidence,
)
from kiln_verify.openenv.training.selection import select_for_training
from tests.control.training.support import FixedSource
from tests.openenv.collect.options import make_controls
from tests.openenv.evaluate.conftest import LANE, best_arm, worst
from tests.openenv.training.conftest import Collected

ADAPTER = "trained-arm"
RUN_ID = "5d1e4c3b-2a19-4f08-8e7d-6c5b4a392817"
ADAPTER_DIGEST = "sha256:" + "c4" * 32


class TrainedPolicy(ScriptedPolicy):
    """The best arm, under the trained adapter's identity (as the resident model serves it)."""

    def identity(self) -> BehaviorPolicyIdentity:
        base = super().identity()
        return dataclasses.replace(
            base, adapter={"name": ADAPTER, "content_sha256": ADAPTER_DIGEST}
        )


def _best(request: PolicyRequest) -> str:
    return best_arm(request)


@dataclass(repr=False)
class TrainRun:
    directory: Path
    adapter: Path

    def __repr__(self) -> str:
        return f"TrainRun({self.directory})"

    def path(self, kind: str) -> Path:
        return self.directory / ARTIFACT_PATHS[kind]

    def verify(self, **overrides: Any) -> RunVerificationReport:
        arguments: dict[str, Any] = {"adapter_dir": self.adapter, **overrides}
        return verify_run(self.directory, **arguments)

    def code(self, **overrides: Any) -> str:
        with pytest.raises(KilnError) as caught:
            self.verify(**overrides)
        return caught.value.code

    def status(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads((self.directory / RUN_STATUS_FILE).read_bytes())
        return value

    def write_status(self, value: dict[str, Any]) -> None:
        (self.directory / RUN_STATUS_FILE).write_bytes(dumps_pretty(value))

    def read_json(self, kind: str) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.path(kind).read_bytes())
        return value

    def write_json(self, kind: str, value: dict[str, Any]) -> None:
        """A rewritten record, re-signed in the manifest (a consistent forgery)."""
        self.path(kind).write_bytes(dumps_pretty(value))
        self.remanifest()

    def remanifest(self) -> None:
        status = self.status()
        status["artifacts"] = manifest(self.directory, [a["kind"] for a in status["artifacts"]])
        self.write_status(status)

    def copy(self, target: Path) -> TrainRun:
        shutil.copytree(self.directory, target / "run")
        shutil.copytree(self.adapter, target / "adapter")
        return TrainRun(target / "run", target / "adapter")


def manifest(directory: Path, kinds: list[str]) -> list[dict[str, Any]]:
    entries = []
    for kind in kinds:
        data = (directory / ARTIFACT_PATHS[kind]).read_bytes()
        entries.append(
            {
                "kind": kind,
                "url": f"/v1/openenv/runs/{RUN_ID}/artifacts/{kind}",
                "sha256": str(sha256_bytes(data)),
                "bytes": len(data),
            }
        )
    return entries


def _contract(summary: RolloutSummary) -> dict[str, Any]:
    body = {"adapter": "base", "output_adapter": ADAPTER}
    capacity = capacity_snapshot(checked_unix_ms=5, queued=0, tracked=1, max_tracked=128)
    receipt = asyncio.run(preflight(body, FixedSource(), capacity))
    contract = receipt.training_contract().to_json()
    assert summary.behavior_policy is not None
    contract["behavior_policy"] = summary.behavior_policy.to_json()
    return contract


def _bundle(collected: Collected, root: Path) -> tuple[RolloutSummary, dict[str, Any], bytes]:
    for kind in ("dataset", "replay"):
        name = ARTIFACT_PATHS[kind]
        shutil.copyfile(collected.directory / name, root / name)
    selection = select_for_training(collected.groups)
    contract = _contract(collected.summary)
    value = collected.summary.to_json()
    value["training_contract"] = contract
    value["training_selection"] = selection.record.to_json()
    summary = read_summary(json.dumps(value).encode())
    (root / ARTIFACT_PATHS["summary"]).write_bytes(summary_bytes(summary))
    return summary, contract, selection.corpus_bytes()


def _training(summary: RolloutSummary, root: Path, adapter: Path, corpus: bytes) -> Any:
    assert summary.training_contract is not None
    (adapter / "nested").mkdir(parents=True)
    (adapter / "adapter_config.json").write_bytes(b'{"r": 4}\n')
    (adapter / "adapter_model.safetensors").write_bytes(bytes(range(256)) * 8)
    (adapter / "nested" / "README.md").write_bytes(b"trained on the bandit oracle\n")
    lineage = lineage_from_corpus(corpus)
    receipt = TrainReceipt(
        schema=TRAIN_RECEIPT_SCHEMA,
        output_adapter=ADAPTER,
        corpus_sha256=str(sha256_bytes(corpus)),
        corpus_bytes=len(corpus),
        training_contract_sha256=contract_sha256(summary.training_contract),
        training_data=lineage,
        trainer=TrainerRun(
            train_py_sha256=str(sha256_bytes(b"# the bundle's pinned runner\n")),
            exit_code=0,
            started_unix_ms=1_700_000_000_000,
            finished_unix_ms=1_700_000_004_250,
            duration_ms=4_249,
        ),
    )
    manifest_record = build_adapter_manifest(
        adapter, receipt=receipt, receipt_data=evidence_bytes(receipt)
    )
    write_evidence(root, receipt, manifest_record)
    return lineage


def _evaluation(root: Path, environment_url: str) -> EnvironmentEvaluationReceipt:
    controls = make_controls([environment_url], **LANE)
    evaluation = asyncio.run(
        run_evaluation(
            controls,
            worst(),
            TrainedPolicy(_best, name="best-arm"),
            root / "environment-evaluation",
            gate=EnvironmentEvalGate(min_mean_improvement=0.0),
        )
    )
    value = evaluation.receipt.to_json()
    value["outcome"] = "promoted"
    value["verdict"] = f"promoted: {evaluation.receipt.evidence.reason}; installed"
    promoted = EnvironmentEvaluationReceipt.from_json(value)
    (root / ARTIFACT_PATHS["environment_eval_receipt"]).write_bytes(receipt_bytes(promoted))
    return promoted


def _training_section(lineage: Any, corpus: bytes) -> OpenEnvTrainingStatus:
    """Kiln's ``training`` section as the train kind ends a promoted candidate's."""
    return OpenEnvTrainingStatus(
        job_id=job_id(RUN_ID),
        state="completed",
        progress=1.0,
        epoch=1,
        adapter_path=f"/state/adapters/{ADAPTER}",
        gate_outcome="promoted",
        training_data=TrainingDataProvenance(
            source=OPENENV_SOURCE,
            admitted_corpus_sha256=str(sha256_bytes(corpus)),
            rows=lineage.groups,
            openenv=lineage,
        ),
    )


def _evaluation_section(
    root: Path, receipt: EnvironmentEvaluationReceipt
) -> OpenEnvEnvironmentEvalStatus:
    """Kiln's ``environment_evaluation`` section of the evaluation that wrote ``receipt``
    (each side's statistics are its published summary's, as the evaluation stage keeps them)."""
    groups, size = receipt.config.groups, receipt.config.group_size
    stats = {
        side: read_summary(
            (root / ARTIFACT_PATHS[f"environment_eval_{side}_summary"]).read_bytes()
        ).stats
        for side in ("baseline", "candidate")
    }
    return OpenEnvEnvironmentEvalStatus(
        state="completed",
        seed_start=receipt.seed_start,
        groups=groups,
        group_size=size,
        baseline=receipt.baseline,
        candidate=receipt.candidate,
        progress=OpenEnvEnvironmentEvalProgress(
            state="completed",
            groups_completed=groups,
            groups_total=groups,
            rollouts_completed=groups * size,
            rollouts_total=groups * size,
        ),
        baseline_stats=stats["baseline"],
        candidate_stats=stats["candidate"],
        evidence=receipt.evidence,
        outcome=receipt.outcome,
        verdict=receipt.verdict,
    )


def build_train_run(collected: Collected, base: Path, environment_url: str) -> TrainRun:
    root, adapter = base / "run", base / "adapter"
    root.mkdir()
    summary, contract, corpus = _bundle(collected, root)
    lineage = _training(summary, root, adapter, corpus)
    receipt = _evaluation(root, environment_url)
    status = {
        "schema": "kiln.openenv-run.v5",
        "run_id": RUN_ID,
        "kind": "train",
        "state": "completed",
        "request": {
            "kind": "train",
            "environment_urls": [environment_url],
            "groups": summary.groups,
            "group_size": summary.group_size,
            "output_adapter": ADAPTER,
        },
        "submitted_unix_ms": 1,
        "admission": {"max_active_runs": 4, "sequence": 1},
        "progress": {
            "groups_completed": summary.groups,
            "groups_total": summary.groups,
            "rollouts_completed": summary.rollout_count,
            "rollouts_total": summary.rollout_count,
        },
        "artifacts": manifest(root, list(ARTIFACT_PATHS)),
        "training_contract": contract,
        "training": _training_section(lineage, corpus).to_json(),
        "environment_evaluation": _evaluation_section(root, receipt).to_json(),
    }
    (root / RUN_STATUS_FILE).write_bytes(dumps_pretty(status))
    return TrainRun(root, adapter)
