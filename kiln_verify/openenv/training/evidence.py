"""The trainer's retained evidence: ``train_receipt`` and ``adapter_manifest`` (our records).

Kiln names both artifact kinds (``OpenEnvArtifact.kind``) but publishes no JSON Schema for
either file (its native trainer writes them), so these are our own records under our own
schema names (docs/training-chain.md says where we depart):

- :class:`TrainReceipt` (``kiln-verify.train-receipt.v1``) binds what was trained to how:
  the admitted corpus (SHA-256 and size of the selected corpus JSONL), its
  ``kiln.openenv-training-data.v1`` lineage (``group_plan_sha256`` included), the
  training contract's digest (:func:`contract_sha256`), the output adapter's name and the
  trainer run (the bundle's ``train.py`` digest, its exit code and timing);
- :class:`AdapterManifest` (``kiln-verify.adapter-manifest.v1``) binds the adapter bytes
  to that receipt: the receipt file's SHA-256 (so the manifest is written after it, as
  Kiln's manifest carries the receipt hash), the corpus digest and group plan again, and
  every adapter file with its relative path, size and SHA-256, plus the total.

Both are shape-checked here (``record_invalid``); whether they agree with each other and
with the files present is :mod:`.chain`'s job, with one code per broken link.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Final, Literal, Self

from pydantic import Field, StrictInt, StrictStr, model_validator

from kiln_verify.core.digest import canonical_digest
from kiln_verify.core.paths import validate_relative_path
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_ADAPTER_FILE_BYTES, MAX_ADAPTER_MANIFEST_FILES
from kiln_verify.openenv.records.summary import TrainingContract
from kiln_verify.openenv.training.lineage import OpenEnvTrainingDataProvenanceV1
from kiln_verify.records import U64, IdentityText, Record, Sha256

__all__ = [
    "ADAPTER_MANIFEST_SCHEMA",
    "TRAIN_RECEIPT_SCHEMA",
    "AdapterFile",
    "AdapterManifest",
    "TrainReceipt",
    "TrainerRun",
    "contract_sha256",
]

TRAIN_RECEIPT_SCHEMA: Final = "kiln-verify.train-receipt.v1"
ADAPTER_MANIFEST_SCHEMA: Final = "kiln-verify.adapter-manifest.v1"

_ExitCode = Annotated[StrictInt, Field(ge=-255, le=255)]


def contract_sha256(contract: TrainingContract) -> str:
    """The training contract's digest: SHA-256 of its canonical JSON (keys sorted at every
    depth, compact), so the digest does not depend on how ``effective_config`` was ordered."""
    return str(canonical_digest(contract.to_json()))


class TrainerRun(Record):
    """One run of the bundle's pinned ``train.py`` in a child process.

    ``exit_code`` is the child's status (negative: killed by that signal); a receipt of an
    unsuccessful run is readable, so a failed run keeps its evidence, but the chain check
    refuses it. Times are Unix milliseconds; ``duration_ms`` is measured on a monotonic
    clock and so need not equal their difference."""

    train_py_sha256: Sha256
    exit_code: _ExitCode
    started_unix_ms: U64
    finished_unix_ms: U64
    duration_ms: U64

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.finished_unix_ms < self.started_unix_ms:
            raise ValueError("finished_unix_ms is before started_unix_ms")
        return self


class TrainReceipt(Record):
    """``kiln-verify.train-receipt.v1``: what the trainer consumed and how it ran."""

    schema_: Literal["kiln-verify.train-receipt.v1"] = Field(TRAIN_RECEIPT_SCHEMA, alias="schema")
    output_adapter: IdentityText
    corpus_sha256: Sha256
    corpus_bytes: Annotated[U64, Field(ge=1)]
    training_contract_sha256: Sha256
    training_data: OpenEnvTrainingDataProvenanceV1
    trainer: TrainerRun


def _relative(value: str) -> str:
    try:
        validate_relative_path(value)
    except KilnError as exc:
        raise ValueError(exc.rule) from None
    return value


class AdapterFile(Record):
    """One file of the adapter directory, by its path relative to that directory."""

    relative_path: Annotated[StrictStr, Field(min_length=1)]
    bytes: Annotated[U64, Field(le=MAX_ADAPTER_FILE_BYTES)]
    sha256: Sha256

    @model_validator(mode="after")
    def _safe_path(self) -> Self:
        _relative(self.relative_path)
        return self


class AdapterManifest(Record):
    """``kiln-verify.adapter-manifest.v1``: the adapter's exact bytes, bound to its receipt.

    ``files`` are sorted by ``relative_path`` (byte order), unique, and ``total_bytes`` is
    their sum."""

    schema_: Literal["kiln-verify.adapter-manifest.v1"] = Field(
        ADAPTER_MANIFEST_SCHEMA, alias="schema"
    )
    adapter_name: IdentityText
    train_receipt_sha256: Sha256
    corpus_sha256: Sha256
    group_plan_sha256: Sha256
    files: list[AdapterFile] = Field(min_length=1, max_length=MAX_ADAPTER_MANIFEST_FILES)
    total_bytes: U64

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        paths = [entry.relative_path.encode("utf-8", "surrogatepass") for entry in self.files]
        if any(left >= right for left, right in itertools.pairwise(paths)):
            raise ValueError("files must be sorted by relative_path with no duplicate")
        if sum(entry.bytes for entry in self.files) != self.total_bytes:
            raise ValueError("total_bytes is not the sum of the files' bytes")
        return self

    def by_path(self) -> dict[str, AdapterFile]:
        return {entry.relative_path: entry for entry in self.files}
