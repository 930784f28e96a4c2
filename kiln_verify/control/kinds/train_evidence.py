"""The blocking steps around a train run's trainer: export, verification, evidence, install.

Each step runs in a worker thread and raises :class:`TrainingStageFailed` with the §10
failure code it stands for, so the executor records exactly one typed failure:

``export_bundle``       the selected GRPO corpus as a recorded-GRPO bundle (``hf
                        export-grpo``'s code) under ``<run>/trainer/``;
                        ``training_submission_failed`` on a refusal
``check_completed``     the trainer's result verified in full (``hf verify --completed``);
                        an incomplete or inconsistent result is ``training_evidence_invalid``
``import_candidate``    the verified PEFT import (``hf import-peft``'s checks against the
                        resident model) into the run's quarantine,
                        ``<run>/trainer/candidate/<name>``: never served from there
``write_training_evidence``  ``train_receipt`` and ``adapter_manifest`` over the candidate's
                        exact files, published together into the run directory
``install_candidate``   the same verified import into the server's adapter store
                        (:func:`~kiln_verify.control.resident.store.install_adapter`);
                        the import is deterministic, so the served files are the
                        candidate's bytes, which the manifest binds

A refusal at import is ``training_evidence_invalid`` too: the adapter the trainer wrote
cannot be the one the evidence describes, and nothing is served.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.executor import artifact_url
from kiln_verify.control.layout import ARTIFACT_PATHS
from kiln_verify.control.request import BASE_ADAPTER
from kiln_verify.control.status import FailureCode, RunArtifact
from kiln_verify.control.training.records import OpenEnvTrainingContract
from kiln_verify.core.digest import hash_file, sha256_bytes
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_TRAINING_EVIDENCE_BYTES
from kiln_verify.openenv.records.summary import TrainingContract
from kiln_verify.openenv.training.evidence import (
    TRAIN_RECEIPT_SCHEMA,
    AdapterManifest,
    TrainerRun,
    TrainReceipt,
    contract_sha256,
)
from kiln_verify.openenv.training.evidence_io import (
    build_adapter_manifest,
    evidence_bytes,
    write_evidence,
)
from kiln_verify.openenv.training.lineage import OpenEnvTrainingDataProvenanceV1

__all__ = [
    "CANDIDATE_DIR",
    "EXPORT_NAME",
    "TRAINER_DIR",
    "Evidence",
    "TrainingStageFailed",
    "check_completed",
    "export_bundle",
    "import_candidate",
    "install_candidate",
    "write_training_evidence",
]

TRAINER_DIR: Final = "trainer"
"""The run's trainer workspace (the export, the quarantined candidate); never served."""
EXPORT_NAME: Final = "train"
CANDIDATE_DIR: Final = f"{TRAINER_DIR}/candidate"


class TrainingStageFailed(Exception):
    """A step of the training stage failed with this §10 code (stage ``training`` unless
    ``code`` is ``training_submission_failed``)."""

    def __init__(self, code: FailureCode, message: str) -> None:
        super().__init__(message)
        self.code: FailureCode = code


def _refused(code: FailureCode, what: str, exc: KilnError) -> TrainingStageFailed:
    return TrainingStageFailed(code, f"{what}: {exc.code}: {exc.rule}")


def export_bundle(config: ServerConfig, run_dir: Path, adapter: str, corpus: str) -> Path:
    """Export the selected corpus; the bundle directory (its ``train.py`` is the runner)."""
    from kiln_verify.control.resident.store import adapters_root
    from kiln_verify.hf.export.source import ExportSource
    from kiln_verify.hf.export.writer import export_grpo

    model = config.model
    assert model is not None  # admission required a resident model
    source = ExportSource(
        model=model.path,
        input_adapter=None if adapter == BASE_ADAPTER else adapters_root(config) / adapter,
        served_model_id=model.served_model_id,
    )
    try:
        outcome = export_grpo(
            source,
            dataset=run_dir / corpus,
            name=EXPORT_NAME,
            output=run_dir / TRAINER_DIR / f"{EXPORT_NAME}.kiln-hf.tar.gz",
        )
    except KilnError as exc:
        raise _refused("training_submission_failed", "the export refused the corpus", exc) from None
    return outcome.directory


def check_completed(bundle: Path) -> None:
    """The trainer's completed bundle, verified in full."""
    from kiln_verify.hf.verify import verify_hf_bundle

    try:
        verify_hf_bundle(bundle, completed=True)
    except KilnError as exc:
        raise _refused(
            "training_evidence_invalid", "the trainer's result does not verify", exc
        ) from None


def import_candidate(config: ServerConfig, bundle: Path, run_dir: Path, name: str) -> Path:
    """The verified import into the run's quarantine; the candidate's directory."""
    from kiln_verify.hf.importer import import_peft

    model = config.model
    assert model is not None
    registry = run_dir / CANDIDATE_DIR
    registry.mkdir(parents=True, exist_ok=True)
    try:
        outcome = import_peft(
            bundle=bundle,
            name=name,
            model=model.path,
            registry=registry,
            served_model_id=model.served_model_id,
        )
    except KilnError as exc:
        raise _refused("training_evidence_invalid", "the adapter fails the import", exc) from None
    return outcome.directory


@dataclass(frozen=True, slots=True)
class Evidence:
    """The two records, as written, and their manifest entries."""

    receipt: TrainReceipt
    manifest: AdapterManifest
    artifacts: list[RunArtifact]


def write_training_evidence(
    run_dir: Path,
    run_id: str,
    *,
    contract: OpenEnvTrainingContract,
    corpus: bytes,
    lineage: OpenEnvTrainingDataProvenanceV1,
    trainer: TrainerRun,
    candidate: Path,
) -> Evidence:
    """Publish ``train_receipt`` and ``adapter_manifest`` and return their entries."""
    sealed = TrainingContract.from_json(contract.to_json())
    receipt = TrainReceipt(
        schema=TRAIN_RECEIPT_SCHEMA,
        output_adapter=str(contract.effective_config.output_name),
        corpus_sha256=str(sha256_bytes(corpus)),
        corpus_bytes=len(corpus),
        training_contract_sha256=contract_sha256(sealed),
        training_data=lineage,
        trainer=trainer,
    )
    try:
        manifest = build_adapter_manifest(
            candidate, receipt=receipt, receipt_data=evidence_bytes(receipt)
        )
        write_evidence(run_dir, receipt, manifest)
    except KilnError as exc:
        raise _refused("training_evidence_invalid", "the evidence cannot be kept", exc) from None
    artifacts = []
    for kind in ("train_receipt", "adapter_manifest"):
        digest = hash_file(run_dir / ARTIFACT_PATHS[kind], max_bytes=MAX_TRAINING_EVIDENCE_BYTES)
        artifacts.append(
            RunArtifact(
                kind=kind,
                url=artifact_url(run_id, kind),
                sha256=str(digest.sha256),
                bytes=digest.size_bytes,
            )
        )
    return Evidence(receipt, manifest, artifacts)


def install_candidate(config: ServerConfig, bundle: Path, name: str) -> Path:
    """Install the trained adapter into the served store; its directory."""
    from kiln_verify.control.resident.store import install_adapter

    try:
        return install_adapter(config, bundle=bundle, name=name).directory
    except KilnError as exc:
        raise _refused("training_evidence_invalid", "the adapter store refused it", exc) from None
