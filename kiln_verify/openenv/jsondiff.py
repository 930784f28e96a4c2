"""Exact, type-strict comparison of two parsed JSON values (contract §7.1, §8.3).

Python's ``==`` says ``1 == 1.0 == True``; Kiln compares ``serde_json`` values, where an
integer, a float and a boolean are different values. :func:`first_difference` therefore
compares JSON *types* as well as values, at every depth, and returns the first differing
path (keys in sorted order, so the answer is deterministic) with both values rendered
as bounded compact JSON.

Two strings that differ deep inside (a long text observation, a board drawn as text)
would render as two identical 80-character prefixes; they are shown instead as a window
around the first differing character (``MAX_DRIFT_CONTEXT_CHARS`` before it, the rest of
the ``MAX_ERROR_SNIPPET_CHARS`` budget after it) and the :class:`Difference` carries that
character's ``offset``, so a reader sees the difference itself.

This module depends on nothing but the byte rules and limits, so that both live replay
(:mod:`kiln_verify.openenv.replay.compare`, which adds the record-level comparisons) and
the volatile-identity rule (:mod:`kiln_verify.openenv.volatile`, which the collector's
group check uses without any of replay) share one definition of "equal" without
importing each other. :class:`VolatileValue` is here because the comparison must know
the stand-in the volatile rule masks a field with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from kiln_verify.errors import snippet
from kiln_verify.limits import (
    MAX_DRIFT_CONTEXT_CHARS,
    MAX_ERROR_SNIPPET_CHARS,
    MAX_REPLAY_DRIFT_PATH_CHARS,
)

__all__ = [
    "ABSENT",
    "Difference",
    "VolatileValue",
    "bounded_path",
    "first_difference",
    "first_mismatch",
    "json_type",
    "render",
    "type_name",
    "window",
]


def json_type(value: Any) -> str:
    """The JSON Schema type name of a parsed JSON value (``boolean`` is not ``integer``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


@dataclass(frozen=True, slots=True)
class VolatileValue:
    """Stands in for a volatile field's value: equal to another exactly when the types are."""

    type: str

    def __repr__(self) -> str:
        return f"<volatile {self.type}>"


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Final = _Absent()
"""Marks a key (or list item) present on one side only."""


@dataclass(frozen=True, slots=True)
class Difference:
    """The first differing path and both values (already rendered and bounded).

    ``expected_type`` / ``actual_type`` are the JSON types at ``path`` (:func:`type_name`;
    empty when not known, e.g. for identity drift); ``offset`` is the index of the first
    differing character when both values are strings (the renderings are then windows
    around it), else ``None``.
    """

    path: str
    expected: str
    actual: str
    expected_type: str = ""
    actual_type: str = ""
    offset: int | None = None


def render(value: Any, *, sort_keys: bool = True) -> str:
    """Compact JSON of ``value``, bounded by :func:`kiln_verify.errors.snippet`."""
    if value is ABSENT:
        return "<absent>"
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=(",", ":"))
    except (TypeError, ValueError):
        text = repr(value)
    return snippet(text)


def type_name(value: Any) -> str:
    """The JSON type of a parsed value as drift reports name it (``integer`` and ``float``
    apart, as the comparison keeps them; ``absent`` for a missing key or item)."""
    if value is ABSENT:
        return "absent"
    if isinstance(value, VolatileValue):  # a masked volatile field: the type it stands for
        return _VOLATILE_TYPES.get(value.type, value.type)
    return _kind(value)


#: :func:`json_type` names -> the drift report's names.
_VOLATILE_TYPES: Final = {"boolean": "bool", "number": "float"}


def _kind(value: Any) -> str:
    """The drift report's type name: the JSON type, with ``bool`` and ``float`` spelled as
    the tagged reward spells them."""
    name = json_type(value)
    return _VOLATILE_TYPES.get(name, name)


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


_ESCAPED: Final = {index: json.dumps(chr(index))[1:-1] for index in range(0x20)}


def _escaped(char: str) -> str:
    """One character as it appears inside a JSON string (control characters escaped)."""
    if char == '"' or char == "\\":
        return "\\" + char
    if ord(char) < 0x20:
        return _ESCAPED[ord(char)]
    if 0xD800 <= ord(char) <= 0xDFFF:
        return f"\\u{ord(char):04x}"
    return char


def first_mismatch(left: str, right: str) -> int:
    """Index of the first differing character (the shorter length if one is a prefix)."""
    limit = min(len(left), len(right))
    start, chunk = 0, 4096
    while start < limit and left[start : start + chunk] == right[start : start + chunk]:
        start += chunk
    for index in range(start, min(start + chunk, limit)):
        if left[index] != right[index]:
            return index
    return limit


def window(text: str, offset: int) -> str:
    """``text`` around ``offset`` as a JSON string: up to ``MAX_DRIFT_CONTEXT_CHARS``
    characters before it and the rest of the ``MAX_ERROR_SNIPPET_CHARS`` budget after it;
    ``…`` outside the quotes marks text cut on that side. Never longer than the budget."""
    budget = MAX_ERROR_SNIPPET_CHARS - 4  # two quotes, two ellipses
    before: list[str] = []
    used = 0
    start = offset
    while start > 0:
        piece = _escaped(text[start - 1])
        if used + len(piece) > MAX_DRIFT_CONTEXT_CHARS:
            break
        before.append(piece)
        used += len(piece)
        start -= 1
    after: list[str] = []
    end = offset
    while end < len(text):
        piece = _escaped(text[end])
        if used + len(piece) > budget:
            break
        after.append(piece)
        used += len(piece)
        end += 1
    body = "".join(reversed(before)) + "".join(after)
    return f'{"…" if start > 0 else ""}"{body}"{"…" if end < len(text) else ""}'


def bounded_path(path: str) -> str:
    """``path`` cut to ``MAX_REPLAY_DRIFT_PATH_CHARS`` (ending with ``…`` when cut): object
    keys are peer text of any length, and a replay keeps many paths."""
    if len(path) <= MAX_REPLAY_DRIFT_PATH_CHARS:
        return path
    return path[: MAX_REPLAY_DRIFT_PATH_CHARS - 1] + "…"


def first_difference(expected: Any, actual: Any, path: str = "") -> Difference | None:
    """The first path where two JSON values differ (type-strict), or ``None`` if equal.

    The root is ``$`` when ``path`` is empty; a path longer than
    ``MAX_REPLAY_DRIFT_PATH_CHARS`` is cut (:func:`bounded_path`). Two differing strings
    are rendered as windows around their first differing character (``offset``).
    """
    found = _walk(expected, actual, path)
    if found is None:
        return None
    raw, left, right = found
    where = bounded_path(raw)
    types = type_name(left), type_name(right)
    if isinstance(left, str) and isinstance(right, str):
        offset = first_mismatch(left, right)
        return Difference(
            where or "$", repr(window(left, offset)), repr(window(right, offset)), *types, offset
        )
    return Difference(where or "$", render(left), render(right), *types)
