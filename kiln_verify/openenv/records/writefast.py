"""The replay manifest and observation records written by ``orjson``, proven equal.

Record-shaped uses of :mod:`kiln_verify.core.jsonfastwrite` (which explains when an
``orjson`` text is accepted). :func:`replay_fast` builds the replay manifest's tree
without ``to_json`` for the records repeated per exchange (``to_json`` re-sorted every
free-form value in Python, about as costly as writing): each free-form value is written
once by ``orjson`` with sorted keys, re-indented to its fixed depth in the manifest and
inserted as an ``orjson.Fragment``. Free-form values may hold anything a Python caller
put there; ``orjson`` and pydantic's JSON mode agree on what both accept (NaN and
infinities become ``null``, tuples arrays, enums their values), and everything else is
refused and falls back. It knows the field layout of those records and checks it
against the classes (names, aliases, omission rules, serializers) before use; any other
layout, and every record it does not know, goes through ``to_json``.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import orjson

from kiln_verify.core.jsonfastwrite import (
    PLAIN,
    PRETTY,
    SORTED,
    SORTED_PRETTY,
    compact_bytes,
    pretty_checked,
    proven_compact,
)
from kiln_verify.openenv.records.observation import ObservationRecord
from kiln_verify.openenv.records.replay import (
    ObservationResult,
    ReplayCandidate,
    ReplayExchange,
    ReplayGroup,
    ReplayManifest,
)
from kiln_verify.records import Record

__all__ = ["layouts_known", "observation_compact", "replay_fast"]

# "\n" plus the pretty indent of each depth a fragment is inserted at.
_NEWLINE_INDENT: Final = tuple(b"\n" + b"  " * depth for depth in range(16))


def observation_compact(record: ObservationRecord) -> bytes:
    """``dumps_compact(record.to_json())``, assembled from the record's parts where proven
    (the members in field order, the free-form parts with sorted keys, ``metadata``
    omitted when ``None``), without pydantic's serializer or the sorted copy."""
    if type(record) is ObservationRecord and layouts_known():
        try:
            parts = [
                b'{"observation":',
                orjson.dumps(record.observation, option=SORTED),
                b',"reward":',
                orjson.dumps(record.reward.to_json(), option=PLAIN),
                b',"done":true' if record.done is True else b',"done":false',
            ]
            if record.metadata is not None:
                parts += [b',"metadata":', orjson.dumps(record.metadata, option=SORTED)]
            parts.append(b"}")
            raw = proven_compact(b"".join(parts), record.to_json)
        except Exception:  # any failure: the reference runs and decides the error
            raw = None
        if raw is not None:
            return raw
    return compact_bytes(record.to_json())


# --- the replay manifest -------------------------------------------------------------------


def _free(value: Any, depth: int) -> orjson.Fragment:
    """A free-form value (``sort_keys`` on output) at ``depth`` in the pretty manifest."""
    raw = orjson.dumps(value, option=SORTED_PRETTY)
    if b"\n" in raw:
        raw = raw.replace(b"\n", _NEWLINE_INDENT[depth])
    return orjson.Fragment(raw)


def _observation(record: ObservationRecord, depth: int) -> dict[str, Any]:
    """``record.to_json()`` at ``depth`` (its members at ``depth + 1``)."""
    tree: dict[str, Any] = {
        "observation": _free(record.observation, depth + 1),
        "reward": record.reward.to_json(),
        "done": record.done,
    }
    if record.metadata is not None:
        tree["metadata"] = _free(record.metadata, depth + 1)
    return tree


def _exchange(exchange: ReplayExchange) -> Any:
    """An exchange at depth 6 (manifest > groups > group > candidates > candidate >
    exchanges > exchange); protocol errors (rare) through ``to_json``."""
    result = exchange.result
    if type(exchange) is not ReplayExchange or type(result) is not ObservationResult:
        return exchange.to_json()
    return {
        "step_index": exchange.step_index,
        "action": _free(exchange.action, 7),
        "result": {"kind": result.kind, "observation": _observation(result.observation, 8)},
    }


def _candidate(candidate: ReplayCandidate) -> Any:
    if type(candidate) is not ReplayCandidate:
        return candidate.to_json()
    tree: dict[str, Any] = {
        "candidate_index": candidate.candidate_index,
        "exchanges": [_exchange(exchange) for exchange in candidate.exchanges],
    }
    if "final_state" in candidate.model_fields_set:
        tree["final_state"] = _free(candidate.final_state, 5)
    tree["episode_return"] = candidate.episode_return
    tree["terminal_done"] = candidate.terminal_done
    tree["termination"] = candidate.termination
    tree["recoverable_protocol_errors"] = candidate.recoverable_protocol_errors
    tree["capacity_retries"] = candidate.capacity_retries
    tree["model_tokens"] = candidate.model_tokens
    tree["model_latency_ms"] = candidate.model_latency_ms
    return tree


def _group(group: ReplayGroup) -> Any:
    if type(group) is not ReplayGroup or type(group.reset_observation) is not ObservationRecord:
        return group.to_json()
    return {
        "group_index": group.group_index,
        "environment_index": group.environment_index,
        "seed": group.seed,
        "reset_payload": _free(group.reset_payload, 3),
        "reset_observation": _observation(group.reset_observation, 3),
        "candidates": [_candidate(candidate) for candidate in group.candidates],
    }


# The layouts the builders above write, checked against the classes before first use:
# (field name, output name, omitted when None) in declaration order, plus the serializers
# that shape the output (a changed record falls back to ``to_json`` rather than drift).
_LAYOUTS: Final[dict[type[Record], tuple[tuple[str, str, bool], ...]]] = {
    ObservationRecord: (
        ("observation", "observation", False),
        ("reward", "reward", False),
        ("done", "done", False),
        ("metadata", "metadata", True),
    ),
    ObservationResult: (("kind", "kind", False), ("observation", "observation", False)),
    ReplayExchange: (
        ("step_index", "step_index", False),
        ("action", "action", False),
        ("result", "result", False),
    ),
    ReplayCandidate: tuple(
        (name, name, False)
        for name in (
            "candidate_index",
            "exchanges",
            "final_state",
            "episode_return",
            "terminal_done",
            "termination",
            "recoverable_protocol_errors",
            "capacity_retries",
            "model_tokens",
            "model_latency_ms",
        )
    ),
    ReplayGroup: tuple(
        (name, name, False)
        for name in (
            "group_index",
            "environment_index",
            "seed",
            "reset_payload",
            "reset_observation",
            "candidates",
        )
    ),
}
_MODEL_SERIALIZERS: Final[dict[type[Record], frozenset[str]]] = {
    ReplayCandidate: frozenset({"_omit_unset"}),
}
_OMIT_WHEN_UNSET: Final[dict[type[Record], frozenset[str]]] = {
    ReplayCandidate: frozenset({"final_state"}),
}
# Fields whose annotated serializer the builders apply themselves (by name of function).
_FIELD_SERIALIZERS: Final[dict[tuple[type[Record], str], str]] = {
    (ObservationRecord, "observation"): "sort_keys",
    (ObservationRecord, "metadata"): "sort_keys",
    (ObservationRecord, "reward"): "<lambda>",
    (ReplayExchange, "action"): "sort_keys",
    (ReplayCandidate, "final_state"): "sort_keys",
    (ReplayGroup, "reset_payload"): "sort_keys",
}


def _field_serializer(cls: type[Record], name: str) -> str | None:
    for item in cls.model_fields[name].metadata:
        func = getattr(item, "func", None)
        if func is not None and type(item).__name__ == "PlainSerializer":
            return str(getattr(func, "__name__", "?"))
    return None


@functools.cache
def layouts_known() -> bool:
    """Whether every record :func:`replay_fast` builds still has the layout it writes."""
    for cls, layout in _LAYOUTS.items():
        fields = cls.model_fields
        found = tuple(
            (name, field.alias or name, field.exclude_if is not None)
            for name, field in fields.items()
        )
        if found != layout:
            return False
        decorators = cls.__pydantic_decorators__
        if set(decorators.model_serializers) != _MODEL_SERIALIZERS.get(cls, frozenset()):
            return False
        if decorators.field_serializers:
            return False
        if frozenset(cls._omit_when_unset) != _OMIT_WHEN_UNSET.get(cls, frozenset()):
            return False
        for name in fields:
            if _field_serializer(cls, name) != _FIELD_SERIALIZERS.get((cls, name)):
                return False
    return tuple(ReplayManifest.model_fields)[-1] == "groups"


def replay_fast(manifest: ReplayManifest) -> bytes | None:
    """``dumps_pretty(manifest.to_json())``, or ``None`` where it cannot be proven."""
    if type(manifest) is not ReplayManifest or not layouts_known():
        return None
    try:
        tree = manifest.model_dump(mode="json", by_alias=True, exclude={"groups"})
        tree["groups"] = [_group(group) for group in manifest.groups]
        raw = orjson.dumps(tree, option=PRETTY)
    except Exception:  # any failure: the reference runs and decides the error
        return None
    return pretty_checked(raw)
