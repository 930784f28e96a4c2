"""The HTTP export registry's wire records: Kiln's shapes, exactly (artifacts schema §4.9).

Both sides use them: the server (:mod:`kiln_verify.control.hf_exports`) writes them, the
client (:mod:`kiln_verify.control_client.hf_exports`) validates every answer against them,
and neither may import the other, so they live with the HF/TRL contract's records. Every
record is closed (``extra="forbid"``) as Kiln's is; the requests' exactly-one-source rule
is checked by the registry (it needs the adapter set and the file system as well).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import Field, StrictStr

from kiln_verify.hf.manifest.export import ExportManifest, Task
from kiln_verify.hf.manifest.sft import InvalidRowPolicy
from kiln_verify.limits import MAX_GRPO_GROUPS
from kiln_verify.records import Record, Sha256

__all__ = [
    "EXPORTS_PATH",
    "EXPORT_NAME",
    "DeleteExportResponse",
    "ExportDetail",
    "ExportList",
    "ExportName",
    "ExportSummary",
    "GrpoExportRequest",
    "SftExportRequest",
    "download_path",
    "export_path",
]

EXPORT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
"""Kiln's ``ExportName``: 1..128 ASCII characters, alphanumeric first, then ``[A-Za-z0-9_-]``."""

EXPORTS_PATH: Final = "/v1/train/hf/exports"

# anchored: pydantic's ``pattern`` searches (an unanchored one let "a/b" through to the
# registry's file system, a 500)
ExportName = Annotated[
    StrictStr, Field(min_length=1, max_length=128, pattern=f"^{EXPORT_NAME.pattern}$")
]


def export_path(name: str) -> str:
    """``/v1/train/hf/exports/{name}``: the one place a name becomes a URL path."""
    return f"{EXPORTS_PATH}/{name}"


def download_path(name: str) -> str:
    return f"{export_path(name)}/download"


class ExportSummary(Record):
    """Kiln's ``ExportSummary``: a published export's identity and download path."""

    name: ExportName
    task: Task
    export_sha256: Sha256
    source_name: StrictStr = Field(min_length=1)
    row_count: int = Field(ge=1, strict=True)
    ordered_corpus_sha256: Sha256
    input_adapter: StrictStr | None
    bundle_filename: StrictStr = Field(min_length=1)
    download_url: StrictStr = Field(min_length=1)

    @classmethod
    def of(cls, name: str, manifest: ExportManifest) -> ExportSummary:
        adapter = manifest.input_adapter
        return cls(
            name=name,
            task=manifest.task,
            export_sha256=manifest.export_sha256,
            source_name=manifest.data.source_name,
            row_count=manifest.data.row_count,
            ordered_corpus_sha256=manifest.data.ordered_corpus_sha256,
            input_adapter=None if adapter is None else adapter.name,
            bundle_filename=f"{name}.kiln-hf",
            download_url=download_path(name),
        )


class ExportList(Record):
    """Kiln's ``ExportList``: every retained export, sorted by name."""

    data: list[ExportSummary]


class ExportDetail(Record):
    """Kiln's ``ExportDetail``: the summary and the complete self-verifying manifest."""

    summary: ExportSummary
    manifest: dict[str, Any]


class DeleteExportResponse(Record):
    """Kiln's ``DeleteExportResponse``."""

    status: Literal["deleted"]
    name: ExportName


class SftExportRequest(Record):
    """Kiln's ``SftExportRequest`` (closed): exactly one of non-empty ``examples``,
    non-blank ``dataset_path`` or non-blank ``dataset``."""

    name: ExportName
    examples: list[dict[str, Any]] | None = None
    """Each one row of an SFT file, admitted by the same rules (``invalid_row_policy``)."""
    dataset_path: StrictStr | None = None
    dataset: StrictStr | None = None
    invalid_row_policy: InvalidRowPolicy = "fail"
    input_adapter: StrictStr | None = None
    split_manifest: dict[str, Any] | None = None


class GrpoExportRequest(Record):
    """Kiln's ``GrpoExportRequest`` (closed): exactly one of non-empty ``groups`` or a
    non-blank ``dataset_path``."""

    name: ExportName
    groups: list[dict[str, Any]] | None = Field(default=None, max_length=MAX_GRPO_GROUPS)
    """Each a ``GrpoGroup``, parsed and canonically serialized by the registry."""
    dataset_path: StrictStr | None = None
    input_adapter: StrictStr | None = None
    split_manifest: dict[str, Any] | None = None
