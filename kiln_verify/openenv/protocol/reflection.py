"""Whether a peer's JSON carries a secret in any spelling that decodes to it.

A server that echoes a bearer token need not echo its bytes: JSON lets it spell any
character as ``\\uXXXX`` (``/`` also as ``\\/``, a supplementary character as a surrogate
pair), and the parser turns every spelling back into the token, which the recorder then
writes raw. So the question is never "are these bytes in the body" alone but "does any
decoded string -- object key or value, at any depth -- contain the secret". This module
answers it cheaply, in three steps, each proven below and by
``tests/openenv/protocol/test_reflection.py``:

1. **No backslash, nothing to decode.** When the document's text has no ``\\`` at all,
   it holds no escape sequence, so every string the parser returns is exactly the text
   between two quotes (for ``bytes``: the strict parser decodes UTF-8 strictly, and the
   UTF-8 encoding of that string is exactly those bytes). A secret inside a decoded string
   is then inside the text itself, which the raw substring check has already refused.
   :func:`escaped` is that test: one C-speed scan, and the only cost honest escape-free
   frames pay.
2. **A screen at C speed.** ``orjson`` escapes each character on its own (``"``, ``\\``
   and the controls below U+0020 get fixed escapes, everything else is written as its
   UTF-8), so if a decoded string ``s`` contains the secret ``t``, ``orjson``'s spelling of
   ``s`` contains ``orjson``'s spelling of ``t``, and the spelling of the whole value
   contains both. No match there proves no decoded string contains the secret.
3. **The exact answer.** A match may still straddle two strings (only for a secret that
   itself holds ``"``), or ``orjson`` may refuse the value (an integer beyond 64 bits);
   then :func:`_walk` visits every key and string and decides.

:func:`reflected_in_literals` serves documents the parser refused: their error messages
may quote a decoded key (a duplicate key, say), so before such an error is reported, every
string literal of the text is decoded as leniently as possible and searched too.

Numbers are not strings: a secret spelled only with digits, signs, ``.`` and ``e`` could
reappear in a respelled number (``1.2e1`` written as ``12.0``); such a token is not a
credential anyone issues, and the raw check still covers the number as the peer sent it.

:func:`spelled_in` serves a different question: not "may this document be recorded" but
"may this peer text be *shown*" (a policy server's refusal reason quoted in an error). A
person undoes more than JSON: Python escapes (``\\x73``), percent-encoding, base64 (a
server that echoes an ``Authorization: Basic`` header). So the text is decoded through up
to ``MAX_SECRET_SPELLING_LAYERS`` layers of escapes and percent-encoding, in any order (each
layer read with every escape undone, with JSON's alone and with Python's hex escapes alone),
and every layer is searched for the secret and for its base64 cores (:func:`base64_cores`).
"""

from __future__ import annotations

import base64
import re
from typing import Any, Final
from urllib.parse import unquote

import orjson

from kiln_verify.limits import MAX_SECRET_SPELLING_LAYERS

__all__ = [
    "base64_cores",
    "escaped",
    "json_spelling",
    "reflected_in_literals",
    "reflected_in_value",
    "spelled_in",
    "unescape_leniently",
]

_BACKSLASH: Final = b"\\"
# One JSON string literal, matched from its opening quote (so a scan over the text stays
# aligned with the grammar: in valid JSON every quote outside a string opens one), or the
# unterminated tail of one.
_LITERAL: Final = re.compile(rb'"([^"\\]*(?:\\.[^"\\]*)*)(?:"|\\?\Z)', re.DOTALL)
_ESCAPE: Final = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')
_SIMPLE: Final = {
    '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
}  # fmt: skip


def escaped(text: bytes | str) -> bool:
    """Whether ``text`` holds a backslash, i.e. may hold an escape sequence (step 1)."""
    if isinstance(text, str):
        return "\\" in text
    return _BACKSLASH in text


def json_spelling(secret: str) -> bytes:
    """``orjson``'s spelling of ``secret`` inside a JSON string (without the quotes)."""
    return orjson.dumps(secret)[1:-1]


def reflected_in_value(value: Any, secret: str, spelling: bytes) -> bool:
    """Whether any key or string anywhere in the parsed ``value`` contains ``secret``.

    ``spelling`` is :func:`json_spelling` of ``secret`` (computed once per credential).
    """
    try:
        dumped = orjson.dumps(value)
    except (orjson.JSONEncodeError, RecursionError):
        return _walk(value, secret)
    return spelling in dumped and _walk(value, secret)


def _walk(value: Any, secret: str) -> bool:
    """The exact answer: every object key and every string, iteratively (no recursion)."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str:
            if secret in item:
                return True
        elif kind is dict:
            for key, member in item.items():
                if secret in key:
                    return True
                pending.append(member)
        elif kind is list:
            pending.extend(item)
    return False


def _unescape(body: str) -> str:
    """A literal's body with every valid escape decoded; a surrogate pair becomes its
    character, anything malformed is kept as it is (the parser refused it anyway)."""
    text = _ESCAPE.sub(
        lambda m: _SIMPLE[m.group()[1]] if len(m.group()) == 2 else chr(int(m.group()[2:], 16)),
        body,
    )
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def reflected_in_literals(text: bytes | str, secret: str) -> bool:
    """Whether a string literal of ``text`` (a document the parser may have refused)
    decodes to something that contains ``secret``: literals with an escape only, since
    the raw check has covered the others."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    for match in _LITERAL.finditer(raw):
        body = match.group(1)
        if _BACKSLASH in body:
            decoded = _unescape(body.decode("utf-8", "surrogateescape"))
            if secret in decoded:
                return True
    return False


# --- texts about to be shown ----------------------------------------------------------------

# JSON and Python backslash escapes: \uXXXX, \UXXXXXXXX, \xXX, octal, the one-letter ones.
_ANY_ESCAPE: Final = re.compile(
    r"\\(?:u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|[0-7]{1,3}|[\"\\/'abfnrtv])"
)
# Python's hex escapes alone: \xXX, \uXXXX, \UXXXXXXXX.
_HEX_ESCAPE: Final = re.compile(r"\\(?:u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2})")
_LETTER: Final = {**_SIMPLE, "'": "'", "a": "\a", "v": "\v"}
_MIN_BASE64_CORE: Final = 8


def _one_escape(match: re.Match[str]) -> str:
    text = match.group()
    kind = text[1]
    if kind in "uUx":
        code = int(text[2:], 16)
    elif kind.isdigit():
        code = int(text[1:], 8)
    else:
        return _LETTER[kind]
    return chr(code) if code <= 0x10FFFF else text


def _decoded(escapes: re.Pattern[str], text: str) -> str:
    """``text`` with the escapes ``escapes`` matches decoded (a surrogate pair becomes its
    character); every other backslash, and anything malformed, is kept as it is."""
    if "\\" not in text:
        return text
    decoded = escapes.sub(_one_escape, text)
    return decoded.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def unescape_leniently(text: str) -> str:
    """``text`` with every JSON or Python backslash escape decoded (a surrogate pair becomes
    its character); anything malformed is kept as it is."""
    return _decoded(_ANY_ESCAPE, text)


def _readings(text: str) -> tuple[str, ...]:
    """What one layer of decoding can make of ``text``: every escape at once, JSON's
    escapes alone, Python's hex escapes alone, percent-encoding. A reader who undoes only
    one kind reads the others as plain characters, and the kinds overlap: in ``\\0\\x30``
    decoding every escape reads an octal ``\\0`` that swallows the ``0`` a reader of hex
    escapes alone sees beside the ``\\x30``."""
    return (
        unescape_leniently(text),
        _unescape(text) if "\\" in text else text,
        _decoded(_HEX_ESCAPE, text),
        unquote(text, errors="replace"),
    )


def base64_cores(secret: str) -> tuple[str, ...]:
    """The base64 (and base64url) characters that any base64 text containing ``secret``
    must contain, for each of its three possible byte alignments: the characters whose six
    bits all come from the secret. Cores shorter than eight characters are left out (they
    would match innocent text); a secret that short is still found raw."""
    raw = secret.encode("utf-8")
    cores: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        first = -(-8 * offset // 6)
        last = 8 * (offset + len(raw)) // 6
        core = encoded[first:last]
        if len(core) >= _MIN_BASE64_CORE:
            cores.add(core)
            cores.add(core.translate(str.maketrans("+/", "-_")))
    return tuple(sorted(cores, key=lambda core: (-len(core), core)))


def spelled_in(text: str, secret: str, cores: tuple[str, ...] = ()) -> bool:
    """Whether ``text`` holds ``secret`` raw or as one of ``cores``, directly or behind up
    to ``MAX_SECRET_SPELLING_LAYERS`` layers of backslash escapes and percent-encoding
    (each layer read every way :func:`_readings` knows)."""
    frontier = {text}
    seen: set[str] = set()
    for depth in range(MAX_SECRET_SPELLING_LAYERS + 1):
        following: set[str] = set()
        for item in frontier - seen:
            seen.add(item)
            if secret in item or any(core in item for core in cores):
                return True
            if depth < MAX_SECRET_SPELLING_LAYERS:
                following.update(_readings(item))
        frontier = following
    return False
