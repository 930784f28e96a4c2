"""The offline check that a training run's evidence belongs together.

:func:`check_training_chain` takes what a downloaded run directory holds (the two evidence
files, the selected corpus, the training contract, the adapter directory and, when the
run status is at hand, its ``training.training_data.openenv`` lineage) and checks every
link in a fixed order, each break with its own code naming the two records that disagree:

=====  ====================================  =========================================
step   link                                  code
=====  ====================================  =========================================
1      both files: regular, no symlink,      ``path_symlink``, ``path_not_regular``,
       at most 4 MiB, valid records          ``limit_exceeded``, ``record_invalid``, ...
2      the trainer exited 0                  ``training_receipt_unsuccessful``
3      manifest binds the receipt (its       ``training_chain_manifest_mismatch``
       SHA-256, adapter, corpus, group plan)
4      receipt ↔ selected corpus bytes        ``training_chain_corpus_mismatch``
5      receipt ↔ lineage recomputed from      ``training_chain_lineage_mismatch``
       the corpus (``group_plan_sha256``)
6      run status lineage ↔ receipt           ``training_chain_status_mismatch``
7      training contract ↔ receipt (digest,   ``training_chain_contract_mismatch``
       output adapter name)
8      manifest ↔ adapter files present       ``training_chain_adapter_mismatch``
       (names, sizes, SHA-256)
=====  ====================================  =========================================

A forgery that rewrites one record and re-binds the records above it is caught by the
first link below that it could not rewrite: the corpus, the contract and the adapter
bytes are checked against their own contents, never against a recorded digest alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.publisher import Pathish
from kiln_verify.errors import (
    TrainingChainAdapterMismatch,
    TrainingChainContractMismatch,
    TrainingChainCorpusMismatch,
    TrainingChainLineageMismatch,
    TrainingChainManifestMismatch,
    TrainingChainStatusMismatch,
    TrainingReceiptUnsuccessful,
    snippet,
)
from kiln_verify.openenv.records.summary import TrainingContract
from kiln_verify.openenv.training.corpus import lineage_from_corpus
from kiln_verify.openenv.training.evidence import AdapterManifest, TrainReceipt, contract_sha256
from kiln_verify.openenv.training.evidence_io import (
    adapter_files,
    hash_adapter_file,
    read_adapter_manifest,
    read_evidence_file,
    read_train_receipt,
)
from kiln_verify.openenv.training.lineage import OpenEnvTrainingDataProvenanceV1

__all__ = ["ChainReport", "check_training_chain"]


@dataclass(frozen=True, slots=True)
class ChainReport:
    """What a passing check established (the digests a report prints)."""

    receipt: TrainReceipt
    manifest: AdapterManifest
    receipt_sha256: str
    manifest_sha256: str
    adapter_files: int
    adapter_bytes: int


def _manifest_binds(manifest: AdapterManifest, receipt: TrainReceipt, receipt_sha: str) -> None:
    checks = (
        ("train_receipt_sha256", manifest.train_receipt_sha256, receipt_sha),
        ("adapter_name", manifest.adapter_name, receipt.output_adapter),
        ("corpus_sha256", manifest.corpus_sha256, receipt.corpus_sha256),
        (
            "group_plan_sha256",
            manifest.group_plan_sha256,
            receipt.training_data.group_plan_sha256,
        ),
    )
    for name, recorded, expected in checks:
        if recorded != expected:
            raise TrainingChainManifestMismatch(
                f"adapter_manifest.{name} does not bind the receipt"
            )


def _corpus(receipt: TrainReceipt, corpus: bytes) -> None:
    if len(corpus) != receipt.corpus_bytes or str(sha256_bytes(corpus)) != receipt.corpus_sha256:
        raise TrainingChainCorpusMismatch(
            f"the selected corpus has {len(corpus)} bytes and SHA-256 {sha256_bytes(corpus)}; "
            f"the receipt records {receipt.corpus_bytes} bytes and {receipt.corpus_sha256}"
        )


def _lineage(receipt: TrainReceipt, corpus: bytes) -> None:
    recomputed = lineage_from_corpus(corpus, source="selected corpus")
    if recomputed != receipt.training_data:
        same_plan = recomputed.group_plan_sha256 == receipt.training_data.group_plan_sha256
        what = "counts or identities" if same_plan else "group_plan_sha256"
        raise TrainingChainLineageMismatch(
            f"the receipt's training_data {what} differ from the corpus's recomputed lineage"
        )


def _contract(receipt: TrainReceipt, contract: TrainingContract) -> None:
    if receipt.training_contract_sha256 != contract_sha256(contract):
        raise TrainingChainContractMismatch(
            "training_contract_sha256 is not the digest of the run's training contract"
        )
    if receipt.output_adapter != contract.effective_config.get("output_name"):
        raise TrainingChainContractMismatch(
            "output_adapter is not the contract's effective_config.output_name"
        )


def _adapter(manifest: AdapterManifest, directory: Pathish) -> int:
    listed = manifest.by_path()
    present = adapter_files(directory)
    missing = sorted(set(listed) - set(present))
    extra = sorted(set(present) - set(listed))
    if missing or extra:
        names = ", ".join(snippet(name, 80) for name in (missing or extra)[:3])
        kind = "missing" if missing else "not listed"
        raise TrainingChainAdapterMismatch(f"adapter files {kind}: {names}")
    for relative in present:
        found = hash_adapter_file(directory, relative)
        if found != listed[relative]:
            raise TrainingChainAdapterMismatch(
                f"{snippet(relative, 80)} has {found.bytes} bytes and SHA-256 {found.sha256}; "
                f"the manifest lists {listed[relative].bytes} bytes and {listed[relative].sha256}"
            )
    return len(present)


def check_training_chain(
    *,
    receipt_path: Pathish,
    manifest_path: Pathish,
    corpus: bytes,
    contract: TrainingContract,
    adapter_dir: Pathish,
    status_lineage: OpenEnvTrainingDataProvenanceV1 | None = None,
) -> ChainReport:
    """Check every link (module table); returns the report or raises the first break."""
    receipt_data = read_evidence_file(receipt_path)
    manifest_data = read_evidence_file(manifest_path)
    receipt = read_train_receipt(receipt_data, source=os.fspath(receipt_path))
    manifest = read_adapter_manifest(manifest_data, source=os.fspath(manifest_path))
    if receipt.trainer.exit_code != 0:
        raise TrainingReceiptUnsuccessful(f"the trainer exited {receipt.trainer.exit_code}, not 0")
    receipt_sha = str(sha256_bytes(receipt_data))
    _manifest_binds(manifest, receipt, receipt_sha)
    _corpus(receipt, corpus)
    _lineage(receipt, corpus)
    if status_lineage is not None and status_lineage != receipt.training_data:
        raise TrainingChainStatusMismatch(
            "training.training_data.openenv is not the receipt's training_data"
        )
    _contract(receipt, contract)
    count = _adapter(manifest, adapter_dir)
    return ChainReport(
        receipt=receipt,
        manifest=manifest,
        receipt_sha256=receipt_sha,
        manifest_sha256=str(sha256_bytes(manifest_data)),
        adapter_files=count,
        adapter_bytes=manifest.total_bytes,
    )
