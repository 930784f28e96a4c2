"""Strict readers of the HF/TRL documents: bytes in, validated and self-checked record out.

Every reader parses with :func:`kiln_verify.core.jsonio.loads` (duplicate keys, NaN, bad
UTF-8 and oversize documents refused), names a wrong document type or version
``record_schema_unsupported``, validates the shape (``record_invalid`` with a JSON path)
and, for sealed manifests, recomputes the self-digest (``digest_mismatch``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from kiln_verify.core.jsonio import loads_object
from kiln_verify.hf.manifest.export import ExportManifest
from kiln_verify.hf.manifest.fields import SealedDocument, check_document_tag
from kiln_verify.hf.manifest.grpo import ROLLOUT_PROVENANCE, GrpoGroup
from kiln_verify.hf.manifest.import_receipt import ImportReceipt
from kiln_verify.hf.manifest.result import TrainingResult
from kiln_verify.hf.manifest.sft import SFT_INGESTION, SftIngestionReceipt
from kiln_verify.limits import MAX_MANIFEST_BYTES
from kiln_verify.records import validate_record

__all__ = [
    "parse_grpo_group",
    "read_export",
    "read_import",
    "read_result",
    "read_sft_ingestion",
]

D = TypeVar("D", bound=SealedDocument)


def _sealed(model: type[D], data: bytes | str, source: str | None) -> D:
    value = loads_object(data, max_bytes=MAX_MANIFEST_BYTES, source=source)
    check_document_tag(value, model._document_tag, source=source)
    return validate_record(model, value, source=source).check_digest(source=source)


def read_export(data: bytes | str, *, source: str | None = None) -> ExportManifest:
    return _sealed(ExportManifest, data, source)


def read_result(data: bytes | str, *, source: str | None = None) -> TrainingResult:
    return _sealed(TrainingResult, data, source)


def read_import(data: bytes | str, *, source: str | None = None) -> ImportReceipt:
    return _sealed(ImportReceipt, data, source)


def read_sft_ingestion(data: bytes | str, *, source: str | None = None) -> SftIngestionReceipt:
    value = loads_object(data, max_bytes=MAX_MANIFEST_BYTES, source=source)
    check_document_tag(value, {"schema": SFT_INGESTION}, source=source)
    return validate_record(SftIngestionReceipt, value, source=source)


def parse_grpo_group(
    value: Any, *, source: str | None = None, line: int | None = None
) -> GrpoGroup:
    """Validate one parsed GRPO row (the corpus reader checks the exact bytes separately)."""
    if isinstance(value, dict):
        completions = value.get("completions", value.get("rollouts"))
        for completion in completions if isinstance(completions, list) else ():
            provenance = completion.get("provenance") if isinstance(completion, dict) else None
            if isinstance(provenance, dict):
                check_document_tag(provenance, {"schema": ROLLOUT_PROVENANCE}, source=source)
    return validate_record(GrpoGroup, value, source=source, line=line)
