"""Strict JSON in, exact JSON bytes out.

Every reader of peer or bundle data goes through :func:`loads`, which accepts only what
serde_json (Kiln's parser) would accept *and* what cannot be read two ways: no duplicate
keys, no NaN/Infinity, no invalid UTF-8 or lone surrogates, bounded depth and number
length, and a byte cap checked before decoding starts.

Parsing runs in the standard library's C scanner. The expensive-to-exploit cases (deep
nesting, huge numbers, surrogate escapes) are found first by cheap regular-expression
scans over the text, so honest documents pay almost nothing for the strictness and
hostile ones never reach a quadratic or recursive code path.

Three tiers, one answer: :func:`loads` first tries ``orjson`` on ``bytes`` input and keeps the
value only if ``orjson`` writes it back byte for byte (the text is in our own canonical
spelling; :func:`kiln_verify.core.jsonfast.canonical_value`), then a fast path with the C
scanner (byte-level C passes that are exact for *valid* JSON: the nesting depth and the
suspicious-number spots, in :mod:`kiln_verify.core.jsonfast`) whose result counts only
when the C parse then succeeds; anything else -- a check that fires, a parse error, a hook
that refuses -- reruns the document through the strict path, which alone decides every
error. So the fast paths can only return what the strict path would return
(``tests/core/test_json_fastpath.py`` and ``tests/core/test_json_canonical.py`` check this
on generated and hostile documents).
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import os
import re
from collections.abc import Iterable, Iterator
from typing import IO, Any, NamedTuple, NoReturn

from kiln_verify.core.jsonenc import dumps_canonical, dumps_compact, dumps_pretty, format_float
from kiln_verify.core.jsonfast import MISS, canonical_value, depth_within, numbers_suspicious
from kiln_verify.errors import (
    JsonDuplicateKey,
    JsonInvalidUtf8,
    JsonlBlankLine,
    JsonlMissingNewline,
    JsonLoneSurrogate,
    JsonNonFinite,
    JsonNotObject,
    JsonNumberTooLong,
    JsonSyntax,
    JsonTooDeep,
    KilnError,
    LimitExceeded,
    snippet,
)
from kiln_verify.limits import MAX_JSON_DEPTH, MAX_JSON_NUMBER_CHARS

__all__ = [
    "MISS",
    "JsonlLine",
    "canonical_value",
    "depth_within",
    "dumps_canonical",
    "dumps_compact",
    "dumps_pretty",
    "fast_clean",
    "fast_value",
    "format_float",
    "iter_jsonl",
    "iter_lines",
    "loads",
    "loads_object",
    "loads_strict",
    "numbers_suspicious",
    "raw_decode",
]

Source = str | os.PathLike[str] | None

# A JSON string, or the unterminated tail of one; always matches from a quote, so a scan
# over hostile input stays linear (no retry from every later quote).
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)'
_STRINGS = re.compile(_STRING, re.DOTALL)
_NOT_BRACKETS = re.compile(_STRING + r'|[^"\[\]{}]+', re.DOTALL)
_DEPTH_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
# Number checks first run on a byte-level image of the text (digits -> '0', e/E -> 'e',
# +/- -> '+', all else ' '), where C substring search finds the rare suspicious spots.
_NUMBER_IMAGE = bytes(
    ord("0") if 0x30 <= b <= 0x39 else ord("e") if b in b"eE" else ord("+") if b in b"+-" else 0x20
    for b in range(256)
)
_LONG_NUMBER = re.compile(f"(?<![-+.eE0-9])[-+.eE0-9]{{{MAX_JSON_NUMBER_CHARS + 1}}}")
# A token longer than MAX_JSON_NUMBER_CHARS has at most 4 non-digits, so some digit run in
# it is at least this long; a cheap, sound trigger for the exact check.
_LONG_DIGIT_RUN = b"0" * ((MAX_JSON_NUMBER_CHARS + 1 - 4 + 2) // 3)
_EXPONENT_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?[eE][-+]?[0-9]+")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_CHAR = re.compile("[\ud800-\udfff]")
_BLANK = b" \t\r"


def _object_from_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonDuplicateKey(f"duplicate object key {snippet(key)}")
            seen.add(key)
    return result


def _reject_constant(name: str) -> NoReturn:
    raise JsonNonFinite(f"{name} is not a JSON number")


def _parse_int(text: str) -> int | float:
    """serde_json reads ``-0`` as the float ``-0.0`` (an integer that negates to zero is not
    an i64 there), so an integer field given ``-0`` is refused by Kiln; read it the same way,
    so that strict integer fields refuse it here too and free-form values keep its sign."""
    return -0.0 if text == "-0" else int(text)


_DECODER = json.JSONDecoder(object_pairs_hook=_object_from_pairs, parse_constant=_reject_constant)
# The strict path's decoder. The fast paths use the C scanner's own integers and count only
# when ``numbers_suspicious`` finds no ``-0`` token, which this hook alone reads differently.
_STRICT_DECODER = json.JSONDecoder(
    object_pairs_hook=_object_from_pairs, parse_constant=_reject_constant, parse_int=_parse_int
)


def _decode(data: bytes | bytearray | memoryview | str, max_bytes: int) -> tuple[str, bytes]:
    """Apply the byte cap before any decoding work; return the text and its UTF-8 bytes."""
    if isinstance(data, str):
        if len(data) > max_bytes:  # every character is at least one byte
            raise LimitExceeded("JSON document", limit="max_bytes", bound=max_bytes)
        if _SURROGATE_CHAR.search(data):
            raise JsonLoneSurrogate("text contains an unpaired UTF-16 surrogate")
        text, raw = data, data.encode("utf-8")
        if len(raw) > max_bytes:
            raise LimitExceeded(
                "JSON document", limit="max_bytes", bound=max_bytes, observed=len(raw)
            )
    elif isinstance(data, bytes | bytearray | memoryview):
        size = data.nbytes if isinstance(data, memoryview) else len(data)
        if size > max_bytes:
            raise LimitExceeded("JSON document", limit="max_bytes", bound=max_bytes, observed=size)
        raw = data if isinstance(data, bytes) else bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonInvalidUtf8(f"invalid UTF-8 at byte offset {exc.start}") from None
    else:
        raise TypeError(f"loads() takes bytes or str, not {type(data).__name__}")
    if text.startswith("\ufeff"):
        raise JsonSyntax("a byte order mark is not allowed before JSON text")
    return text, raw


def _check_depth(text: str) -> None:
    """Reject nesting beyond MAX_JSON_DEPTH without recursing, in C-speed passes."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return
    brackets = _NOT_BRACKETS.sub("", text)
    if len(brackets) - brackets.count("]") - brackets.count("}") <= MAX_JSON_DEPTH:
        return
    # Depth after bracket i is 2*opens_so_far - (i + 1); opens count 2, closes count 0.
    steps = brackets.encode("ascii").translate(_DEPTH_STEPS)
    deepest = max(map(operator.sub, itertools.accumulate(steps), itertools.count(1)))
    if deepest > MAX_JSON_DEPTH:
        raise JsonTooDeep(f"nesting depth exceeds MAX_JSON_DEPTH = {MAX_JSON_DEPTH}")


def _check_numbers(text: str, raw: bytes) -> None:
    """Bound number length and refuse spellings that overflow to infinity (``1e400``)."""
    image = raw.translate(_NUMBER_IMAGE)
    long_run = _LONG_DIGIT_RUN in image
    # a long mantissa overflows with a short exponent too (250 digits, then e99)
    big_exponent = long_run or b"e000" in image or b"e+000" in image
    if not (long_run or big_exponent):
        return
    bare = _STRINGS.sub('""', text)
    if long_run and _LONG_NUMBER.search(bare) is not None:
        raise JsonNumberTooLong(
            f"a number is longer than MAX_JSON_NUMBER_CHARS = {MAX_JSON_NUMBER_CHARS} characters"
        )
    if big_exponent:
        for match in _EXPONENT_NUMBER.finditer(bare):
            if math.isinf(float(match.group())):
                raise JsonNonFinite(f"number {snippet(match.group())} overflows to infinity")


def _check_strings(value: Any) -> None:
    """Find strings that kept a lone surrogate after ``\\uXXXX`` decoding (pairs combine)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE_CHAR.search(item):
                raise JsonLoneSurrogate("a \\u escape encodes an unpaired UTF-16 surrogate")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def fast_clean(text: str, raw: bytes, depth_limit: int | None) -> bool:
    """Whether a document that parses (``text``, its UTF-8 ``raw``) passes every strict check.

    ``depth_limit`` is ``None`` when the caller has bounded the nesting depth already. The
    answer is meaningful only for valid JSON, i.e. after the C parse succeeded.
    """
    if depth_limit is not None and not depth_within(raw, depth_limit):
        return False
    return not numbers_suspicious(raw) and _SURROGATE_ESCAPE.search(text) is None


def fast_value(text: str, raw: bytes, depth_limit: int | None) -> Any:
    """The parsed value when the fast path proves it is the strict one, else :data:`MISS`."""
    try:
        value = _DECODER.decode(text)
    except (ValueError, KilnError, RecursionError):  # JSONDecodeError is a ValueError
        return MISS
    return value if fast_clean(text, raw, depth_limit) else MISS


def raw_decode(text: str) -> tuple[Any, int]:
    """The strict decoder's ``raw_decode`` (duplicate keys and constants refused by hooks):
    the first value in ``text`` and where it ends; no whitespace skipped, no other check."""
    return _DECODER.raw_decode(text)


def _strict_value(text: str, raw: bytes, depth_checked: bool) -> Any:
    if not depth_checked:
        _check_depth(text)
    _check_numbers(text, raw)
    try:
        value = _STRICT_DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise JsonSyntax(f"{exc.msg} at column {exc.colno}", line=exc.lineno) from None
    except RecursionError:
        raise JsonTooDeep(f"nesting depth exceeds MAX_JSON_DEPTH = {MAX_JSON_DEPTH}") from None
    if _SURROGATE_ESCAPE.search(text):
        _check_strings(value)
    return value


def loads_strict(
    data: bytes | bytearray | memoryview | str, *, max_bytes: int, depth_checked: bool = False
) -> Any:
    """:func:`loads` without its fast path (the reference the fast path is tested against)."""
    text, raw = _decode(data, max_bytes)
    return _strict_value(text, raw, depth_checked)


def loads(
    data: bytes | bytearray | memoryview | str,
    *,
    max_bytes: int,
    source: Source = None,
    depth_checked: bool = False,
) -> Any:
    """Parse one strict JSON document of at most ``max_bytes`` UTF-8 bytes.

    Raises only :class:`KilnError` subclasses; ``source`` names the file in messages.
    ``depth_checked``: the caller has already bounded the nesting depth of exactly this
    text (:mod:`kiln_verify.core.jsonstream` does while finding element boundaries); a
    deeper text still fails as ``json_too_deep`` through the recursion guard.
    """
    try:
        depth_limit = None if depth_checked else MAX_JSON_DEPTH
        if type(data) is bytes and len(data) <= max_bytes:
            value = canonical_value(data, depth_limit)
            if value is not MISS:
                return value
        text, raw = _decode(data, max_bytes)
        value = fast_value(text, raw, depth_limit)
        if value is MISS:
            value = _strict_value(text, raw, depth_checked)
    except KilnError as exc:
        if source is not None and exc.path is None:
            exc.at(path=source)
        raise
    return value


def loads_object(
    data: bytes | bytearray | memoryview | str, *, max_bytes: int, source: Source = None
) -> dict[str, Any]:
    """Like :func:`loads` for documents that must be one JSON object (manifests, frames)."""
    value = loads(data, max_bytes=max_bytes, source=source)
    if not isinstance(value, dict):
        kind = type(value).__name__
        raise JsonNotObject(f"top-level value is {kind}, not an object", path=source)
    return value


class JsonlLine(NamedTuple):
    """One parsed JSONL line: 1-based number, raw bytes without the LF, parsed value."""

    number: int
    raw: bytes
    value: Any


def iter_lines(stream: IO[bytes], *, max_line_bytes: int, source: Source = None) -> Iterator[bytes]:
    """Yield LF-terminated lines from a binary stream, never buffering more than the cap.

    ``max_line_bytes`` counts the LF. The last line is yielded as is, LF or not.
    """
    number = 0
    while True:
        line = stream.readline(max_line_bytes + 1)
        if not line:
            return
        number += 1
        if len(line) > max_line_bytes:
            raise LimitExceeded(
                "JSONL line",
                limit="max_line_bytes",
                bound=max_line_bytes,
                observed=len(line),
                path=source,
                line=number,
            )
        yield line


def iter_jsonl(
    lines: Iterable[bytes],
    *,
    max_line_bytes: int,
    source: Source = None,
    require_final_newline: bool = True,
) -> Iterator[JsonlLine]:
    """Parse JSON Lines strictly: one value per LF-terminated, non-blank line.

    Every error carries the 1-based line number. ``max_line_bytes`` counts the LF.
    """
    pending_unterminated = False
    for number, line in enumerate(lines, start=1):
        if pending_unterminated:
            raise JsonlMissingNewline("line not terminated by LF", path=source, line=number - 1)
        if len(line) > max_line_bytes:
            raise LimitExceeded(
                "JSONL line",
                limit="max_line_bytes",
                bound=max_line_bytes,
                observed=len(line),
                path=source,
                line=number,
            )
        if line.endswith(b"\n"):
            raw = line[:-1]
        else:
            raw = line
            pending_unterminated = True
            if require_final_newline:
                raise JsonlMissingNewline("last line lacks its LF", path=source, line=number)
        if not raw.strip(_BLANK):
            raise JsonlBlankLine("blank line", path=source, line=number)
        try:
            value = loads(raw, max_bytes=max_line_bytes, source=source)
        except KilnError as exc:
            raise exc.at(line=number) from None
        yield JsonlLine(number, raw, value)
