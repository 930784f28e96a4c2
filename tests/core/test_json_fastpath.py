"""The parsers' fast paths decide nothing on their own: same value or same error code.

``loads`` accepts a fast-path result only when it can prove the strict path returns the
same value; ``iter_members`` parses a buffered element with the C scanner under the same
rule; ``parsed_text`` writes what our encoder writes for values the strict parser made.
Each is compared here with the strict reference on generated valid documents and on
hostile ones (mutations aimed at exactly what the fast checks skip: brackets and quotes in
strings, escapes, exponent and long numbers, nesting at the bound, duplicate keys, NaN,
lone surrogates).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln_verify.core import jsonstream
from kiln_verify.core.jsonenc import dumps_canonical, dumps_compact, parsed_text
from kiln_verify.core.jsonio import (
    MISS,
    depth_within,
    fast_value,
    loads,
    loads_strict,
    numbers_suspicious,
)
from kiln_verify.core.jsonstream import iter_members
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_JSON_DEPTH
from tests.core.test_json_properties import typed

CAP = 1 << 22
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_tricky_text = st.text(
    alphabet=st.sampled_from(list('[]{}"\\:,e0123456789+-. aéx\n\t\u2028😀')), max_size=12
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**80), max_value=10**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e16, 1e-7, 5e-324, 1.7976931348623157e308, -0.0, 1e300])
    | st.text(max_size=10)
    | _tricky_text
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6) | _tricky_text, inner)
    ),
    max_leaves=30,
)


def outcome(parse: Any, data: bytes) -> Any:
    try:
        return ("ok", typed(parse(data)))
    except KilnError as exc:
        return ("error", exc.code)


def encodings(value: Any) -> Iterator[bytes]:
    yield dumps_compact(value)
    yield json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    yield json.dumps(value, indent=1).encode()


_MUTATIONS: list[tuple[bytes, bytes]] = [
    (b"1", b"1e400"),
    (b"1", b"1e+0400"),
    (b"0", b"9" * 250 + b"e99"),
    (b"2", b"2" * 300),
    (b"3", b"NaN"),
    (b"4", b"-Infinity"),
    (b'"', b'"\\ud800'),
    (b'"', b'"\\\\'),
    (b'"', b'"\\"'),
    (b":", b":" + b"[" * MAX_JSON_DEPTH),
    (b"[", b"[" * MAX_JSON_DEPTH),
    (b"{", b'{"k":1,"k":2,'),
    (b",", b",,"),
    (b"]", b"]]"),
    (b"}", b""),
    (b"e", b"e000"),
]


def mutants(data: bytes, seed: int) -> Iterator[bytes]:
    for index, (old, new) in enumerate(_MUTATIONS):
        at = data.find(old, (seed * (index + 1)) % max(1, len(data)))
        if at < 0:
            at = data.find(old)
        if at >= 0:
            yield data[:at] + new + data[at + len(old) :]
    yield data[: len(data) // 2]
    yield data + b" x"


def exact_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(exact_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(exact_depth, value), default=0)
    return 0


@SETTINGS
@given(_values, st.integers(min_value=0, max_value=1000))
def test_loads_agrees_with_the_strict_path(value: Any, seed: int) -> None:
    for data in encodings(value):
        assert outcome(lambda d: loads(d, max_bytes=CAP), data) == outcome(
            lambda d: loads_strict(d, max_bytes=CAP), data
        )
        for mutant in mutants(data, seed):
            assert outcome(lambda d: loads(d, max_bytes=CAP), mutant) == outcome(
                lambda d: loads_strict(d, max_bytes=CAP), mutant
            ), mutant


@SETTINGS
@given(_values)
def test_fast_checks_are_exact_on_valid_json(value: Any) -> None:
    for data in encodings(value):
        try:
            parsed = json.loads(data)
        except ValueError:  # a lone surrogate from st.text(): not valid UTF-8
            continue
        depth = exact_depth(parsed)
        for limit in range(max(0, depth - 1), depth + 2):
            assert depth_within(data, limit) == (depth <= limit)
        strict = outcome(lambda d: loads_strict(d, max_bytes=CAP), data)
        if strict[0] == "error" and strict[1] in ("json_number_too_long", "json_non_finite"):
            assert numbers_suspicious(data)


@pytest.mark.parametrize(
    "data",
    [
        b"[" + b"9" * 250 + b"e99]",  # a long mantissa overflows with a 2-digit exponent
        b'{"a" : 1e400}',
        b"-1E+400",
        b"[1, " + b"1" * 257 + b"]",
        b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1),
        b'{"a": "' + b"[" * 200 + b'", "b": 1, "a": 2}',
        b'["\\\\", "\\"[[", ' + b"[" * (MAX_JSON_DEPTH - 1) + b"]" * (MAX_JSON_DEPTH - 1) + b"]",
    ],
)
def test_hostile_documents(data: bytes) -> None:
    fast = outcome(lambda d: loads(d, max_bytes=CAP), data)
    assert fast == outcome(lambda d: loads_strict(d, max_bytes=CAP), data)
    assert fast[0] == "error" or data.endswith(b"]")


def test_long_mantissa_overflow_is_non_finite() -> None:
    assert outcome(lambda d: loads(d, max_bytes=CAP), b"[" + b"9" * 250 + b"e99]") == (
        "error",
        "json_non_finite",
    )


def test_digest_like_strings_stay_on_the_fast_path() -> None:
    data = b'{"d":"sha256:5e280244fbb0","h":"a3e000b","n":"x 1e400"}'
    assert fast_value(data.decode(), data, MAX_JSON_DEPTH) is not MISS
    assert numbers_suspicious(b'{"d": 1e300}')
    assert numbers_suspicious(b'{"d"  :\n -2.5E+300}')


def stream_outcome(data: bytes, chunk: int) -> Any:
    try:
        members = iter_members(io.BytesIO(data).read, "items", max_bytes=CAP, chunk_size=chunk)
        return ("ok", [(m.key, typed(m.value), m.element) for m in members])
    except KilnError as exc:
        return ("error", exc.code)


@SETTINGS
@given(
    st.lists(_values, max_size=5),
    st.sampled_from([7, 64, 4096]),
    st.integers(min_value=0, max_value=1000),
)
def test_streaming_fast_path_agrees_with_the_strict_scan(
    items: list[Any], chunk: int, seed: int
) -> None:
    document = {"head": 1, "items": items, "tail": [2]}
    original = jsonstream._Reader.fast_value
    for data in encodings(document):
        for variant in [data, *mutants(data, seed)]:
            fast = stream_outcome(variant, chunk)
            jsonstream._Reader.fast_value = lambda *args: MISS  # type: ignore[method-assign]
            try:
                strict = stream_outcome(variant, chunk)
            finally:
                jsonstream._Reader.fast_value = original  # type: ignore[method-assign]
            assert fast == strict, variant


@SETTINGS
@given(_values)
def test_parsed_text_writes_our_bytes_for_parsed_values(value: Any) -> None:
    try:
        parsed = loads(dumps_compact(value), max_bytes=CAP)
    except KilnError:  # a lone surrogate from st.text()
        return
    assert parsed_text(parsed) == dumps_compact(parsed).decode("utf-8")
    assert parsed_text(parsed, canonical=True) == dumps_canonical(parsed).decode("utf-8")
