"""Streaming one strict JSON object whose bulk is one top-level array.

:func:`iter_members` walks a document ``{"k": v, ..., "<array_key>": [e0, e1, ...], ...}``
read in chunks and yields, in document order, each top-level member other than the named
array (``Member(key, value, element=False)``) and each element of the named array
(``Member(array_key, element, element=True)``; an empty array is an ordinary member
``[]``). Every member value and every element is
parsed by :func:`kiln_verify.core.jsonio.loads` from its own bytes, so the strictness is
exactly that of parsing the whole document: duplicate keys (at every depth, the top-level
object included: the named array may appear only once), NaN/Infinity, invalid UTF-8, lone
surrogates, number length, and nesting depth counted from the document's root.

Memory: the buffer holds one member or element at a time (plus one read chunk); a single
element is bounded only by ``max_bytes`` (the file cap). Element boundaries are found by a
small byte state machine (strings with escapes, bracket depth) that never rescans bytes,
so a hostile document costs linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from kiln_verify.core.jsonio import (
    MISS,
    canonical_value,
    fast_clean,
    loads,
    loads_object,
    raw_decode,
)
from kiln_verify.errors import (
    JsonDuplicateKey,
    JsonSyntax,
    JsonTooDeep,
    KilnError,
    LimitExceeded,
    snippet,
)
from kiln_verify.limits import HASH_CHUNK_BYTES, MAX_JSON_DEPTH

__all__ = ["Member", "iter_members"]

_WS = re.compile(rb"[ \t\n\r]*+")
# Everything up to the next bracket outside a string: plain bytes and complete strings.
_SKIP = re.compile(rb'(?:[^"\[\]{}]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+', re.DOTALL)
_STRING_BODY = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
_SCALAR = re.compile(rb"[-+.0-9A-Za-z]*+")
_OPENERS = b"[{"
_CLOSER = {0x5B: b"]", 0x7B: b"}"}
_BOM = b"\xef\xbb\xbf"
_RUN_BYTES = 64 * 1024
"""The longest run of array elements parsed as one (:meth:`_Reader.canonical_run`): long
enough that a run of summary records costs one ``orjson`` round trip instead of a hundred,
short enough that the parsed run (several times its bytes as Python objects) stays small
beside the read buffer."""


class Member(NamedTuple):
    """A top-level member (``element=False``) or an element of the named array."""

    key: str
    value: Any
    element: bool


class _Reader:
    def __init__(self, read: Callable[[int], bytes], chunk_size: int, max_bytes: int) -> None:
        self._read = read
        self._chunk = chunk_size
        self.max_bytes = max_bytes
        self.buf = bytearray()
        self.pos = 0
        self.total = 0
        self.eof = False
        self._guess = 4096
        self._span = 4096
        self._runs = True  # until a run fails: then the document is not in our layout

    def fill(self) -> bool:
        """Append one chunk (dropping consumed bytes first); ``False`` at end of input."""
        if self.eof:
            return False
        data = self._read(self._chunk)
        if not data:
            self.eof = True
            return False
        self.total += len(data)
        if self.total > self.max_bytes:
            raise LimitExceeded("JSON document", limit="max_bytes", bound=self.max_bytes)
        self.buf += data
        return True

    def _can_fill(self) -> bool:
        """Whether :meth:`fill` may run without any chance of raising: one more chunk
        stays within ``max_bytes``. Reading on early then changes no error: every later
        step reads the same bytes whenever it needs them, and only I/O could fail."""
        return not self.eof and self.total + self._chunk <= self.max_bytes

    def compact(self) -> None:
        if self.pos >= self._chunk:
            del self.buf[: self.pos]
            self.pos = 0

    def skip_ws(self) -> int | None:
        """Skip whitespace; the next byte, or ``None`` at end of input."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return None

    def expect_more(self, what: str) -> None:
        if not self.fill():
            raise JsonSyntax(f"unexpected end of document in {what}")

    def string_end(self, start: int) -> int:
        """End offset of the string whose opening quote is at ``start``."""
        p = start + 1
        while True:
            q = _STRING_BODY.match(self.buf, p).end()  # type: ignore[union-attr]
            if q < len(self.buf) and self.buf[q] == 0x22:
                return q + 1
            # the body ran to the end of the buffer (perhaps on a lone trailing backslash)
            p = q
            self.expect_more("a string")

    def value_end(self, start: int, base_depth: int) -> int:
        """End offset of the JSON value starting at ``start`` (a non-blank byte)."""
        first = self.buf[start]
        if first == 0x22:
            return self.string_end(start)
        if first not in _OPENERS:
            p = start
            while True:
                p = _SCALAR.match(self.buf, p).end()  # type: ignore[union-attr]
                if p < len(self.buf) or not self.fill():
                    break
            if p == start:
                raise JsonSyntax("expecting a value")
            return p
        depth = 0
        p = start
        limit = MAX_JSON_DEPTH - base_depth
        buf = self.buf
        while True:
            p = _SKIP.match(buf, p).end()  # type: ignore[union-attr]
            if p == len(buf):
                self.expect_more("an array or object")
                continue
            byte = buf[p]
            if byte == 0x22:  # a string cut by the end of the buffer
                p = self.string_end(p)
            elif byte in _OPENERS:
                p += 1
                depth += 1
                if depth > limit:
                    raise JsonTooDeep(f"nesting depth exceeds MAX_JSON_DEPTH = {MAX_JSON_DEPTH}")
            else:
                p += 1
                depth -= 1
                if depth == 0:
                    return p

    def canonical_value(self, start: int, base_depth: int) -> Any:
        """A pretty array or object complete in the buffer, parsed by ``orjson``, or ``MISS``.

        In our pretty spelling a non-empty value at ``base_depth`` opens a line of its own
        and ends at the first LF followed by ``2 * base_depth`` spaces and its closing
        bracket (deeper lines are indented more, and strings hold no raw LF); the value
        counts only if those bytes are exactly its pretty spelling
        (:func:`kiln_verify.core.jsonio.canonical_value`), so they are one complete value
        and the strict route would end and parse it the same way. An element cut by the
        end of the buffer reads on within the search bound, only while a read cannot
        raise (:meth:`_can_fill`), so no error and no order of errors changes. The search
        is bounded by twice the previous element's size (``_span``), so a document in
        another layout costs linear time, not a scan of the buffer per element.
        """
        buf = self.buf
        if start + 1 == len(buf) and self._can_fill():
            self.fill()  # the opening bracket ends the buffer
        if buf[start + 1 : start + 2] != b"\n":
            return MISS
        indent = 2 * base_depth
        closing = b"\n" + b" " * indent + _CLOSER[buf[start]]
        stop = start + self._span
        end = buf.find(closing, start + 1, stop)
        while end < 0 and len(buf) < stop and self._can_fill():
            # cut by the end of the buffer: read on (within the same bound) rather than
            # send the element down the strict route
            searched = max(start + 1, len(buf) - len(closing) + 1)
            self.fill()
            end = buf.find(closing, searched, stop)
        if end < 0:
            return MISS
        end += len(closing)
        value = canonical_value(bytes(buf[start:end]), MAX_JSON_DEPTH - base_depth, indent)
        if value is not MISS:
            self.pos = end
        return value

    def canonical_run(self, start: int, base_depth: int) -> list[Any] | None:
        """Consecutive object elements of an array from ``start``, parsed as one, or ``None``.

        In our pretty spelling an object element at ``base_depth`` ends at a LF, ``2 *
        base_depth`` spaces and ``}`` (deeper lines are indented more; strings hold no raw
        LF), and the elements are joined by ``,`` plus a LF and the same indent. The run is
        every element from ``start`` to the last such end within :data:`_RUN_BYTES` of the
        buffer; it counts only if ``[`` + LF + indent + the run + LF + ``]`` (indented one
        level less) is exactly the pretty spelling of the array ``orjson`` reads from it.
        Then each element's bytes are its own pretty spelling too, which the one-element
        tier (:meth:`canonical_value`) would have accepted with the same value, so values,
        errors and their order are unchanged; only the per-element work is shared. Never
        reads input. After one run fails its check the document is not in our layout and
        no further run is tried, so a hostile layout costs at most one wasted run.
        """
        buf = self.buf
        if not self._runs or buf[start] != 0x7B or buf[start + 1 : start + 2] != b"\n":
            return None
        indent = b" " * (2 * base_depth)
        closing = b"\n" + indent + b"}"
        end = buf.rfind(closing, start + 1, start + _RUN_BYTES)
        if end < 0:
            return None
        end += len(closing)
        text = b"[\n" + indent + bytes(buf[start:end]) + b"\n" + indent[2:] + b"]"
        values = canonical_value(text, MAX_JSON_DEPTH - base_depth + 1, 2 * base_depth - 2)
        if values is MISS or not values:
            self._runs = False
            return None
        self.pos = end
        self._span = 2 * (end - start) // len(values) + 64
        result: list[Any] = values
        return result

    def fast_value(self, start: int, base_depth: int) -> Any:
        """An array or object complete in the buffer, parsed by the C scanner, or ``MISS``.

        The scanner finds the end itself; the value counts only if the fast path's checks
        (:func:`kiln_verify.core.jsonio.fast_clean`, depth from the document root) hold
        for exactly its bytes -- then the bracket scan and strict parse below would have
        produced the same end and value. Never reads more input (an element cut by the
        buffer end takes the strict route), so errors and their order cannot change.
        """
        buf = self.buf
        size = len(buf) - start
        window = min(size, self._guess)
        while True:
            chunk = bytes(buf[start : start + window])
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                if exc.reason != "unexpected end of data":
                    return MISS
                chunk = chunk[: exc.start]
                text = chunk.decode("utf-8")
            try:
                value, end = raw_decode(text)
            except (ValueError, KilnError, RecursionError):  # JSONDecodeError: ValueError
                if window == size:
                    return MISS
                window = min(size, 4 * window)
                continue
            break
        nbytes = end if len(text) == len(chunk) else len(text[:end].encode("utf-8"))
        if not fast_clean(text[:end], chunk[:nbytes], MAX_JSON_DEPTH - base_depth):
            return MISS
        self._guess = nbytes + (nbytes >> 2) + 64  # the next element is likely as long
        self.pos = start + nbytes
        return value

    def value(self, base_depth: int) -> Any:
        start = self.pos
        value = MISS
        if self.buf[start] in _OPENERS:
            value = self.canonical_value(start, base_depth)
            if value is MISS:
                value = self.fast_value(start, base_depth)
        if value is MISS:
            end = self.value_end(start, base_depth)
            self.pos = end
            # the scan above bounded the nesting depth (from the document root) already
            value = loads(bytes(self.buf[start:end]), max_bytes=self.max_bytes, depth_checked=True)
        self._span = 2 * (self.pos - start) + 64  # the next element is likely as long
        return value


def _walk(reader: _Reader, array_key: str) -> Iterator[Member]:
    first = reader.skip_ws()
    if reader.buf.startswith(_BOM):
        raise JsonSyntax("a byte order mark is not allowed before JSON text")
    if first != 0x7B:  # not an object: parse the rest whole for loads_object's exact error
        while reader.fill():
            pass
        loads_object(bytes(reader.buf), max_bytes=reader.max_bytes)
        raise JsonSyntax("expecting an object")  # pragma: no cover - loads_object raised
    reader.pos += 1
    seen: set[str] = set()
    after_comma = False
    while True:
        byte = reader.skip_ws()
        if byte == 0x7D and not after_comma and not seen:
            reader.pos += 1
            break
        if byte != 0x22:
            raise JsonSyntax("expecting a property name in double quotes")
        start = reader.pos
        end = reader.string_end(start)
        key = loads(bytes(reader.buf[start:end]), max_bytes=reader.max_bytes)
        reader.pos = end
        if key in seen:
            raise JsonDuplicateKey(f"duplicate object key {snippet(key)}")
        seen.add(key)
        if reader.skip_ws() != 0x3A:
            raise JsonSyntax("expecting ':' delimiter")
        reader.pos += 1
        byte = reader.skip_ws()
        if byte is None:
            raise JsonSyntax("unexpected end of document: expecting a value")
        if key == array_key and byte == 0x5B:
            reader.pos += 1
            if reader.skip_ws() == 0x5D:  # empty: an ordinary member
                reader.pos += 1
                yield Member(key, [], False)
            else:
                yield from _elements(reader, array_key)
        else:
            yield Member(key, reader.value(1), False)
        reader.compact()
        byte = reader.skip_ws()
        if byte == 0x2C:
            reader.pos += 1
            after_comma = True
            continue
        if byte == 0x7D:
            reader.pos += 1
            break
        raise JsonSyntax("expecting ',' or '}' after an object member")
    if reader.skip_ws() is not None:
        raise JsonSyntax("extra data after the top-level object")


def _elements(reader: _Reader, array_key: str) -> Iterator[Member]:
    while True:
        byte = reader.skip_ws()
        if byte is None:
            raise JsonSyntax("unexpected end of document in an array")
        run = reader.canonical_run(reader.pos, 2)
        if run is None:
            yield Member(array_key, reader.value(2), True)
        else:
            for value in run:
                yield Member(array_key, value, True)
        reader.compact()
        byte = reader.skip_ws()
        if byte == 0x2C:
            reader.pos += 1
            continue
        if byte == 0x5D:
            reader.pos += 1
            return
        raise JsonSyntax("expecting ',' or ']' in an array")


def iter_members(
    read: Callable[[int], bytes],
    array_key: str,
    *,
    max_bytes: int,
    source: str | None = None,
    chunk_size: int = HASH_CHUNK_BYTES,
) -> Iterator[Member]:
    """Yield the members of one strict top-level JSON object, streaming ``array_key``.

    ``read(n)`` returns up to ``n`` bytes (``b""`` at the end). Raises only
    :class:`KilnError` subclasses (``source`` names the file); if ``array_key``'s value is
    not an array it is yielded whole as an ordinary member.
    """
    reader = _Reader(read, max(1, chunk_size), max_bytes)
    try:
        yield from _walk(reader, array_key)
    except KilnError as exc:
        if source is not None and exc.path is None:
            exc.at(path=source)
        raise
