"""The export manifest ``kiln_hf_export.json`` = ``kiln.hf-trl-export.v1`` (§4.1)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal, Self

from pydantic import Field, model_validator

from kiln_verify.hf.manifest.fields import (
    U64,
    BoundedText,
    FileIdentity,
    PositiveU64,
    SealedDocument,
    Sha256,
    at,
)
from kiln_verify.hf.manifest.provenance import ExecutionProvenance
from kiln_verify.hf.manifest.sft import InvalidRowPolicy
from kiln_verify.hf.manifest.shards import BaseWeightShardManifest
from kiln_verify.records import Record

__all__ = [
    "EXPORT_MANIFEST",
    "ExportData",
    "ExportManifest",
    "ExportModel",
    "InputAdapter",
    "SftSelection",
    "Task",
]

EXPORT_MANIFEST: Final = "kiln.hf-trl-export.v1"
Task = Literal["sft", "grpo"]

ModelConfigFile = Annotated[FileIdentity, at("kiln_model_config.json")]
TokenizerFile = Annotated[FileIdentity, at("tokenizer.json")]
ChatTemplateFile = Annotated[FileIdentity, at("chat_template.jinja")]
NativeTemplateFile = Annotated[FileIdentity, at("kiln_training_chat_template.jinja")]
TrlTemplateFile = Annotated[FileIdentity, at("training_chat_template.jinja")]
DatasetFile = Annotated[FileIdentity, at("train.jsonl")]
IngestionFile = Annotated[FileIdentity, at("sft_ingestion.json")]
SplitFile = Annotated[FileIdentity, at("split_manifest.json")]
ScriptFile = Annotated[FileIdentity, at("train.py")]
LockFile = Annotated[FileIdentity, at("requirements.lock")]
AdapterConfigFile = Annotated[FileIdentity, at("input_adapter/adapter_config.json")]
AdapterWeightsFile = Annotated[FileIdentity, at("input_adapter/adapter_model.safetensors")]
AdapterManifestFile = Annotated[FileIdentity, at("input_adapter/adapter_manifest.json")]


class ExportModel(Record):
    """The served model: id, base shards, vocabulary and the five exported model files."""

    served_model_id: BoundedText
    base_weight_shard_manifest: BaseWeightShardManifest
    tokenizer_vocab_sha256: Sha256
    config_file: ModelConfigFile = Field(alias="model_config")
    tokenizer: TokenizerFile
    chat_template: ChatTemplateFile
    native_training_chat_template: NativeTemplateFile
    trl_training_chat_template: TrlTemplateFile


class SftSelection(Record):
    """The compact SFT admission summary, cross-checked against ``sft_ingestion.json``."""

    invalid_row_policy: InvalidRowPolicy
    label_policy: Literal["assistant_only_generation_spans"] = "assistant_only_generation_spans"
    rows_read: U64
    rows_kept: PositiveU64
    rows_rejected: U64
    kept_corpus_sha256: Sha256
    ingestion_receipt: IngestionFile

    @model_validator(mode="after")
    def _counts(self) -> Self:
        if self.rows_read != self.rows_kept + self.rows_rejected:
            raise ValueError("rows_read must equal rows_kept + rows_rejected")
        return self


class ExportData(Record):
    """The exported corpus and, per task, its SFT selection or rollout-provenance schema."""

    _omit_when_none = frozenset({"sft_selection", "rollout_provenance_schema", "split_manifest"})

    source_name: BoundedText
    format: Literal["sft_messages_jsonl", "grpo_groups_jsonl"]
    row_count: PositiveU64
    ordered_corpus_sha256: Sha256
    dataset: DatasetFile
    sft_selection: SftSelection | None = None
    rollout_provenance_schema: Literal["kiln.rollout-provenance.v1"] | None = None
    split_manifest: SplitFile | None = None


class InputAdapter(Record):
    """An optional adapter training starts from (its Kiln manifest only if it had one)."""

    _omit_when_none = frozenset({"kiln_manifest"})

    name: BoundedText
    config: AdapterConfigFile
    model: AdapterWeightsFile
    kiln_manifest: AdapterManifestFile | None = None


_FORMATS: Final = {"sft": "sft_messages_jsonl", "grpo": "grpo_groups_jsonl"}


class ExportManifest(SealedDocument):
    """``kiln.hf-trl-export.v1``, written by the exporter before external training.

    Checked on construction: task ↔ data format, the SFT or GRPO data rules, and the
    execution provenance's model digests equal to the exported model files (the TRL
    template is deliberately not in the provenance). The self-digest is checked by
    :meth:`check_digest` (readers in :mod:`kiln_verify.hf.manifest.read` always do).
    """

    _digest_field: ClassVar[str] = "export_sha256"
    _document_tag: ClassVar[dict[str, Any]] = {
        "schema_version": 1,
        "manifest_type": EXPORT_MANIFEST,
    }
    _omit_when_none = frozenset({"input_adapter"})

    schema_version: Literal[1] = 1
    manifest_type: Literal["kiln.hf-trl-export.v1"] = EXPORT_MANIFEST
    task: Task
    source_execution_provenance: ExecutionProvenance
    model: ExportModel
    data: ExportData
    reference_script: ScriptFile
    environment_lock: LockFile
    input_adapter: InputAdapter | None = None
    export_sha256: Sha256

    @model_validator(mode="after")
    def _rules(self) -> Self:
        data = self.data
        if data.format != _FORMATS[self.task]:
            raise ValueError(f"task {self.task!r} requires data.format {_FORMATS[self.task]!r}")
        if self.task == "sft":
            selection = data.sft_selection
            if selection is None or data.rollout_provenance_schema is not None:
                raise ValueError("an SFT export has sft_selection and no rollout_provenance_schema")
            if data.row_count != selection.rows_kept:
                raise ValueError("data.row_count must equal sft_selection.rows_kept")
            if data.ordered_corpus_sha256 != selection.kept_corpus_sha256:
                raise ValueError(
                    "ordered_corpus_sha256 must equal sft_selection.kept_corpus_sha256"
                )
        elif data.rollout_provenance_schema is None or data.sft_selection is not None:
            raise ValueError("a GRPO export has rollout_provenance_schema and no sft_selection")
        model = self.model
        recorded = self.source_execution_provenance.model
        pairs = (
            ("model_config_sha256", recorded.model_config_sha256, model.config_file.sha256),
            ("tokenizer_config_sha256", recorded.tokenizer_config_sha256, model.tokenizer.sha256),
            (
                "tokenizer_vocab_sha256",
                recorded.tokenizer_vocab_sha256,
                model.tokenizer_vocab_sha256,
            ),
            ("chat_template_sha256", recorded.chat_template_sha256, model.chat_template.sha256),
            (
                "training_chat_template_sha256",
                recorded.training_chat_template_sha256,
                model.native_training_chat_template.sha256,
            ),
        )
        for name, left, right in pairs:
            if left != right:
                raise ValueError(
                    f"source_execution_provenance.model.{name} differs from the exported file"
                )
        return self
