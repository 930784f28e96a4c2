"""A complete, consistent training chain in a directory, built from the real collection.

The selected corpus and its lineage are the real ones; the adapter is two small files (the
chain checks bytes, not tensors); the receipt and manifest are written by the library's own
writer. :func:`rewrite` re-signs a tampered receipt so that only a deeper link can catch it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.openenv.records.summary import TRAINING_CONTRACT_SCHEMA, TrainingContract
from kiln_verify.openenv.training.chain import ChainReport, check_training_chain
from kiln_verify.openenv.training.corpus import lineage_from_corpus
from kiln_verify.openenv.training.evidence import (
    TRAIN_RECEIPT_SCHEMA,
    AdapterManifest,
    TrainerRun,
    TrainReceipt,
    contract_sha256,
)
from kiln_verify.openenv.training.evidence_io import (
    ADAPTER_MANIFEST_FILE,
    TRAIN_RECEIPT_FILE,
    build_adapter_manifest,
    evidence_bytes,
    write_evidence,
)
from kiln_verify.openenv.training.lineage import OpenEnvTrainingDataProvenanceV1
from kiln_verify.openenv.training.selection import select_for_training
from tests.openenv.training.conftest import Collected

ADAPTER = "trained-arm"
TRAIN_PY = b"# the bundle's pinned runner\n"


def contract_for(collected: Collected, **config: Any) -> TrainingContract:
    effective = {
        "output_name": ADAPTER,
        "base_adapter": None,
        "behavior_policy": "no_importance_correction",
        "learning_rate": 0.0001,
        **config,
    }
    return TrainingContract(
        schema=TRAINING_CONTRACT_SCHEMA,
        effective_config=effective,
        behavior_policy=collected.summary.behavior_policy,
    )


@dataclass(repr=False)
class Chain:
    directory: Path
    corpus: bytes
    contract: TrainingContract
    lineage: OpenEnvTrainingDataProvenanceV1
    receipt: TrainReceipt
    manifest: AdapterManifest

    def __repr__(self) -> str:  # hypothesis prints the fixture of a failing example
        return f"Chain({self.directory})"

    @property
    def receipt_path(self) -> Path:
        return self.directory / "evidence" / TRAIN_RECEIPT_FILE

    @property
    def manifest_path(self) -> Path:
        return self.directory / "evidence" / ADAPTER_MANIFEST_FILE

    @property
    def adapter(self) -> Path:
        return self.directory / "adapter"

    def check(self, **overrides: Any) -> ChainReport:
        arguments: dict[str, Any] = {
            "receipt_path": self.receipt_path,
            "manifest_path": self.manifest_path,
            "corpus": self.corpus,
            "contract": self.contract,
            "adapter_dir": self.adapter,
            "status_lineage": self.lineage,
        }
        return check_training_chain(**{**arguments, **overrides})

    def rewrite(self, receipt: dict[str, Any] | None = None) -> None:
        """Write ``receipt`` (a JSON value, default the current receipt's) and a manifest
        re-bound to its bytes: a consistent forgery of the two evidence files."""
        value = receipt if receipt is not None else self.receipt.to_json()
        data = (json.dumps(value, indent=2) + "\n").encode()
        manifest = self.manifest.to_json()
        manifest["train_receipt_sha256"] = str(sha256_bytes(data))
        manifest["adapter_name"] = value["output_adapter"]
        manifest["corpus_sha256"] = value["corpus_sha256"]
        manifest["group_plan_sha256"] = value["training_data"]["group_plan_sha256"]
        self.receipt_path.write_bytes(data)
        self.manifest_path.write_bytes((json.dumps(manifest, indent=2) + "\n").encode())


def build_chain(collected: Collected, directory: Path, *, exit_code: int = 0) -> Chain:
    corpus = select_for_training(collected.groups).corpus_bytes()
    lineage = lineage_from_corpus(corpus)
    contract = contract_for(collected)
    adapter = directory / "adapter"
    (adapter / "nested").mkdir(parents=True)
    (adapter / "adapter_config.json").write_bytes(b'{"r": 4}\n')
    (adapter / "adapter_model.safetensors").write_bytes(bytes(range(256)) * 8)
    (adapter / "nested" / "README.md").write_bytes(b"trained on the bandit oracle\n")
    receipt = TrainReceipt(
        schema=TRAIN_RECEIPT_SCHEMA,
        output_adapter=ADAPTER,
        corpus_sha256=str(sha256_bytes(corpus)),
        corpus_bytes=len(corpus),
        training_contract_sha256=contract_sha256(contract),
        training_data=lineage,
        trainer=TrainerRun(
            train_py_sha256=str(sha256_bytes(TRAIN_PY)),
            exit_code=exit_code,
            started_unix_ms=1_700_000_000_000,
            finished_unix_ms=1_700_000_004_250,
            duration_ms=4_249,
        ),
    )
    manifest = build_adapter_manifest(
        adapter, receipt=receipt, receipt_data=evidence_bytes(receipt)
    )
    (directory / "evidence").mkdir()
    write_evidence(directory / "evidence", receipt, manifest)
    return Chain(directory, corpus, contract, lineage, receipt, manifest)
