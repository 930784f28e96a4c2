"""Exact, type-strict comparison of recorded and live JSON values (contract §7.1, §8.3).

Python's ``==`` says ``1 == 1.0 == True``; Kiln compares ``serde_json`` values, where an
integer, a float and a boolean are different values. :func:`first_difference` therefore
compares JSON *types* as well as values, at every depth, and returns the first differing
path (keys in sorted order, so the answer is deterministic) with both values rendered
as bounded compact JSON. Rewards are compared through their recorded JSON form, which
keeps the tag (``1`` vs ``1.0``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from kiln_verify.errors import snippet
from kiln_verify.openenv.records.common import ObservationRecord, ProtocolErrorRecord
from kiln_verify.openenv.records.replay import ObservationResult, ProtocolErrorResult

__all__ = [
    "ABSENT",
    "Difference",
    "first_difference",
    "observation_difference",
    "render",
    "result_difference",
]


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Final = _Absent()
"""Marks a key (or list item) present on one side only."""


@dataclass(frozen=True, slots=True)
class Difference:
    """The first differing path and both values (already rendered and bounded)."""

    path: str
    expected: str
    actual: str


def render(value: Any, *, sort_keys: bool = True) -> str:
    """Compact JSON of ``value``, bounded by :func:`kiln_verify.errors.snippet`."""
    if value is ABSENT:
        return "<absent>"
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=(",", ":"))
    except (TypeError, ValueError):
        text = repr(value)
    return snippet(text)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _walk(expected: Any, actual: Any, path: str) -> tuple[str, Any, Any] | None:
    if expected is ABSENT or actual is ABSENT or _kind(expected) != _kind(actual):
        return path, expected, actual
    if isinstance(expected, dict):
        for key in sorted(set(expected) | set(actual)):
            found = _walk(expected.get(key, ABSENT), actual.get(key, ABSENT), _join(path, key))
            if found is not None:
                return found
        return None
    if isinstance(expected, list):
        for index in range(max(len(expected), len(actual))):
            left = expected[index] if index < len(expected) else ABSENT
            right = actual[index] if index < len(actual) else ABSENT
            found = _walk(left, right, _join(path, index))
            if found is not None:
                return found
        return None
    if expected != actual:
        return path, expected, actual
    return None


def first_difference(expected: Any, actual: Any, path: str = "") -> Difference | None:
    """The first path where two JSON values differ (type-strict), or ``None`` if equal.

    The root is ``$`` when ``path`` is empty.
    """
    found = _walk(expected, actual, path)
    if found is None:
        return None
    where, left, right = found
    return Difference(where or "$", render(left), render(right))


def observation_difference(
    expected: ObservationRecord, actual: ObservationRecord, path: str = "observation"
) -> Difference | None:
    """Compare two observation records field by field (reward tag included)."""
    return first_difference(expected.to_json(), actual.to_json(), path)


def result_difference(
    expected: ObservationResult | ProtocolErrorResult,
    actual: ObservationRecord | ProtocolErrorRecord,
) -> Difference | None:
    """Compare a recorded step result with what the live step returned.

    Observation vs observation and error vs error compare every field; any other pairing
    is a difference at ``kind``.
    """
    if isinstance(expected, ObservationResult):
        if isinstance(actual, ObservationRecord):
            return observation_difference(expected.observation, actual)
        return Difference("kind", render("observation"), render("protocol_error"))
    if isinstance(actual, ProtocolErrorRecord):
        return first_difference(expected.error.to_json(), actual.to_json(), "error")
    return Difference("kind", render("protocol_error"), render("observation"))
