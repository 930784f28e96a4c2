"""JSON written by ``orjson``, accepted only where it provably equals our own writers'.

:mod:`kiln_verify.core.jsonenc` writes every file and digest preimage with
``dumps_compact``/``dumps_pretty``, pure-Python walks that were the largest single cost
of building a collection's bundle (docs/performance.md, "Collector overhead"). ``orjson``
(Rust) writes the same spellings: the same string escapes
(``tests/openenv/collect/test_writers.py`` checks every code point), the same shortest
float digits, the same separators and 2-space indentation, keys in the given order or,
with ``OPT_SORT_KEYS``, by code point as ``sort_keys`` sorts them. Where the two could
differ, the ``orjson`` result is thrown away and the reference writer runs on the whole
value, so it alone decides every error:

* types: ``orjson`` refuses integers beyond 64 bits, non-``str`` keys, lone surrogates,
  subclasses of ``str``/``int``/``dict``/``list``, datetimes and dataclasses (the
  passthrough options) and anything else it does not know -- every refusal falls back.
  It writes enum members and UUIDs by value where ours refuses a plain ``Enum`` or a
  ``UUID``: neither occurs in the trees these helpers get (below);
* floats: any text with a float spelled with an exponent (a digit followed by ``e+`` or
  ``e-``) falls back, the one spelling that has differed between ``orjson`` versions;
* depth: ``orjson`` nests to 255, our writers refuse containers at depth
  ``MAX_JSON_DEPTH`` (127, root 0). Pretty text is bounded by the absence of any line
  indented ``2 * MAX_JSON_DEPTH`` spaces (every value below the root starts a line
  indented twice its depth, so this also refuses some values the reference accepts,
  which then take the reference); compact text by its bracket count, or else by the
  same search in its pretty spelling;
* non-finite floats: ``orjson`` writes NaN and infinities as ``null`` where ours refuse
  them, so these helpers are only for values that cannot hold one: what the strict
  parser produced, and ``Record.to_json`` trees (pydantic's JSON mode has already
  turned them into ``None``, which the reference then writes as ``null`` too).

The writing counterpart of :mod:`kiln_verify.core.jsonfast` (which proves ``orjson``'s
reading); in ``core`` so that collection code can use it without the record classes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

from kiln_verify.core.jsonenc import dumps_compact, dumps_pretty
from kiln_verify.core.jsonfast import COUNT_BRACKETS_BELOW
from kiln_verify.limits import MAX_JSON_DEPTH

__all__ = [
    "PLAIN",
    "PRETTY",
    "REFUSED",
    "SORTED",
    "SORTED_PRETTY",
    "compact_bytes",
    "compact_orjson",
    "no_exponent",
    "pretty_bytes",
    "pretty_checked",
    "pretty_orjson",
    "proven_compact",
]

PLAIN: Final = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
PRETTY: Final = PLAIN | orjson.OPT_INDENT_2
SORTED: Final = PLAIN | orjson.OPT_SORT_KEYS
SORTED_PRETTY: Final = PRETTY | orjson.OPT_SORT_KEYS
# orjson.JSONEncodeError is a TypeError; RecursionError for self-referencing values.
REFUSED: Final = (TypeError, ValueError, RecursionError)
_DIGITS: Final = frozenset(b"0123456789")
_TOO_DEEP: Final = b"\n" + b" " * (2 * MAX_JSON_DEPTH)


def no_exponent(raw: bytes) -> bool:
    """Whether ``raw`` (JSON written by ``orjson``) holds no float spelled with an exponent:
    no digit followed by ``e+``/``e-``.

    Each sign is found with ``memchr`` and its two predecessors looked at: a two-byte
    search over text full of ``e`` costs about 1 ms per MB. Past one sign per 64 bytes
    the whole text takes the two-byte searches instead, so the cost stays linear.
    """
    budget = len(raw) >> 6
    for sign in (0x2B, 0x2D):  # "+", "-"
        at = raw.find(sign, 2)
        while at >= 0:
            if raw[at - 1] == 0x65 and raw[at - 2] in _DIGITS:  # 0x65: "e"
                return False
            budget -= 1
            if budget < 0:
                return _no_exponent_pairs(raw)
            at = raw.find(sign, at + 1)
    return True


def _no_exponent_pairs(raw: bytes) -> bool:
    """:func:`no_exponent` by two-byte searches, for text with many signs."""
    for needle in (b"e+", b"e-"):
        at = raw.find(needle, 1)
        while at >= 0:
            if raw[at - 1] in _DIGITS:
                return False
            at = raw.find(needle, at + 1)
    return True


def compact_orjson(value: Any) -> bytes | None:
    """``dumps_compact(value)`` written by ``orjson``, or ``None`` where it is not proven."""
    try:
        raw = orjson.dumps(value, option=PLAIN)
    except REFUSED:
        return None
    return proven_compact(raw, lambda: value)


def proven_compact(raw: bytes, value: Callable[[], Any]) -> bytes | None:
    """``raw`` if it has no exponent float and its value nests within the bound.

    ``value()`` gives the written value again, for the depth check of texts whose
    brackets (inside strings, e.g. observation texts quoting JSON) defeat the count: the
    pretty spelling of the same value bounds the depth with one search.
    """
    if not no_exponent(raw):
        return None
    if len(raw) < COUNT_BRACKETS_BELOW and raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return raw
    try:
        pretty = orjson.dumps(value(), option=PRETTY)
    except REFUSED:
        return None
    return None if _TOO_DEEP in pretty else raw


def pretty_orjson(value: Any) -> bytes | None:
    """``dumps_pretty(value)`` written by ``orjson``, or ``None`` where it is not proven."""
    try:
        raw = orjson.dumps(value, option=PRETTY)
    except REFUSED:
        return None
    return pretty_checked(raw)


def pretty_checked(raw: bytes) -> bytes | None:
    if no_exponent(raw) and _TOO_DEEP not in raw:
        return raw + b"\n"
    return None


def compact_bytes(value: Any) -> bytes:
    """``dumps_compact(value)``: ``orjson`` where proven, else the reference writer."""
    data = compact_orjson(value)
    return dumps_compact(value) if data is None else data


def pretty_bytes(value: Any) -> bytes:
    """``dumps_pretty(value)``: ``orjson`` where proven, else the reference writer."""
    data = pretty_orjson(value)
    return dumps_pretty(value) if data is None else data
