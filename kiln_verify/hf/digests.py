"""Every digest of the HF/TRL hand-off (kiln-hf-trl-contract §5), as pure functions.

=================================  ====================================================
digest                             preimage
=================================  ====================================================
manifest self-digest (§5.1)        canonical JSON of the document minus its digest field
                                   (:func:`manifest_digest`; records: ``compute_digest``)
base-model aggregate (§5.4)        core :func:`~kiln_verify.core.digest.base_model_aggregate`
GRPO corpus (§5.5)                 core :class:`~kiln_verify.core.digest.GrpoCorpusHasher`
SFT kept corpus (§4.6)             ``"kiln.sft-kept-corpus.v1\\0"`` + per kept hash text:
                                   u64-BE length, the ASCII text (``sha256:`` included)
SFT parsed / raw row (§4.6)        ``"kiln.sft-parsed-row.v1\\0"`` + canonical JSON of the
                                   row; ``"kiln.sft-raw-row.v1\\0"`` + trimmed raw line
adapter content revision (§5.6)    weights id and config id, each u64-LE(64) + hex text,
                                   under ``"kiln.adapter-content-revision.v1\\0"``
prompt digest (§4.7)               compact struct-order JSON of the group's ``messages``
scored payload digest (§4.7)       compact ``{"schema","text","trajectory"}`` (no reward)
=================================  ====================================================

Nothing here imports the record models, so the models can call these in their
validators; functions that take records accept anything with ``to_json()``.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

from kiln_verify.core.digest import (
    GrpoCorpusHasher,
    Sha256Digest,
    base_model_aggregate,
    canonical_digest,
    grpo_corpus_digest,
    self_digest,
    sha256_bytes,
)
from kiln_verify.core.jsonio import dumps_canonical, dumps_compact
from kiln_verify.errors import RecordInvalid

__all__ = [
    "ADAPTER_CONFIG_FILE",
    "ADAPTER_WEIGHTS_FILE",
    "SCORED_PAYLOAD_SCHEMA",
    "GrpoCorpusHasher",
    "adapter_content_revision",
    "adapter_weights_id",
    "base_model_aggregate",
    "canonical_digest",
    "grpo_corpus_digest",
    "kept_corpus_digest",
    "manifest_digest",
    "prompt_messages_digest",
    "scored_payload_digest",
    "sft_parsed_row_digest",
    "sft_raw_row_digest",
]

SCORED_PAYLOAD_SCHEMA: Final = "kiln.scored-rollout-payload.v1"
ADAPTER_WEIGHTS_FILE: Final = "adapter_model.safetensors"
ADAPTER_CONFIG_FILE: Final = "adapter_config.json"
_U64_LE = struct.Struct("<Q")
_U64_BE = struct.Struct(">Q")


class _JsonRecord(Protocol):
    def to_json(self) -> dict[str, Any]: ...


def _plain(value: _JsonRecord | Mapping[str, Any]) -> dict[str, Any]:
    return value.to_json() if hasattr(value, "to_json") else dict(value)


def manifest_digest(document: Mapping[str, Any], field: str) -> Sha256Digest:
    """Canonical manifest self-digest (§5.1): the document without ``field``."""
    return self_digest(document, field)


def kept_corpus_digest(kept_row_hashes: Iterable[str]) -> Sha256Digest:
    """``kiln.sft-kept-corpus.v1``: u64-BE length + ASCII text of each kept hash, in order."""
    hasher = hashlib.sha256(b"kiln.sft-kept-corpus.v1\0")
    for text in kept_row_hashes:
        Sha256Digest.parse(text)
        data = text.encode("ascii")
        hasher.update(_U64_BE.pack(len(data)))
        hasher.update(data)
    return Sha256Digest(hasher.hexdigest())


def sft_parsed_row_digest(row: Mapping[str, Any]) -> Sha256Digest:
    """Hash of a kept SFT row: domain tag + canonical (sorted-key) compact JSON."""
    return sha256_bytes(b"kiln.sft-parsed-row.v1\0" + dumps_canonical(dict(row)))


def sft_raw_row_digest(line: bytes) -> Sha256Digest:
    """Hash of an unparseable SFT row: domain tag + the line with ASCII whitespace trimmed."""
    return sha256_bytes(b"kiln.sft-raw-row.v1\0" + line.strip(b" \t\r\n"))


def adapter_weights_id(weights_sha256: Sha256Digest, weights_size: int) -> str:
    """The weights half of the content revision (hex): one file, framed by name and size."""
    if type(weights_size) is not int or not 0 <= weights_size < 2**64:
        raise RecordInvalid("adapter weights size must be an integer in 0..2**64-1")
    name = ADAPTER_WEIGHTS_FILE.encode("ascii")
    hasher = hashlib.sha256(b"kiln.adapter-weights.v1\0")
    hasher.update(_U64_LE.pack(1))
    hasher.update(_U64_LE.pack(len(name)))
    hasher.update(name)
    hasher.update(_U64_LE.pack(weights_size))
    hasher.update(weights_sha256.raw)
    return hasher.hexdigest()


def adapter_content_revision(
    weights_sha256: Sha256Digest, weights_size: int, config_sha256: Sha256Digest
) -> str:
    """``content_revision`` (§5.6) as bare lowercase hex; behaviour policies prefix ``sha256:``.

    ``config_sha256`` is the plain SHA-256 of the ``adapter_config.json`` bytes.
    """
    hasher = hashlib.sha256(b"kiln.adapter-content-revision.v1\0")
    for part in (adapter_weights_id(weights_sha256, weights_size), config_sha256.hex):
        hasher.update(_U64_LE.pack(len(part)))
        hasher.update(part.encode("ascii"))
    return hasher.hexdigest()


def prompt_messages_digest(messages: Sequence[_JsonRecord | Mapping[str, Any]]) -> Sha256Digest:
    """``prompt_messages_sha256``: compact JSON of the messages list in struct order."""
    return sha256_bytes(dumps_compact([_plain(message) for message in messages]))


def scored_payload_digest(
    text: str, trajectory: Sequence[_JsonRecord | Mapping[str, Any]] = ()
) -> Sha256Digest:
    """``scored_payload_sha256``: ``{"schema","text","trajectory"}``; the reward is excluded."""
    payload = {
        "schema": SCORED_PAYLOAD_SCHEMA,
        "text": text,
        "trajectory": [_plain(segment) for segment in trajectory],
    }
    return sha256_bytes(dumps_compact(payload))
