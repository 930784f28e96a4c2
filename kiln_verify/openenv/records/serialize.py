"""Exact bytes of every bundle file and every digest preimage (kiln-openenv-contract §4).

This module is the single place where a record becomes bytes:

* a corpus line is compact JSON + one LF (:func:`rollout_line_bytes`);
* the replay manifest, the summary and the reports are pretty JSON + one LF
  (:func:`replay_bytes`, :func:`summary_bytes`, :func:`report_bytes`);
* each digest of §4 is one function here, named after the field it fills.

Typed records keep Kiln's struct key order; free-form values inside them (observations,
reset payloads, state, schemas) are written with keys sorted recursively, so "compact JSON
of a free-form value" is the same bytes as its canonical JSON. Floats are spelled by
:func:`kiln_verify.core.jsonio.format_float`.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from kiln_verify.core.digest import Sha256Digest, canonical_digest, sha256_bytes
from kiln_verify.core.jsonenc import parsed_text
from kiln_verify.core.jsonfastwrite import compact_bytes, pretty_bytes
from kiln_verify.core.jsonio import dumps_compact
from kiln_verify.errors import LimitExceeded, RecordInvalid, SummaryVersionUnsupported
from kiln_verify.limits import (
    MAX_OPENENV_DATASET_BYTES,
    MAX_OPENENV_REPLAY_BYTES,
    MAX_OPENENV_SUMMARY_BYTES,
)
from kiln_verify.openenv.protocol.identity import DiscoveryDocuments
from kiln_verify.openenv.records.observation import ObservationRecord
from kiln_verify.openenv.records.replay import ReplayGroup, ReplayManifest
from kiln_verify.openenv.records.rollout import AgenticGroup
from kiln_verify.openenv.records.summary import (
    SUMMARY_SCHEMA,
    RolloutSummary,
    check_version_rules,
)
from kiln_verify.openenv.records.writefast import observation_compact, record_pretty, record_tree
from kiln_verify.records import ChatMessage, Record, sort_keys

__all__ = [
    "GROUP_PLAN_ITEM_SCHEMA",
    "GROUP_PLAN_SCHEMA",
    "DatasetHasher",
    "action_schema_sha256",
    "dataset_bytes",
    "discovery_sha256",
    "effective_reset_payload",
    "group_plan_sha256",
    "messages_sha256",
    "replay_bytes",
    "replay_group_tree",
    "report_bytes",
    "reset_observation_sha256",
    "reset_plan_sha256",
    "reset_sha256",
    "rollout_line_bytes",
    "schema_sha256",
    "seed_free_template",
    "summary_bytes",
    "summary_file_sha256",
]

GROUP_PLAN_SCHEMA: Final = "kiln.openenv-group-plan.v1"
GROUP_PLAN_ITEM_SCHEMA: Final = "kiln.openenv-group-plan-item.v1"
_U64_BE = struct.Struct(">Q")
_REPLAY_GROUP_DEPTH: Final = 2
"""A replay group's depth in the manifest: an item of the root object's ``groups`` list."""


# --- files ---------------------------------------------------------------------------------


def rollout_line_bytes(group: AgenticGroup) -> bytes:
    """One corpus line: compact JSON of the group + ``\\n``."""
    return compact_bytes(group.to_json()) + b"\n"


def dataset_bytes(groups: Iterable[AgenticGroup]) -> bytes:
    """The whole corpus file (at most ``MAX_OPENENV_DATASET_BYTES``)."""
    hasher = DatasetHasher()
    chunks = [hasher.add(group) for group in groups]
    return b"".join(chunks)


class DatasetHasher:
    """Streams corpus lines into SHA-256 while counting bytes against the dataset cap.

    ``add`` returns the line's bytes so a writer can hash and write in one pass;
    ``sha256``/``size`` are ``dataset_sha256``/``dataset_bytes`` of the summary.
    """

    def __init__(self, max_bytes: int = MAX_OPENENV_DATASET_BYTES) -> None:
        self._hash = hashlib.sha256()
        self._max = max_bytes
        self.size = 0
        self.lines = 0

    def add(self, group: AgenticGroup) -> bytes:
        return self.add_line(rollout_line_bytes(group))

    def add_line(self, line: bytes) -> bytes:
        """:meth:`add` of a line :func:`rollout_line_bytes` already wrote."""
        if self.size + len(line) > self._max:
            raise LimitExceeded(
                "rollout corpus",
                limit="MAX_OPENENV_DATASET_BYTES",
                bound=self._max,
                observed=self.size + len(line),
            )
        self._hash.update(line)
        self.size += len(line)
        self.lines += 1
        return line

    @property
    def sha256(self) -> Sha256Digest:
        return Sha256Digest(self._hash.hexdigest())


def _capped(data: bytes, cap: int, limit: str, what: str) -> bytes:
    if len(data) > cap:
        raise LimitExceeded(what, limit=limit, bound=cap, observed=len(data))
    return data


def _pretty(record: Record, cap: int, limit: str, what: str) -> bytes:
    return _capped(pretty_bytes(record.to_json()), cap, limit, what)


def replay_group_tree(group: ReplayGroup) -> Any | None:
    """The replay group laid out as the manifest holds it (an item of ``groups``, depth
    2), for :func:`replay_bytes`'s ``group_trees``; ``None`` where the layout does not
    write it."""
    return record_tree(group, _REPLAY_GROUP_DEPTH)


def replay_bytes(manifest: ReplayManifest, group_trees: Sequence[Any | None] = ()) -> bytes:
    """The replay file: pretty JSON + ``\\n`` (refused above ``MAX_OPENENV_REPLAY_BYTES``).

    ``dumps_pretty(manifest.to_json())``, written by
    :func:`~kiln_verify.openenv.records.writefast.record_pretty` where it proves its bytes
    (the reference otherwise). ``group_trees``: :func:`replay_group_tree` of the first
    groups, already laid out (the journal laid each group out as it ended); a ``None`` or
    a missing one is laid out here.
    """
    given: dict[str, Any] | None = None
    if any(tree is not None for tree in group_trees):
        trees = []
        for index, group in enumerate(manifest.groups):
            tree = group_trees[index] if index < len(group_trees) else None
            trees.append(replay_group_tree(group) if tree is None else tree)
        given = {"groups": trees} if all(tree is not None for tree in trees) else None
    data = record_pretty(manifest) if given is None else record_pretty(manifest, given)
    return _capped(data, MAX_OPENENV_REPLAY_BYTES, "MAX_OPENENV_REPLAY_BYTES", "replay")


def summary_bytes(summary: RolloutSummary) -> bytes:
    """The summary file: pretty JSON + ``\\n``. Only v5 is ever written."""
    if summary.schema_ != SUMMARY_SCHEMA:
        raise SummaryVersionUnsupported(f"only {SUMMARY_SCHEMA} is written")
    check_version_rules(summary)
    return _pretty(summary, MAX_OPENENV_SUMMARY_BYTES, "MAX_OPENENV_SUMMARY_BYTES", "summary")


def report_bytes(record: Record) -> bytes:
    """Any other record (reports, evaluation receipt): pretty JSON + ``\\n``."""
    return pretty_bytes(record.to_json())


# --- reset payloads ------------------------------------------------------------------------


def seed_free_template(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A reset template with any ``seed`` key removed (Kiln's "normalize", §5.2)."""
    return {key: value for key, value in payload.items() if key != "seed"}


def effective_reset_payload(template: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The exact reset ``data`` for a group: the template with ``seed`` set (sorted keys)."""
    payload = dict(template)
    payload["seed"] = seed
    result: dict[str, Any] = sort_keys(payload)
    return result


# --- digests (one function per §4 preimage) ------------------------------------------------


def _free_digest(value: Any) -> Sha256Digest:
    # Compact JSON of a free-form value with recursively sorted keys == canonical JSON.
    return canonical_digest(value)


def reset_plan_sha256(templates: Sequence[Mapping[str, Any]]) -> Sha256Digest:
    """Compact JSON of the array of seed-free templates, one per environment, in order."""
    for template in templates:
        if "seed" in template:
            raise RecordInvalid("a reset-plan template must not contain 'seed'")
    return _free_digest(list(templates))


def reset_sha256(payload: Mapping[str, Any], *, parsed: bool = False) -> Sha256Digest:
    """``reset_sha256`` of rollout provenance: compact JSON of the effective reset payload.

    ``parsed``: the payload was read by the strict parser (the verifier), so
    :func:`~kiln_verify.core.jsonenc.parsed_text` writes the same canonical bytes faster.
    """
    if parsed:
        return sha256_bytes(parsed_text(dict(payload), canonical=True).encode("utf-8"))
    return _free_digest(dict(payload))


def action_schema_sha256(action_schema: Any) -> Sha256Digest:
    """``action_schema_sha256``: compact JSON of the discovered ``schema.action``."""
    return _free_digest(action_schema)


def schema_sha256(schema_document: Any) -> Sha256Digest:
    """Identity ``schema_sha256``: canonical JSON of the raw ``/schema`` response."""
    return canonical_digest(schema_document)


def discovery_sha256(documents: DiscoveryDocuments) -> Sha256Digest:
    """Identity ``discovery_sha256``: canonical JSON of the ``kiln.openenv-discovery.v1``
    preimage over the four raw discovery documents."""
    return canonical_digest(documents.preimage())


def messages_sha256(messages: Sequence[ChatMessage]) -> Sha256Digest:
    """Group-integrity hash of a candidate's initial messages (compact JSON of the list)."""
    return sha256_bytes(compact_bytes([message.to_json() for message in messages]))


def reset_observation_sha256(observation: ObservationRecord) -> Sha256Digest:
    """Group-integrity hash of a candidate's reset observation (compact JSON)."""
    return sha256_bytes(observation_compact(observation))


def summary_file_sha256(data: bytes) -> Sha256Digest:
    """Evaluation ``*_summary_sha256``: SHA-256 of the summary file's exact bytes."""
    return sha256_bytes(data)


def group_plan_sha256(items: Iterable[Mapping[str, Any]]) -> Sha256Digest:
    """``group_plan_sha256`` of ``kiln.openenv-training-data.v1`` (§3.3).

    ``items`` are, per group in order, mappings with ``group_index`` (1-based),
    ``environment_name``, ``environment_base_url``, ``openapi_version`` (or None),
    ``discovery_sha256`` (or None), ``environment_schema_sha256``, ``action_schema_sha256``,
    ``reset_sha256``, ``seed`` and ``rollouts``. Preimage: ``GROUP_PLAN_SCHEMA`` + NUL,
    then per item an 8-byte big-endian length and the compact JSON of the item (schema
    tag first, keys in the order listed).
    """
    hasher = hashlib.sha256(GROUP_PLAN_SCHEMA.encode("ascii") + b"\0")
    keys = (
        "group_index",
        "environment_name",
        "environment_base_url",
        "openapi_version",
        "discovery_sha256",
        "environment_schema_sha256",
        "action_schema_sha256",
        "reset_sha256",
        "seed",
        "rollouts",
    )
    for item in items:
        ordered: dict[str, Any] = {"schema": GROUP_PLAN_ITEM_SCHEMA}
        for key in keys:
            ordered[key] = item.get(key)
        body = dumps_compact(ordered)
        hasher.update(_U64_BE.pack(len(body)))
        hasher.update(body)
    return Sha256Digest(hasher.hexdigest())
