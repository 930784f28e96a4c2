"""The record base both contracts build on: one reading discipline, one set of field types.

The OpenEnv bundle records (:mod:`kiln_verify.openenv.records`) and the HF/TRL manifests
(:mod:`kiln_verify.hf.manifest`) both import this package and never each other, so a
number, a digest, a chat message or a model identity is read by the same rule in either
contract. This package imports only the core (``kiln_verify.core``, ``errors``, ``limits``)
and pydantic; the import contract in ``pyproject.toml`` (``[tool.importlinter]``) keeps it so.

================  ==========================================================================
module            job
================  ==========================================================================
``base``          :class:`Record` (closed, frozen, struct-ordered, omit-when-absent) and
                  :func:`validate_record`, the one path from parsed JSON to a record
``fields``        strict numbers (``F64``, ``U64``, ``Seed``), digests (``Sha256``), identity
                  texts and free-form JSON written with sorted keys
``policy``        the behaviour-policy identity and its adapter (which weights acted)
``provenance``    token-level provenance of one generation (sampled and forced tokens)
``chat``          prompt messages and trajectory segments, shared by rollouts and GRPO rows
``schema``        JSON Schema ``$defs`` from record models (imported on demand)
================  ==========================================================================
"""

from __future__ import annotations

from kiln_verify.records.base import Record, omit_unset, validate_record
from kiln_verify.records.chat import ChatMessage, SegmentKind, TurnSegment
from kiln_verify.records.fields import (
    F64,
    I64_MAX,
    SHA256_PATTERN,
    U64,
    FreeJson,
    FreeObject,
    IdentityText,
    NonNegF64,
    Seed,
    Sha256,
    bits_equal,
    sort_keys,
)
from kiln_verify.records.policy import AdapterIdentity, BehaviorPolicyIdentity
from kiln_verify.records.provenance import (
    MAX_LOGPROB,
    SamplingParameters,
    TokenProvenance,
    TokenSource,
)

__all__ = [
    "F64",
    "I64_MAX",
    "MAX_LOGPROB",
    "SHA256_PATTERN",
    "U64",
    "AdapterIdentity",
    "BehaviorPolicyIdentity",
    "ChatMessage",
    "FreeJson",
    "FreeObject",
    "IdentityText",
    "NonNegF64",
    "Record",
    "SamplingParameters",
    "Seed",
    "SegmentKind",
    "Sha256",
    "TokenProvenance",
    "TokenSource",
    "TurnSegment",
    "bits_equal",
    "omit_unset",
    "sort_keys",
    "validate_record",
]
