"""Byte-level checks of the strict parser's fast path (:mod:`kiln_verify.core.jsonio`).

The first tier, :func:`canonical_value`, parses with ``orjson`` (Rust) and accepts the
value only when ``orjson`` writes it back to exactly the input bytes, i.e. when the input
is already in our own compact or pretty spelling (every corpus line, replay group and
summary record we write is). Byte equality is the proof that the strict parser reads the
same value: a duplicate key would be written once (shorter output), ``-0``, ``1E5``,
``1.0e2``, ``\\u00e9``, ``\\/`` or any whitespace variance would be respelled, integers
beyond 64 bits come back as floats (spelled with ``.`` or ``e``), NaN, overflowing numbers,
lone surrogates, invalid UTF-8, a byte order mark and trailing data are refused by
``orjson`` itself, and every number it writes is far shorter than
``MAX_JSON_NUMBER_CHARS``. ``orjson``'s nesting limit (1024) is looser than ours, so the
depth is bounded separately, from the pretty spelling's indentation (see the function).
``orjson`` (3.13) spells floats, escapes and indentation exactly as
:mod:`kiln_verify.core.jsonenc` does; where a version differs the bytes differ and the
strict path runs, so only speed depends on it.

The second tier's checks are C-speed passes over the UTF-8 bytes whose answers are exact
for *valid* JSON, which is all the fast path needs: :func:`~kiln_verify.core.jsonio.loads`
accepts a fast result only after the C scanner parsed the same text, and reruns anything
else through the strict path, which alone decides errors. Kept apart from ``jsonio`` so
each module keeps one job; ``jsonio`` re-exports them.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

import orjson

from kiln_verify.limits import MAX_JSON_NUMBER_CHARS

__all__ = [
    "COUNT_BRACKETS_BELOW",
    "MISS",
    "canonical_value",
    "depth_within",
    "numbers_suspicious",
]


class _Miss:
    def __repr__(self) -> str:
        return "MISS"


MISS: Any = _Miss()
"""What a fast path returns when the strict path must decide."""

_INDENT_2 = orjson.OPT_INDENT_2
COUNT_BRACKETS_BELOW = 32 * 1024
"""Compact text at least this long skips the bracket count and goes straight to the pretty
spelling's indentation check. Either proves the depth bound; the count is the cheaper proof
only for short text: it reads every byte twice, about as long as hashing them, and a long
value with few enough brackets to pass it is mostly string, which ``orjson`` writes pretty
at copying speed (a 250 KiB corpus line: count 0.1 ms, pretty check 0.03 ms)."""
_ORJSON_ERRORS = (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError)

_DEPTH_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
# A token longer than MAX_JSON_NUMBER_CHARS has at most 4 non-digits, so some digit run in
# it is at least this long (the strict path's trigger, on this module's image).
_LONG_DIGIT_RUN = b"0" * ((MAX_JSON_NUMBER_CHARS + 1 - 4 + 2) // 3)
# The fast path's image: separators before a number token ([ , : and whitespace) -> ' ',
# every other byte that can never be part of or precede a number token -> 'x'.
_TOKEN_IMAGE = bytes(
    ord("0")
    if 0x30 <= b <= 0x39
    else ord("e")
    if b in b"eE"
    else ord("+")
    if b in b"+-"
    else ord(".")
    if b == 0x2E
    else 0x20
    if b in b"[,: \t\n\r"
    else ord("x")
    for b in range(256)
)
_NUMBER_CHARS = frozenset(b"0.+")
_JSON_WS = frozenset(b" \t\n\r")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')


def depth_within(raw: bytes, limit: int) -> bool:
    """Whether ``raw``'s brackets outside strings nest at most ``limit`` deep.

    Exact for valid JSON (the fast path's only use: its answer counts only when the C
    parse then succeeds): escaped backslashes and quotes go first, left to right as the
    escapes pair up, so the quotes left delimit the strings; all other bytes are dropped
    in one C pass and the string bodies by one split.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return True
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(raw.translate(None, _NOT_STRUCTURE).split(b'"')[::2])
    if len(brackets) - brackets.count(b"]") - brackets.count(b"}") <= limit:
        return True
    steps = brackets.translate(_DEPTH_STEPS)
    depths = map(operator.sub, itertools.accumulate(steps), itertools.count(1))
    deepest: int = max(depths, default=0)
    return deepest <= limit


def numbers_suspicious(raw: bytes) -> bool:
    """Whether ``raw`` may hold a number the strict path refuses (too long, overflowing) or
    reads differently from the C scanner (the integer ``-0``, a float there).

    Sound for valid JSON: a number token there starts the text or follows ``[``, ``,`` or
    a ``:`` that follows a closing quote (whitespace allowed between), so an exponent spot
    reached (back through digits, ``.`` and signs) from anything else is inside a string:
    the usual case, hex digests like ``"sha256:5e280.."`` or ``..a3e000..``.
    """
    image = raw.translate(_TOKEN_IMAGE)
    if _LONG_DIGIT_RUN in image:
        return True
    for marker in (b"e000", b"e+000"):
        at = image.find(marker)
        while at >= 0:
            if _token_start(raw, image, at):
                return True
            at = image.find(marker, at + 1)
    at = image.find(b"+0")
    while at >= 0:  # "-0" not followed by a digit, "." or an exponent: the integer -0
        if image[at + 2 : at + 3] not in (b"0", b".", b"e") and _token_start(raw, image, at):
            return True
        at = image.find(b"+0", at + 1)
    return False


def _token_start(raw: bytes, image: bytes, at: int) -> bool:
    """Whether the number-like run through ``at`` can be a number token of valid JSON."""
    before = at - 1
    while before >= 0 and image[before] in _NUMBER_CHARS:
        before -= 1
    while before >= 0 and raw[before] in _JSON_WS:
        before -= 1
    if before < 0 or raw[before] in b"[,":
        return True
    if raw[before] != 0x3A:  # ':'
        return False
    before -= 1
    while before >= 0 and raw[before] in _JSON_WS:
        before -= 1
    return before >= 0 and raw[before] == 0x22


def canonical_value(raw: bytes, depth_limit: int | None, indent: int = 0) -> Any:
    """``raw``'s value if it is exactly our compact or pretty spelling of it, else :data:`MISS`.

    ``indent``: for pretty text, the spaces every line after the first is indented by
    (a member of a pretty document's root is at 2, an element of its top-level array at
    4); a trailing LF (a whole pretty file) is allowed. ``depth_limit`` as in
    :func:`depth_within`, ``None`` when the caller bounded the depth already. See the
    module text for why equal bytes prove the strict parser's value.
    """
    try:
        value = orjson.loads(raw)
        if b"\n" in raw:
            pretty = orjson.dumps(value, option=_INDENT_2)
            if indent:
                pretty = pretty.replace(b"\n", b"\n" + b" " * indent)
            if pretty != raw and not (raw[-1] == 0x0A and raw[:-1] == pretty):
                return MISS
        elif orjson.dumps(value) == raw:
            if depth_limit is None or (
                len(raw) < COUNT_BRACKETS_BELOW and raw.count(b"[") + raw.count(b"{") <= depth_limit
            ):
                return value
            pretty, indent = orjson.dumps(value, option=_INDENT_2), 0
        else:
            return MISS
    except _ORJSON_ERRORS:
        return MISS
    # In pretty text the contents of a container at nesting level k are indented by
    # indent + 2k, and a container at level limit + 1 sits on a line inside one at level
    # limit; so no line indented that far proves the depth bound (a value exactly at the
    # bound with contents there is sent on to the exact checks).
    if depth_limit is not None and b"\n" + b" " * (indent + 2 * depth_limit) in pretty:
        return MISS
    return value
