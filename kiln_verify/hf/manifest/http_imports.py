"""Kiln's ``ImportPeftResponse``: the 201 answer of ``POST /v1/train/hf/peft/imports/{name}``.

Field for field from ``contracts/kiln-artifacts-v1.schema.json`` (ericflo/kiln @40b8a45e): a
closed record, every key required. ``content_revision`` is the bare hex adapter content
revision (kiln-hf-trl-contract §5.6), ``size_bytes`` the sum of the six installed files and
``files`` their count (6).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr

from kiln_verify.records import Record
from kiln_verify.records.fields import Sha256

__all__ = ["ImportPeftResponse"]

_NAME = r"^[A-Za-z0-9](?:[A-Za-z0-9_-]|\.[A-Za-z0-9_-])*\.?$"
ImportAdapterName = Annotated[StrictStr, Field(min_length=1, max_length=128, pattern=_NAME)]
"""Kiln's ``ImportAdapterName`` (``^[A-Za-z0-9](?:[A-Za-z0-9_-]|\\.(?!\\.))*$``) without the
look-ahead pydantic's regex engine lacks: a ``.`` is followed by a non-dot or ends the name."""
RawSha256 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
Positive = Annotated[StrictInt, Field(ge=1, le=2**64 - 1)]


class ImportPeftResponse(Record):
    """One verified external PEFT result installed as six files (Kiln's record)."""

    status: Literal["imported"]
    name: ImportAdapterName
    task: Literal["sft", "grpo"]
    export_sha256: Sha256
    result_sha256: Sha256
    import_sha256: Sha256
    content_revision: RawSha256
    used_exported_reference_script: StrictBool
    size_bytes: Positive
    files: Positive
