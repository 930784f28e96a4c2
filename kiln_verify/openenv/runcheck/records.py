"""Our two records of a whole run: the download receipt and the verification report.

Kiln publishes neither (its ``kiln openenv artifact`` downloads one file, and it has no
whole-run verifier), so both carry our own schema names:

- :class:`RunDownloadReceipt` (``kiln-verify.run-download.v1``): what
  ``kiln-verify openenv artifact RUN_ID --all`` wrote: the run, its status file and every
  artifact at its relative path, with digest and size; never the server's base URL;
- :class:`RunVerificationReport` (``kiln-verify.run-verification.v1``): what
  ``kiln-verify openenv verify-run`` established, link by link.

The JSON Schemas are generated into ``contracts/kiln-verify-run-v1.schema.json``
(:mod:`.schema_export`).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StrictStr

from kiln_verify.openenv.records.evaluation import EvaluationDecision, EvaluationOutcome
from kiln_verify.records import F64, U64, Record, Sha256

__all__ = [
    "RUN_DOWNLOAD_SCHEMA",
    "RUN_VERIFICATION_SCHEMA",
    "BundleCheck",
    "EvaluationCheck",
    "RunDownloadReceipt",
    "RunFile",
    "RunVerificationReport",
    "TrainingCheck",
]

RUN_DOWNLOAD_SCHEMA: Final = "kiln-verify.run-download.v1"
RUN_VERIFICATION_SCHEMA: Final = "kiln-verify.run-verification.v1"

_Text = Annotated[StrictStr, Field(min_length=1)]


class RunFile(Record):
    """One artifact of the run: its kind, its path relative to the run directory."""

    kind: _Text
    relative_path: _Text
    sha256: Sha256
    bytes: U64


class RunDownloadReceipt(Record):
    """``kiln-verify.run-download.v1``: a whole run, downloaded and verified file by file."""

    schema_: Literal["kiln-verify.run-download.v1"] = Field(RUN_DOWNLOAD_SCHEMA, alias="schema")
    run_id: _Text
    run_kind: _Text
    state: _Text
    output_dir: _Text
    status_file: _Text
    status_sha256: Sha256
    status_bytes: U64
    files: list[RunFile]


class BundleCheck(Record):
    """One bundle that verified offline (``run``, ``baseline`` or ``candidate``)."""

    name: Literal["run", "baseline", "candidate"]
    summary_path: _Text
    summary_sha256: Sha256
    dataset_sha256: Sha256
    replay_sha256: Sha256
    groups: U64
    rollouts: U64


class TrainingCheck(Record):
    """The training chain that held: corpus, lineage, contract, receipt, manifest, adapter."""

    output_adapter: _Text
    training_contract_sha256: Sha256
    corpus_sha256: Sha256
    corpus_bytes: U64
    group_plan_sha256: Sha256
    train_receipt_sha256: Sha256
    adapter_manifest_sha256: Sha256
    adapter_files: U64
    adapter_bytes: U64


class EvaluationCheck(Record):
    """The paired evaluation that recomputed exactly."""

    receipt_sha256: Sha256
    paired_groups: U64
    improved_groups: U64
    regressed_groups: U64
    tied_groups: U64
    exact_sign_test_p_value: F64
    decision: EvaluationDecision
    outcome: EvaluationOutcome


class RunVerificationReport(Record):
    """``kiln-verify.run-verification.v1``: every link of one run directory that held.

    ``run_id``, ``run_kind`` and ``state`` come from ``run.json`` (absent when the
    directory holds only a bundle); ``links`` names each check that ran, in order."""

    _omit_when_none = frozenset({"run_id", "run_kind", "state", "training", "evaluation"})

    schema_: Literal["kiln-verify.run-verification.v1"] = Field(
        RUN_VERIFICATION_SCHEMA, alias="schema"
    )
    run_dir: _Text
    run_id: _Text | None = None
    run_kind: _Text | None = None
    state: _Text | None = None
    files: list[RunFile]
    bundles: list[BundleCheck] = Field(min_length=1)
    training: TrainingCheck | None = None
    evaluation: EvaluationCheck | None = None
    links: list[_Text] = Field(min_length=1)
