"""The ``orjson`` tier decides nothing on its own: the strict value, or ``MISS``.

:func:`kiln_verify.core.jsonfast.canonical_value` keeps ``orjson``'s value only when
``orjson`` writes it back to exactly the input bytes. Compared here with the strict parser
(:func:`kiln_verify.core.jsonio.loads_strict`) on our compact and pretty spellings of
generated values and on hostile variants aimed at what ``orjson`` reads differently:
duplicate keys (last wins), NaN/Infinity, integers beyond 64 bits (read as floats),
nesting past our bound but within ``orjson``'s, lone surrogates, and the respellings
``1.0``/``1``, ``1E5``, ``-0``, ``\\u00e9``/``é``, ``\\/``. Also: the tier is taken on our own
bytes (so the speed-up is real), and :func:`loads` and the streaming reader give the strict
answer with it in place.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.core import jsonstream
from kiln_verify.core.jsonenc import dumps_compact, dumps_pretty
from kiln_verify.core.jsonfast import MISS, canonical_value
from kiln_verify.core.jsonio import loads, loads_strict
from kiln_verify.core.jsonstream import iter_members
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_JSON_DEPTH
from tests.core.test_json_fastpath import (
    CAP,
    SETTINGS,
    _values,
    exact_depth,
    mutants,
    outcome,
    stream_outcome,
)
from tests.core.test_json_properties import typed

_HOSTILE_SWAPS: list[tuple[bytes, bytes]] = [
    (b"1", b"-0"),
    (b"1", b"1E5"),
    (b"1", b"1.0"),
    (b"1", b"1e+16"),
    (b"1", b"18446744073709551616"),  # 2**64: orjson reads a float
    (b"1", b"-9223372036854775809"),  # below i64: orjson reads a float
    (b"1", b"1" * 40),
    (b"1", b"NaN"),
    (b"1", b"Infinity"),
    (b"1", b"1e400"),
    (b"a", b"\\u0061"),
    (b"a", b"\\u00e9"),
    (b"a", b"\xc3\xa9"),
    (b"a", b"\\/"),
    (b"a", b"\\ud800"),
    (b"a", b"\\udc00\\ud800"),
    (b'"', b'"\\ud83d\\ude00'),
    (b":", b" :"),
    (b",", b" ,"),
    (b"\n", b"\r\n"),
    (b"  ", b"\t"),
    (b"{", b'{"k":1,"k":2,'),
    (b"{", b'{"k": 1,\n  "k": 2,'),
    (b"[", b"[" * MAX_JSON_DEPTH),
]


def _swaps(data: bytes, seed: int) -> Iterator[bytes]:
    for index, (old, new) in enumerate(_HOSTILE_SWAPS):
        at = data.find(old, (seed * (index + 1)) % max(1, len(data)))
        if at < 0:
            at = data.find(old)
        if at >= 0:
            yield data[:at] + new + data[at + len(old) :]
    yield b"\xef\xbb\xbf" + data
    yield data + b"\n"
    yield data + b"\n\n"
    yield b" " + data


def _spellings(value: Any) -> Iterator[tuple[bytes, int]]:
    """Our compact and pretty bytes of ``value``, and the pretty bytes as a nested element."""
    yield dumps_compact(value), 0
    pretty = dumps_pretty(value)
    yield pretty, 0
    yield pretty[:-1], 0
    yield pretty[:-1].replace(b"\n", b"\n    "), 4


def _canonical(data: bytes, indent: int, limit: int | None = MAX_JSON_DEPTH) -> Any:
    value = canonical_value(data, limit, indent)
    return value if value is MISS else ("ok", typed(value))


def _agrees(data: bytes, indent: int) -> None:
    fast = _canonical(data, indent)
    if fast is not MISS:
        strict = outcome(lambda d: loads_strict(d, max_bytes=CAP), data)
        assert fast == strict, data


def _representable(value: Any) -> bool:
    """Within orjson's integers (i64..u64) and our depth bound: the tier must hit."""
    if isinstance(value, bool) or value is None or isinstance(value, float | str):
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**64
    items = value.values() if isinstance(value, dict) else value
    return all(map(_representable, items))


@SETTINGS
@given(_values, st.integers(min_value=0, max_value=1000))
def test_canonical_value_is_the_strict_value_or_miss(value: Any, seed: int) -> None:
    try:
        spellings = list(_spellings(value))
    except KilnError:  # a lone surrogate from st.text(): we never write one
        return
    for data, indent in spellings:
        _agrees(data, indent)
        for variant in [*_swaps(data, seed), *mutants(data, seed)]:
            _agrees(variant, indent)


@SETTINGS
@given(_values)
def test_canonical_value_hits_our_own_bytes(value: Any) -> None:
    try:
        spellings = list(_spellings(value))
    except KilnError:
        return
    if not _representable(value) or exact_depth(value) >= MAX_JSON_DEPTH - 1:
        return
    for data, indent in spellings:
        assert _canonical(data, indent) == ("ok", typed(value)), data


@SETTINGS
@given(_values, st.integers(min_value=0, max_value=1000))
def test_loads_agrees_with_the_strict_path_on_pretty_bytes(value: Any, seed: int) -> None:
    try:
        pretty = dumps_pretty(value)
    except KilnError:
        return
    for data in [pretty, *_swaps(pretty, seed), *mutants(pretty, seed)]:
        assert outcome(lambda d: loads(d, max_bytes=CAP), data) == outcome(
            lambda d: loads_strict(d, max_bytes=CAP), data
        ), data


def _nested(depth: int, pretty: bool, inner: bytes = b"1") -> bytes:
    """``{"k":{"k":...1...}}`` nested ``depth`` deep, in our compact or pretty spelling
    (written by hand: our writer refuses what it could not read back)."""
    if not pretty:
        return b'{"k":' * depth + inner + b"}" * depth
    opening = b"".join(b"{\n" + b"  " * (level + 1) + b'"k": ' for level in range(depth))
    closing = b"".join(b"\n" + b"  " * level + b"}" for level in reversed(range(depth)))
    return opening + inner + closing + b"\n"


_LONG_STRING = b'"' + b"x" * 40_000 + b'"'
"""Makes compact text long enough to skip the bracket count for the pretty check."""


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 300])
@pytest.mark.parametrize("pretty", [False, True])
@pytest.mark.parametrize("inner", [b"1", _LONG_STRING], ids=["short", "long"])
def test_nesting_beyond_our_bound_never_passes(depth: int, pretty: bool, inner: bytes) -> None:
    data = _nested(depth, pretty, inner)
    if depth <= MAX_JSON_DEPTH:  # the hand-written spelling is ours
        assert data == (dumps_pretty if pretty else dumps_compact)(loads(data, max_bytes=CAP))
    strict = outcome(lambda d: loads_strict(d, max_bytes=CAP), data)
    assert strict[0] == ("ok" if depth <= MAX_JSON_DEPTH else "error")
    fast = _canonical(data, 0)
    assert fast is MISS or fast == strict
    if depth > MAX_JSON_DEPTH:
        assert fast is MISS
    if depth < MAX_JSON_DEPTH:
        assert fast == strict  # the tier is taken up to the bound (less one, when pretty)
    assert outcome(lambda d: loads(d, max_bytes=CAP), data) == strict
    # a tighter bound from the caller (an element deep in a document) is honoured too
    assert _canonical(data, 0, limit=depth - 1) is MISS


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b'{"a":1,"a":1}', "json_duplicate_key"),
        (b'{"a": 1,\n  "a": 1\n}', "json_duplicate_key"),
        (b"[NaN]", "json_non_finite"),
        (b"[-Infinity]", "json_non_finite"),
        (b"[1e400]", "json_non_finite"),
        (b'["\\ud800"]', "json_lone_surrogate"),
        (b"[" + b"7" * 300 + b"]", "json_number_too_long"),
        (b"[1,]", "json_syntax"),
        (b"\xef\xbb\xbf[1]", "json_syntax"),
        (b'["\xed\xa0\x80"]', "json_invalid_utf8"),
    ],
)
def test_hostile_documents_keep_their_strict_error(data: bytes, code: str) -> None:
    assert _canonical(data, 0) is MISS
    assert outcome(lambda d: loads(d, max_bytes=CAP), data) == ("error", code)


@pytest.mark.parametrize(
    ("data", "value"),
    [
        (b"[18446744073709551616]", [2**64]),  # orjson alone reads a float
        (b"[-0]", [-0.0]),  # serde_json reads -0 as a float (issue 14.7)
        (b"[1E5]", [100000.0]),
        (b'["\\u00e9\\/"]', ["é/"]),
        (b"[1.00]", [1.0]),
    ],
)
def test_respellings_fall_back_to_the_strict_value(data: bytes, value: Any) -> None:
    assert _canonical(data, 0) is MISS
    assert typed(loads(data, max_bytes=CAP)) == typed(value)


def test_the_tier_keeps_float_and_integer_apart() -> None:
    data = b'{"a":1.0,"b":1,"c":-0.0,"d":1e+16,"e":18446744073709551615}'
    expected = {"a": 1.0, "b": 1, "c": -0.0, "d": 1e16, "e": 2**64 - 1}
    assert _canonical(data, 0) == ("ok", typed(expected))
    assert typed(loads_strict(data, max_bytes=CAP)) == typed(expected)


@contextlib.contextmanager
def _strict_route() -> Iterator[None]:
    """The streaming reader with every fast tier off: the strict scan and parser only."""
    reader = jsonstream._Reader
    originals = (reader.canonical_value, reader.fast_value, reader.canonical_run)
    reader.canonical_value = lambda *args: MISS  # type: ignore[method-assign]
    reader.fast_value = lambda *args: MISS  # type: ignore[method-assign]
    reader.canonical_run = lambda *args: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        reader.canonical_value, reader.fast_value, reader.canonical_run = originals  # type: ignore[method-assign]


@SETTINGS
@given(
    st.lists(_values, max_size=5),
    st.sampled_from([7, 64, 4096]),
    st.integers(min_value=0, max_value=1000),
)
def test_streaming_canonical_tier_agrees_with_the_strict_scan(
    items: list[Any], chunk: int, seed: int
) -> None:
    _variants_agree({"head": {"h": [1]}, "items": items, "tail": [2]}, chunk, seed)


def _variants_agree(document: Any, chunk: int, seed: int) -> None:
    """Our pretty spelling of ``document``, respellings and mutants: the streaming reader
    gives the strict scan's outcome (code included) for each."""
    try:
        pretty = dumps_pretty(document)
    except KilnError:
        return
    for variant in [pretty, *_swaps(pretty, seed), *mutants(pretty, seed)]:
        fast = stream_outcome(variant, chunk)
        with _strict_route():
            strict = stream_outcome(variant, chunk)
        assert fast == strict, variant


def test_streaming_search_stays_linear_on_other_layouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Elements that open a line but are not in our layout, with a closing-bracket line
    only at the very end: each search is bounded by the previous element's size, so the
    bytes handed to ``orjson`` do not grow with the square of the element count."""
    seen: list[int] = []

    def counting(raw: bytes, *args: Any) -> Any:
        seen.append(len(raw))
        return canonical_value(raw, *args)

    monkeypatch.setattr("kiln_verify.core.jsonstream.canonical_value", counting)
    elements = b",".join([b'{\n"a":1}'] * 2000)
    document = b'{"items":[' + elements + b'],"z":{\n  "q": 1\n    }\n}'
    members = list(iter_members(io.BytesIO(document).read, "items", max_bytes=CAP))
    assert len(members) == 2001
    assert sum(seen) <= 2 * len(document)


_objects = st.dictionaries(st.text(max_size=4), _values, min_size=1, max_size=3)


@settings(SETTINGS, max_examples=60)
@given(
    st.lists(_objects, min_size=1, max_size=6),
    st.sampled_from([7, 4096]),
    st.integers(min_value=0, max_value=1000),
)
def test_runs_of_elements_agree_with_the_strict_scan(
    items: list[Any], chunk: int, seed: int
) -> None:
    """Object elements: what a run of the canonical tier takes as one."""
    _variants_agree({"head": 1, "items": items, "tail": {"t": [2]}}, chunk, seed)


def _runs_taken(document: bytes, chunk: int = 1 << 20) -> tuple[list[Any], list[int]]:
    sizes: list[int] = []
    original = jsonstream._Reader.canonical_run

    def counting(self: Any, start: int, base_depth: int) -> list[Any] | None:
        run = original(self, start, base_depth)
        if run is not None:
            sizes.append(len(run))
        return run

    jsonstream._Reader.canonical_run = counting  # type: ignore[method-assign]
    try:
        members = iter_members(io.BytesIO(document).read, "items", max_bytes=CAP, chunk_size=chunk)
        values = [typed(m.value) for m in members if m.element]
    finally:
        jsonstream._Reader.canonical_run = original  # type: ignore[method-assign]
    return values, sizes


def test_our_own_records_are_parsed_in_runs() -> None:
    """The speed-up is real: 300 summary-like records in our spelling take a few runs,
    each bounded by the run size, and give the same values as the strict scan."""
    items = [{"group_index": i, "episode_return": i / 7, "termination": "done"} for i in range(300)]
    document = dumps_pretty({"schema": "s", "items": items, "stats": {"n": 300}})
    values, sizes = _runs_taken(document)
    assert values == [typed(item) for item in items]
    assert sum(sizes) == 300
    assert 1 <= len(sizes) <= 3  # 300 records of ~100 bytes: one or two runs of 64 KiB
    with _strict_route():
        strict = stream_outcome(document, 1 << 20)
    assert strict == stream_outcome(document, 1 << 20)


def test_a_run_that_reaches_past_the_array_is_refused_and_not_retried() -> None:
    """A closing line at element indent only after the array (another layout): the one
    run tried fails its check, the elements take the one-element route, same values."""
    document = b'{"items":[{\n"a":1},{\n"a":2}],"z":{\n  "q": 1\n    }\n}'
    values, sizes = _runs_taken(document)
    assert values == [typed({"a": 1}), typed({"a": 2})]
    assert sizes == []


_RECORDS = [{"group_index": i, "episode_return": i / 7, "termination": "done"} for i in range(100)]


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        (b'"termination"', b'"termination": "done",\n      "termination"', "json_duplicate_key"),
        (b'"episode_return": 7.142857142857143', b'"episode_return": NaN', "json_non_finite"),
        (b'"group_index": 50', b'"group_index": 5' + b"0" * 300, "json_number_too_long"),
        (b'"termination": "done"', b'"termination": "\\ud800"', "json_lone_surrogate"),
    ],
)
def test_a_bad_element_inside_a_run_keeps_its_strict_error(
    old: bytes, new: bytes, code: str
) -> None:
    """Element 50 of 100 spoiled: the run that would cover it is refused and the error is
    the strict scan's, with elements before it yielded as before."""
    document = dumps_pretty({"items": _RECORDS})
    at = document.index(b'"group_index": 50,')
    spoiled = document[:at] + document[at:].replace(old, new, 1)
    assert spoiled != document
    fast = stream_outcome(spoiled, 1 << 20)
    with _strict_route():
        strict = stream_outcome(spoiled, 1 << 20)
    assert fast == strict == ("error", code)


def _outcome_capped(data: bytes, chunk: int, cap: int) -> Any:
    try:
        members = iter_members(io.BytesIO(data).read, "items", max_bytes=cap, chunk_size=chunk)
        return ("ok", [(m.key, typed(m.value), m.element) for m in members])
    except KilnError as exc:
        return ("error", exc.code, str(exc))


def _strict_outcome_capped(data: bytes, chunk: int, cap: int) -> Any:
    with _strict_route():
        return _outcome_capped(data, chunk, cap)


def _pretty_items(count: int) -> bytes:
    items = [{"i": i, "text": "x" * (i % 7), "nested": [i, {"f": 0.5}]} for i in range(count)]
    return dumps_pretty({"head": 1, "items": items, "tail": [2]})


def test_streaming_elements_cut_by_the_buffer_stay_on_the_canonical_tier(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An element that straddles the end of the read buffer reads on and is still taken by
    the ``orjson`` tier (it used to go down the byte-scanning strict route), with the
    strict value."""
    data = _pretty_items(40)
    element_scans: list[int] = []
    original = jsonstream._Reader.value_end

    def counting(self: Any, start: int, base_depth: int) -> int:
        if base_depth == 2:
            element_scans.append(start)
        return original(self, start, base_depth)

    monkeypatch.setattr(jsonstream._Reader, "value_end", counting)
    for chunk in (16, 64, 100):
        element_scans.clear()
        assert _outcome_capped(data, chunk, CAP) == _strict_outcome_capped(data, chunk, CAP)
        element_scans.clear()
        read = io.BytesIO(data).read
        members = list(iter_members(read, "items", max_bytes=CAP, chunk_size=chunk))
        assert [m.value for m in members if m.element] == loads_strict(data, max_bytes=CAP)["items"]
        # only the first element (no previous size to bound the search) may scan
        assert len(element_scans) <= 1, (chunk, element_scans)


@pytest.mark.parametrize("chunk", [16, 64])
def test_reading_on_never_changes_an_error_near_max_bytes(chunk: int) -> None:
    """Reading on for a cut element never crosses ``max_bytes``: with a syntax error in
    the middle and every cap from well before it to past the end, the outcome (code and
    message) is the strict route's."""
    data = _pretty_items(12)
    middle = data.index(b'"i": 6')
    broken = data[:middle] + b'"i": 6,,' + data[middle + len(b'"i": 6,') :]
    # element 6 in another layout (its closing bracket indented 3, not 4), then ",,":
    # the strict route stops at the second comma; the search for a closing line must not
    # read past the cap first
    closing = data.index(b"\n    },", middle)
    relaid = data[:closing] + b"\n   },," + data[closing + len(b"\n    },") :]
    for document in (data, broken, relaid):
        for cap in range(middle - 200, len(document) + 2, 3):
            fast = _outcome_capped(document, chunk, cap)
            assert fast == _strict_outcome_capped(document, chunk, cap), (cap, fast)
