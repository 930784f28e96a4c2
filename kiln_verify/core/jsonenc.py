"""The three JSON serializations every digest and file is computed over.

Digests are taken over bytes, so the bytes must not depend on Python's ``json`` defaults:
``json.dumps`` spells floats with ``repr`` (``1e+16``, ``1e-05``) while Kiln (serde_json)
writes ``1e16`` and ``0.00001``. We therefore use our own small encoder, with exactly one
float spelling (:func:`format_float`) and the C string escaper from the standard library,
whose escapes (``\\n``, ``\\u001f``, raw non-ASCII, ``/`` unescaped) already match
serde_json. The rules are written down in ``docs/byte-rules.md``.

Recursion is safe because the encoder refuses nesting deeper than ``MAX_JSON_DEPTH``,
the same bound the parser enforces, so everything we write we can read back.
"""

from __future__ import annotations

import json.encoder
import re
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import orjson

from kiln_verify.errors import (
    JsonLoneSurrogate,
    JsonNonFinite,
    JsonNumberTooLong,
    JsonTooDeep,
    JsonUnsupportedType,
)
from kiln_verify.limits import MAX_JSON_DEPTH, MAX_JSON_NUMBER_CHARS

_encode_str: Callable[[str], str] = json.encoder.encode_basestring  # the C version when built
_int_repr = int.__repr__
_float_repr = float.__repr__
_INF = float("inf")
_first = itemgetter(0)
# Integers we write must be readable back: at most MAX_JSON_NUMBER_CHARS characters.
_INT_HIGH = 10**MAX_JSON_NUMBER_CHARS
_INT_LOW = -(10 ** (MAX_JSON_NUMBER_CHARS - 1))
# "\n" plus the pretty indent of each depth the writer can reach (it refuses deeper).
_NEWLINE_INDENT = tuple("\n" + "  " * depth for depth in range(MAX_JSON_DEPTH + 1))


def _int(value: int) -> str:
    if not _INT_LOW < value < _INT_HIGH:
        raise JsonNumberTooLong(
            f"an integer longer than MAX_JSON_NUMBER_CHARS = {MAX_JSON_NUMBER_CHARS} characters"
        )
    return _int_repr(value)


def format_float(value: float) -> str:
    """Spell a finite float the way current serde_json does; the only float spelling we use.

    Shortest round-trip digits ``D`` (from ``repr``) and ``kk`` such that the value is
    ``0.D x 10**kk``: plain decimal when ``-5 < kk <= 16`` (``.0`` appended to integral
    values), otherwise ``d.ddde<exp>`` with an explicit sign (``e+16``, ``e-7``) and no
    exponent padding. serde_json writes the ``+`` since it moved from ryu to zmij
    (serde-rs/json#1304), and Kiln's GRPO row rule (kiln-hf-trl section 5.5) does too.
    """
    if value != value or value in (_INF, -_INF):
        raise JsonNonFinite("NaN and infinities cannot be written as JSON")
    text = _float_repr(value)
    if "e" not in text:
        # repr is plain exactly for decimal exponents -4..15, where ryu is plain too and
        # the two spellings coincide (shortest digits, '.0' on integral values).
        return text
    mantissa, exp_text = text.split("e")
    sign = ""
    if mantissa[0] == "-":
        sign, mantissa = "-", mantissa[1:]
    digits = mantissa.replace(".", "")
    kk = int(exp_text) + 1
    if -5 < kk <= 0:
        return f"{sign}0.{'0' * -kk}{digits}"
    exponent = f"{kk - 1:+d}"
    if len(digits) == 1:
        return f"{sign}{digits}e{exponent}"
    return f"{sign}{digits[0]}.{digits[1:]}e{exponent}"


def _unsupported(value: object) -> JsonUnsupportedType:
    return JsonUnsupportedType(f"cannot encode a value of type {type(value).__name__} as JSON")


def _scalar(value: object) -> str:
    """Encode a non-container, accepting subclasses (StrEnum, IntEnum) by their base type."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _encode_str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _int(int(value))
    if isinstance(value, float):
        return format_float(float(value))
    raise _unsupported(value)


def _null(value: None) -> str:
    return "null"


def _bool(value: bool) -> str:
    return "true" if value else "false"


# Exact leaf types and their spellings (identical to _scalar's for these types).
_LEAVES: dict[type, Callable[[Any], str]] = {
    str: _encode_str,
    int: _int,
    float: format_float,
    bool: _bool,
    type(None): _null,
}


def _fast_array(items: list[Any] | tuple[Any, ...], sep: str = ",") -> str | None:
    """Join homogeneous scalar arrays (token ids, logprobs, texts) in C-speed passes."""
    kinds = set(map(type, items))
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is int:
        if min(items) <= _INT_LOW or max(items) >= _INT_HIGH:
            return None  # the element loop raises the precise error
        return sep.join(map(_int_repr, items))
    if kind is str:
        return sep.join(map(_encode_str, items))
    if kind is float:
        return sep.join(map(format_float, items))
    return None


def _compact(value: Any, out: list[str], depth: int, sort_keys: bool) -> None:
    kind = type(value)
    if kind is dict:
        if depth >= MAX_JSON_DEPTH:
            raise JsonTooDeep(f"nesting deeper than MAX_JSON_DEPTH = {MAX_JSON_DEPTH}")
        if not value:
            out.append("{}")
            return
        items = value.items()
        if sort_keys:
            _check_keys(value)
            items = sorted(items, key=_first)
        sep = "{"
        for key, item in items:
            if type(key) is not str and not isinstance(key, str):
                raise _bad_key(key)
            out.append(sep)
            out.append(_encode_str(key))
            out.append(":")
            _compact(item, out, depth + 1, sort_keys)
            sep = ","
        out.append("}")
    elif kind is list or kind is tuple:
        if depth >= MAX_JSON_DEPTH:
            raise JsonTooDeep(f"nesting deeper than MAX_JSON_DEPTH = {MAX_JSON_DEPTH}")
        if not value:
            out.append("[]")
            return
        joined = _fast_array(value)
        if joined is not None:
            out.append("[")
            out.append(joined)
            out.append("]")
            return
        sep = "["
        for item in value:
            out.append(sep)
            _compact(item, out, depth + 1, sort_keys)
            sep = ","
        out.append("]")
    elif kind is str:
        out.append(_encode_str(value))
    elif kind is int:
        out.append(_int(value))
    elif kind is float:
        out.append(format_float(value))
    else:
        out.append(_scalar(value))


def _pretty(value: Any, out: list[str], depth: int) -> None:
    kind = type(value)
    if kind is dict or kind is list or kind is tuple:
        if depth >= MAX_JSON_DEPTH:
            raise JsonTooDeep(f"nesting deeper than MAX_JSON_DEPTH = {MAX_JSON_DEPTH}")
        if not value:
            out.append("{}" if kind is dict else "[]")
            return
        child = depth + 1
        inner = _NEWLINE_INDENT[child]
        append = out.append
        comma = "," + inner
        if kind is dict:
            sep = "{" + inner
            leaves = _LEAVES
            encode = _encode_str
            for key, item in value.items():
                if type(key) is not str and not isinstance(key, str):
                    raise _bad_key(key)
                # Leaves of exact scalar types inline (_scalar's spelling), the rest recurse.
                leaf = leaves.get(type(item))
                if leaf is not None:
                    append(f"{sep}{encode(key)}: {leaf(item)}")
                else:
                    append(f"{sep}{encode(key)}: ")
                    _pretty(item, out, child)
                sep = comma
            append(_NEWLINE_INDENT[depth] + "}")
        else:
            joined = _fast_array(value, comma)
            if joined is not None:
                append(f"[{inner}{joined}{_NEWLINE_INDENT[depth]}]")
                return
            sep = "[" + inner
            for item in value:
                append(sep)
                _pretty(item, out, child)
                sep = comma
            append(_NEWLINE_INDENT[depth] + "]")
    else:
        out.append(_scalar(value))


def _check_keys(mapping: dict[Any, Any]) -> None:
    for key in mapping:
        if not isinstance(key, str):
            raise _bad_key(key)


def _bad_key(key: object) -> JsonUnsupportedType:
    return JsonUnsupportedType(f"object keys must be str, not {type(key).__name__}")


def _to_utf8(parts: list[str]) -> bytes:
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise JsonLoneSurrogate("a string contains an unpaired UTF-16 surrogate") from exc


def dumps_compact(value: Any) -> bytes:
    """serde_json ``to_vec`` bytes: ``,``/``:`` separators, raw UTF-8, keys in given order."""
    out: list[str] = []
    _compact(value, out, 0, False)
    return _to_utf8(out)


def dumps_canonical(value: Any) -> bytes:
    """Compact bytes with object keys sorted recursively by code point (= UTF-8 byte order)."""
    out: list[str] = []
    _compact(value, out, 0, True)
    return _to_utf8(out)


_SORT_KEYS = orjson.OPT_SORT_KEYS
_EXPONENT = re.compile(rb"[0-9]e[+-][0-9]")
_ORJSON_REFUSED = (orjson.JSONEncodeError, TypeError, ValueError, RecursionError)


def parsed_text(value: Any, *, canonical: bool = False) -> str:
    """``dumps_compact(value)`` (``dumps_canonical`` if ``canonical``) as text, for a value
    the strict parser produced (plain dicts with str keys, lists, bounded ints, finite
    floats, no lone surrogates, bounded depth) -- what the verifier re-renders to compare.

    For such values ``orjson`` writes the same bytes (same escapes, raw non-ASCII, ``/``
    unescaped, the same shortest float digits, keys sorted by code point); it refuses
    integers beyond 64 bits and non-str keys, and any text with an exponent (a digit,
    ``e+``/``e-`` and a digit: every exponent float either writer spells, the one float
    spelling that has differed between ``orjson`` versions) falls back to our own writer.
    A string holding that pattern falls back too (correct, only slower); matching just
    ``e-`` sent every document with a word like ``type-error`` to the slow writer. Not
    for arbitrary Python values: ``orjson`` accepts mapping subclasses and tuples, which
    ours refuses.
    """
    try:
        raw = orjson.dumps(value, option=_SORT_KEYS) if canonical else orjson.dumps(value)
    except _ORJSON_REFUSED:
        raw = None
    if raw is None or _EXPONENT.search(raw) is not None:
        return (dumps_canonical if canonical else dumps_compact)(value).decode("utf-8")
    return raw.decode("utf-8")


def dumps_pretty(value: Any) -> bytes:
    """serde_json pretty bytes (2-space indent, ``": "``) plus one trailing LF, keys in order."""
    out: list[str] = []
    _pretty(value, out, 0)
    out.append("\n")
    return _to_utf8(out)
