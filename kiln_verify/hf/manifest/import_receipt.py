"""The import receipt ``kiln_hf_import.json`` = ``kiln.hf-trl-import.v1`` (§4.5)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import PlainValidator, StrictBool, WithJsonSchema

from kiln_verify.hf.manifest.export import ExportManifest, ExportModel, Task
from kiln_verify.hf.manifest.fields import BoundedText, SealedDocument, Sha256, bounded_text
from kiln_verify.hf.manifest.shards import BaseWeightShardManifest
from kiln_verify.limits import MAX_HF_TEXT_BYTES
from kiln_verify.records import Record

__all__ = ["IMPORT_RECEIPT", "ImportReceipt", "ResidentModelIdentity"]

IMPORT_RECEIPT: Final = "kiln.hf-trl-import.v1"


def _adapter_name(value: Any) -> str:
    text = bounded_text(value)
    if text.startswith(".") or "/" in text or "\\" in text or ".." in text:
        raise ValueError("must not start with '.' or contain '/', '\\\\' or '..'")
    return text


AdapterName = Annotated[
    str,
    PlainValidator(_adapter_name),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_HF_TEXT_BYTES}),
]


class ResidentModelIdentity(Record):
    """The model an adapter was installed on: the export's model identity, digests only."""

    served_model_id: BoundedText
    base_weight_shard_manifest: BaseWeightShardManifest
    model_config_sha256: Sha256
    tokenizer_vocab_sha256: Sha256
    tokenizer_config_sha256: Sha256
    chat_template_sha256: Sha256
    native_training_chat_template_sha256: Sha256
    trl_training_chat_template_sha256: Sha256

    @classmethod
    def from_export(cls, model: ExportModel) -> ResidentModelIdentity:
        """The identity an export promises (the import compares the resident one to it)."""
        return cls(
            served_model_id=model.served_model_id,
            base_weight_shard_manifest=model.base_weight_shard_manifest,
            model_config_sha256=model.config_file.sha256,
            tokenizer_vocab_sha256=model.tokenizer_vocab_sha256,
            tokenizer_config_sha256=model.tokenizer.sha256,
            chat_template_sha256=model.chat_template.sha256,
            native_training_chat_template_sha256=model.native_training_chat_template.sha256,
            trl_training_chat_template_sha256=model.trl_training_chat_template.sha256,
        )


class ImportReceipt(SealedDocument):
    """``kiln.hf-trl-import.v1``: which export and result an installed adapter came from."""

    _digest_field: ClassVar[str] = "import_sha256"
    _document_tag: ClassVar[dict[str, Any]] = {
        "schema_version": 1,
        "import_type": IMPORT_RECEIPT,
    }

    schema_version: Literal[1] = 1
    import_type: Literal["kiln.hf-trl-import.v1"] = IMPORT_RECEIPT
    adapter_name: AdapterName
    task: Task
    export_sha256: Sha256
    result_sha256: Sha256
    resident_model: ResidentModelIdentity
    used_exported_reference_script: StrictBool
    import_sha256: Sha256

    def matches_export(self, export: ExportManifest) -> bool:
        return (
            self.export_sha256 == export.export_sha256
            and self.task == export.task
            and self.resident_model == ResidentModelIdentity.from_export(export.model)
        )
