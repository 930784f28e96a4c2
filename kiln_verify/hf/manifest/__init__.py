"""Typed records of the HF/TRL hand-off (kiln-hf-trl-contract §4) and their readers.

======================  ==============================================================
module                  contents
======================  ==============================================================
``fields``              bounded text, :class:`FileIdentity` (artifact path rules),
                        fixed bundle paths, :class:`SealedDocument` self-digests
``shards``              ``kiln.base-weight-shards.v1`` with its aggregate
``provenance``          ``kiln.execution-provenance.v1`` (Kiln's digest rules)
``sft``                 ``kiln.sft-ingestion.v1`` receipt
``export``              ``kiln.hf-trl-export.v1`` manifest
``result``              ``kiln.hf-trl-result.v1`` and tagged effective-config values
``import_receipt``      ``kiln.hf-trl-import.v1`` and the resident model identity
``grpo``                GRPO rows (:class:`GrpoGroup`) with ``kiln.rollout-provenance.v1``
``read``                strict byte readers (version check, shape, self-digest)
======================  ==============================================================

All records derive from :class:`kiln_verify.records.Record` (the base the OpenEnv records
share; nothing here imports :mod:`kiln_verify.openenv`): unknown keys refused, frozen,
Kiln's struct field order, optional fields omitted rather than ``null``.
Write a document with :func:`document_bytes` (pretty JSON + LF) or, for GRPO rows,
:func:`grpo_row_bytes` (compact + LF).
"""

from __future__ import annotations

from collections.abc import Iterable

from kiln_verify.core.digest import GrpoCorpusHasher, Sha256Digest
from kiln_verify.core.jsonio import dumps_compact, dumps_pretty
from kiln_verify.hf.manifest.export import (
    EXPORT_MANIFEST,
    ExportData,
    ExportManifest,
    ExportModel,
    InputAdapter,
    SftSelection,
    Task,
)
from kiln_verify.hf.manifest.fields import BoundedText, FileIdentity, SealedDocument
from kiln_verify.hf.manifest.grpo import (
    ROLLOUT_PROVENANCE,
    ActionToken,
    GrpoCompletion,
    GrpoGroup,
    RolloutProvenance,
    SamplingRecord,
    TemplateInvocation,
    ThinkingBudget,
    TokenizerIdentity,
    rollout_provenance,
)
from kiln_verify.hf.manifest.import_receipt import (
    IMPORT_RECEIPT,
    ImportReceipt,
    ResidentModelIdentity,
)
from kiln_verify.hf.manifest.provenance import (
    EXECUTION_PROVENANCE,
    BackendProvenance,
    BuildProvenance,
    ConfigurationProvenance,
    ExecutionProvenance,
    KernelContract,
    ModelProvenance,
    PrecisionProvenance,
)
from kiln_verify.hf.manifest.read import (
    parse_grpo_group,
    read_export,
    read_import,
    read_result,
    read_sft_ingestion,
)
from kiln_verify.hf.manifest.result import (
    RESULT_MANIFEST,
    BooleanValue,
    ConfigValue,
    DecimalValue,
    IntegerValue,
    OutputAdapter,
    TextListValue,
    TextValue,
    TrainerInfo,
    TrainingResult,
    UnsignedValue,
    config_value,
)
from kiln_verify.hf.manifest.sft import SFT_INGESTION, RejectedRow, SftIngestionReceipt
from kiln_verify.hf.manifest.shards import (
    BASE_WEIGHT_SHARDS,
    BaseWeightShard,
    BaseWeightShardManifest,
)
from kiln_verify.records import Record

__all__ = [
    "BASE_WEIGHT_SHARDS",
    "EXECUTION_PROVENANCE",
    "EXPORT_MANIFEST",
    "IMPORT_RECEIPT",
    "RESULT_MANIFEST",
    "ROLLOUT_PROVENANCE",
    "SFT_INGESTION",
    "ActionToken",
    "BackendProvenance",
    "BaseWeightShard",
    "BaseWeightShardManifest",
    "BooleanValue",
    "BoundedText",
    "BuildProvenance",
    "ConfigValue",
    "ConfigurationProvenance",
    "DecimalValue",
    "ExecutionProvenance",
    "ExportData",
    "ExportManifest",
    "ExportModel",
    "FileIdentity",
    "GrpoCompletion",
    "GrpoGroup",
    "ImportReceipt",
    "InputAdapter",
    "IntegerValue",
    "KernelContract",
    "ModelProvenance",
    "OutputAdapter",
    "PrecisionProvenance",
    "RejectedRow",
    "ResidentModelIdentity",
    "RolloutProvenance",
    "SamplingRecord",
    "SealedDocument",
    "SftIngestionReceipt",
    "SftSelection",
    "Task",
    "TemplateInvocation",
    "TextListValue",
    "TextValue",
    "ThinkingBudget",
    "TokenizerIdentity",
    "TrainerInfo",
    "TrainingResult",
    "UnsignedValue",
    "config_value",
    "document_bytes",
    "grpo_corpus_sha256",
    "grpo_row_bytes",
    "parse_grpo_group",
    "read_export",
    "read_import",
    "read_result",
    "read_sft_ingestion",
    "rollout_provenance",
]


def document_bytes(record: Record) -> bytes:
    """Pretty JSON (2-space indent, struct order, optional fields omitted) plus one LF."""
    return dumps_pretty(record.to_json())


def grpo_row_bytes(group: GrpoGroup) -> bytes:
    """One canonical GRPO ``train.jsonl`` row: compact JSON in struct order plus one LF."""
    return dumps_compact(group.to_json()) + b"\n"


def grpo_corpus_sha256(groups: Iterable[GrpoGroup]) -> Sha256Digest:
    """``kiln.hf-trl-grpo-corpus.v1`` of in-memory groups, over their canonical rows (§5.5)."""
    hasher = GrpoCorpusHasher()
    for group in groups:
        hasher.update(dumps_compact(group.to_json()))
    return hasher.digest()
