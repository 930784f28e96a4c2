"""The SFT ingestion receipt ``kiln.sft-ingestion.v1`` (kiln-hf-trl-contract §4.6).

It lists, in order, the hash of every kept row and every rejected row with its 1-based
index and reason; ``kept_corpus_sha256`` is the ``kiln.sft-kept-corpus.v1`` digest of the
kept hashes (:func:`kiln_verify.hf.digests.kept_corpus_digest`), recomputed on
construction, so a receipt cannot claim a corpus its row hashes do not make.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Final, Literal, Self

from pydantic import Field, StrictStr, model_validator

from kiln_verify.hf.manifest.fields import U64, PositiveU64, Sha256
from kiln_verify.records import Record

__all__ = [
    "SFT_INGESTION",
    "InvalidRowPolicy",
    "RejectedRow",
    "RejectionReason",
    "SftIngestionReceipt",
    "SftSource",
]

SFT_INGESTION: Final = "kiln.sft-ingestion.v1"
SftSource = Literal["inline", "dataset_path", "named_dataset", "corrections", "recipe", "rust_api"]
InvalidRowPolicy = Literal["fail", "skip"]
RejectionReason = Literal["invalid_json", "empty_messages", "invalid_role", "tokenization_error"]


class RejectedRow(Record):
    """One skipped row: 1-based index among non-blank rows, its hash, why it was refused."""

    row_index: PositiveU64
    row_sha256: Sha256
    reason: RejectionReason


class SftIngestionReceipt(Record):
    """``kiln.sft-ingestion.v1``: the complete, ordered record of SFT row admission."""

    _omit_when_none = frozenset({"source_locator"})

    schema_: Literal["kiln.sft-ingestion.v1"] = Field(SFT_INGESTION, alias="schema")
    source: SftSource
    source_locator: StrictStr | None = None
    invalid_row_policy: InvalidRowPolicy
    rows_read: U64
    rows_kept: PositiveU64
    rows_rejected: U64
    kept_row_hashes: list[Sha256]
    rejected_rows: list[RejectedRow]
    kept_corpus_sha256: Sha256

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        from kiln_verify.hf.digests import kept_corpus_digest

        if self.source_locator is not None and not self.source_locator.strip():
            raise ValueError("source_locator must not be blank")
        if self.rows_read != self.rows_kept + self.rows_rejected:
            raise ValueError("rows_read must equal rows_kept + rows_rejected")
        if len(self.kept_row_hashes) != self.rows_kept:
            raise ValueError("kept_row_hashes must have rows_kept entries")
        if len(self.rejected_rows) != self.rows_rejected:
            raise ValueError("rejected_rows must have rows_rejected entries")
        if self.invalid_row_policy == "fail" and self.rows_rejected:
            raise ValueError("the fail policy rejects no rows (it aborts instead)")
        indexes = [row.row_index for row in self.rejected_rows]
        if any(left >= right for left, right in pairwise(indexes)):
            raise ValueError("rejected row_index values must be strictly increasing")
        if indexes and indexes[-1] > self.rows_read:
            raise ValueError("a rejected row_index exceeds rows_read")
        if self.kept_corpus_sha256 != str(kept_corpus_digest(self.kept_row_hashes)):
            raise ValueError("kept_corpus_sha256 is not the digest of kept_row_hashes")
        return self
