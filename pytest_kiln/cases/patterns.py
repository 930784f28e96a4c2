"""A string that matches a JSON Schema ``pattern``, for the regular expressions actions use.

Action schemas constrain codes and identifiers with small patterns (``^[A-Z]{3}-\\d+$``,
``^(up|down)$``); the suite must send a matching string or it cannot step at all. The
pattern is parsed with the standard library's own regular-expression parser (the one
``re`` compiles with, and ``jsonschema`` checks ``pattern`` with ``re.search``), then the
shortest obvious match is built: literals as written, the first member of a character
class, the minimum count of every repetition, the first branch of an alternation.
Backreferences and look-around are not attempted; the result is always re-checked with
``re.search``, so an unsupported construct yields ``None``, never a wrong answer.
"""

from __future__ import annotations

import importlib
import re
import warnings
from typing import Any

#: How long a generated string may get (bounded repetitions beyond this are given up).
MAX_PATTERN_TEXT = 256
#: Characters tried, in order, for a negated class or a "not this literal".
_FALLBACK_CHARS = "aA0_ -.b"


def _parser() -> Any:
    """``re._parser`` (3.11+), else the deprecated ``sre_parse`` alias of it."""
    try:
        return importlib.import_module("re._parser")
    except ImportError:  # pragma: no cover - older interpreters
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return importlib.import_module("sre_parse")


class _Unsupported(Exception):
    pass


class _Builder:
    def __init__(self, constants: Any) -> None:
        self.c = constants

    def sequence(self, items: Any) -> str:
        return "".join(self.item(op, arg) for op, arg in items)

    def item(self, op: Any, arg: Any) -> str:
        c = self.c
        if op is c.LITERAL:
            return chr(arg)
        if op is c.NOT_LITERAL:
            return next(ch for ch in _FALLBACK_CHARS if ord(ch) != arg)
        if op is c.ANY:
            return "a"
        if op is c.IN:
            return self.char_class(arg)
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            low, _high, sub = arg
            count = int(low)
            if count > MAX_PATTERN_TEXT:
                raise _Unsupported
            return self.sequence(sub) * count
        if op is c.SUBPATTERN:
            return self.sequence(arg[-1])
        if op is getattr(c, "ATOMIC_GROUP", None):
            return self.sequence(arg)
        if op is c.BRANCH:
            return self.sequence(arg[1][0])
        if op is c.AT:
            return ""
        raise _Unsupported  # GROUPREF, ASSERT, ASSERT_NOT, GROUPREF_EXISTS, ...

    def char_class(self, items: Any) -> str:
        c = self.c
        if items and items[0][0] is c.NEGATE:
            for candidate in _FALLBACK_CHARS:
                if not self._in(items[1:], candidate):
                    return candidate
            raise _Unsupported
        for op, arg in items:
            if op is c.LITERAL:
                return chr(arg)
            if op is c.RANGE:
                return chr(arg[0])
            if op is c.CATEGORY:
                return self._category(arg)
        raise _Unsupported

    def _category(self, category: Any) -> str:
        c = self.c
        chosen = {
            c.CATEGORY_DIGIT: "0",
            c.CATEGORY_NOT_DIGIT: "a",
            c.CATEGORY_SPACE: " ",
            c.CATEGORY_NOT_SPACE: "a",
            c.CATEGORY_WORD: "a",
            c.CATEGORY_NOT_WORD: "-",
        }.get(category)
        if chosen is None:
            raise _Unsupported
        return chosen

    def _in(self, items: Any, char: str) -> bool:
        c = self.c
        code = ord(char)
        for op, arg in items:
            if op is c.LITERAL and arg == code:
                return True
            if op is c.RANGE and arg[0] <= code <= arg[1]:
                return True
            if op is c.CATEGORY and re.fullmatch(_CATEGORY_RE[self._name(arg)], char):
                return True
        return False

    def _name(self, category: Any) -> str:
        return str(category).rsplit("_", 1)[-1].lower() + (
            "-not" if "NOT" in str(category) else ""
        )


_CATEGORY_RE: dict[str, str] = {
    "digit": r"\d",
    "digit-not": r"\D",
    "space": r"\s",
    "space-not": r"\S",
    "word": r"\w",
    "word-not": r"\W",
}


def string_for_pattern(pattern: str) -> str | None:
    """A short string ``s`` with ``re.search(pattern, s)``, or ``None`` if none was found."""
    try:
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    parser = _parser()
    try:
        parsed = parser.parse(pattern)
        text = _Builder(parser).sequence(parsed)
    except (_Unsupported, RecursionError, StopIteration, TypeError, ValueError, IndexError):
        return None
    if len(text) > MAX_PATTERN_TEXT or compiled.search(text) is None:
        return None
    return text
