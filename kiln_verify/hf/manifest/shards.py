"""The base-weight shard manifest ``kiln.base-weight-shards.v1`` (kiln-hf-trl-contract §4.2).

The base weights never travel in a bundle; this manifest binds them: every
``*.safetensors`` shard by file name, size and digest, sorted by name, plus the
``kiln.base-model-content.v1`` aggregate (§5.4), which is independent of names and order so
that a re-sharded copy of identical tensors files is still recognized only when the shard
bytes are identical.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import Annotated, Final, Literal, Self

from pydantic import Field, StrictStr, model_validator

from kiln_verify.core.digest import Sha256Digest, base_model_aggregate
from kiln_verify.hf.manifest.fields import U64, PositiveU64, Sha256
from kiln_verify.limits import MAX_BASE_SHARDS
from kiln_verify.records import Record

__all__ = [
    "BASE_MODEL_CONTENT",
    "BASE_WEIGHT_SHARDS",
    "SHARD_FILENAME_PATTERN",
    "BaseWeightShard",
    "BaseWeightShardManifest",
]

BASE_WEIGHT_SHARDS: Final = "kiln.base-weight-shards.v1"
BASE_MODEL_CONTENT: Final = "kiln.base-model-content.v1"
SHARD_FILENAME_PATTERN: Final = r"^[A-Za-z0-9._-]{1,243}\.safetensors$"
"""1..255 ASCII bytes of ``[A-Za-z0-9._-]`` ending in ``.safetensors`` (§7)."""


class BaseWeightShard(Record):
    """One weight shard: file name within the model directory, exact size and digest."""

    filename: Annotated[StrictStr, Field(pattern=SHARD_FILENAME_PATTERN)]
    size_bytes: PositiveU64
    sha256: Sha256


class BaseWeightShardManifest(Record):
    """``kiln.base-weight-shards.v1``: shards sorted by file name, total and aggregate.

    Checked on construction: names strictly increasing (sorted, unique), ``total_size_bytes``
    the sum of the sizes, ``aggregate_sha256`` the ``kiln.base-model-content.v1`` aggregate.
    """

    schema_version: Literal[1] = 1
    manifest_type: Literal["kiln.base-weight-shards.v1"] = BASE_WEIGHT_SHARDS
    aggregate_algorithm: Literal["kiln.base-model-content.v1"] = BASE_MODEL_CONTENT
    aggregate_sha256: Sha256
    total_size_bytes: U64
    shards: list[BaseWeightShard] = Field(min_length=1, max_length=MAX_BASE_SHARDS)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        names = [shard.filename for shard in self.shards]
        if any(left >= right for left, right in pairwise(names)):
            raise ValueError("shards must be sorted by filename without duplicates")
        if sum(shard.size_bytes for shard in self.shards) != self.total_size_bytes:
            raise ValueError("total_size_bytes must be the sum of the shard sizes")
        if self.aggregate_sha256 != str(shard_aggregate(self.shards)):
            raise ValueError("aggregate_sha256 is not the kiln.base-model-content.v1 aggregate")
        return self

    @classmethod
    def from_shards(cls, shards: Iterable[BaseWeightShard]) -> BaseWeightShardManifest:
        """Sort the shards by name and compute the total and the aggregate."""
        ordered = sorted(shards, key=lambda shard: shard.filename)
        return cls(
            aggregate_sha256=str(shard_aggregate(ordered)),
            total_size_bytes=sum(shard.size_bytes for shard in ordered),
            shards=ordered,
        )


def shard_aggregate(shards: Iterable[BaseWeightShard]) -> Sha256Digest:
    """``kiln.base-model-content.v1`` over the shards (core :func:`base_model_aggregate`)."""
    return base_model_aggregate(
        (Sha256Digest.parse(shard.sha256), shard.size_bytes) for shard in shards
    )
