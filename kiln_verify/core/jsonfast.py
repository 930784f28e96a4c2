"""Byte-level checks of the strict parser's fast path (:mod:`kiln_verify.core.jsonio`).

Both are C-speed passes over the UTF-8 bytes whose answers are exact for *valid* JSON,
which is all the fast path needs: :func:`~kiln_verify.core.jsonio.loads` accepts a fast
result only after the C scanner parsed the same text, and reruns anything else through the
strict path, which alone decides errors. Kept apart from ``jsonio`` so each module keeps
one job; ``jsonio`` re-exports both.
"""

from __future__ import annotations

import itertools
import operator

from kiln_verify.limits import MAX_JSON_NUMBER_CHARS

__all__ = ["depth_within", "numbers_suspicious"]

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
    """Whether ``raw`` may hold a number the strict path refuses (too long, overflowing).

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
