"""Byte-exact serializations and the single float spelling."""

from __future__ import annotations

import enum
import json
import json.encoder
import math
import struct
from operator import itemgetter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.core.jsonio import dumps_canonical, dumps_compact, dumps_pretty, format_float
from kiln_verify.errors import (
    JsonLoneSurrogate,
    JsonNumberTooLong,
    JsonTooDeep,
    JsonUnsupportedType,
    KilnError,
)
from kiln_verify.limits import MAX_JSON_DEPTH, MAX_JSON_NUMBER_CHARS

FLOAT_CASES = [
    (0.0, "0.0"),
    (-0.0, "-0.0"),
    (1.0, "1.0"),
    (-1.0, "-1.0"),
    (2.5, "2.5"),
    (12.5, "12.5"),
    (0.1, "0.1"),
    (0.30000000000000004, "0.30000000000000004"),
    (1e15, "1000000000000000.0"),
    (1234567890123456.0, "1234567890123456.0"),
    (9007199254740993.0, "9007199254740992.0"),
    (1e16, "1e+16"),
    (1.5e16, "1.5e+16"),
    (12345678901234567890.0, "1.2345678901234567e+19"),
    (1e20, "1e+20"),
    (1e21, "1e+21"),
    (-2.5e300, "-2.5e+300"),
    (0.001, "0.001"),
    (0.0001, "0.0001"),
    (0.00001, "0.00001"),
    (0.000012345, "0.000012345"),
    (-0.00001, "-0.00001"),
    (1e-6, "1e-6"),
    (1.5e-7, "1.5e-7"),
    (-1.5e-7, "-1.5e-7"),
    (1e-100, "1e-100"),
    (5e-324, "5e-324"),
    (2.2250738585072014e-308, "2.2250738585072014e-308"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (-1.7976931348623157e308, "-1.7976931348623157e+308"),
    (2.220446049250313e-16, "2.220446049250313e-16"),
    (123456.789, "123456.789"),
]


@pytest.mark.parametrize(("value", "expected"), FLOAT_CASES)
def test_format_float_table(value: float, expected: str) -> None:
    assert format_float(value) == expected
    assert float(expected) == value
    assert math.copysign(1.0, float(expected)) == math.copysign(1.0, value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_format_float_refuses_non_finite(value: float) -> None:
    with pytest.raises(KilnError) as caught:
        format_float(value)
    assert caught.value.code == "json_non_finite"


@settings(max_examples=2000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_float_round_trips_and_stays_a_float(value: float) -> None:
    text = format_float(value)
    assert float(text) == value
    assert struct.pack("<d", float(text)) == struct.pack("<d", value)
    assert "." in text or "e" in text
    assert "E" not in text
    if "e" in text:
        exponent = text.split("e")[1]
        assert exponent[0] in "+-"
        assert exponent[1:].isdigit()
        assert not exponent[1:].startswith("0")
    else:
        assert "+" not in text


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_format_float_on_raw_bit_patterns(bits: int) -> None:
    value = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
    if not math.isfinite(value):
        return
    text = format_float(value)
    assert float(text) == value
    mantissa = text.lstrip("-").split("e")[0]
    if "e" in text:
        # scientific: one digit before the point, no exponent padding
        exponent = text.split("e")[1]
        assert exponent.lstrip("-")[0] != "0"
        assert len(mantissa.split(".")[0]) == 1


def test_compact_bytes() -> None:
    value = {"b": [1, 2.0, True, False, None], "a": 'x/y\u00e9\n\t"\\\x01\x7f', "c": {}}
    assert (
        dumps_compact(value)
        == ('{"b":[1,2.0,true,false,null],"a":"x/y\u00e9\\n\\t\\"\\\\\\u0001\x7f","c":{}}').encode()
    )


def test_control_characters_escape_like_serde_json() -> None:
    text = "".join(chr(code) for code in range(0x20))
    encoded = dumps_compact(text).decode()
    assert encoded == (
        '"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r'
        "\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018"
        '\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f"'
    )


def test_non_ascii_is_raw_utf8() -> None:
    assert dumps_compact("\u2028\U0001f600") == '"\u2028\U0001f600"'.encode()


def test_canonical_sorts_recursively_by_code_point() -> None:
    value = {"b": {"z": 1, "a": [{"y": 0, "x": 0}]}, "a": 0, "\u00e9": 0, "Z": 0, "\U0001f600": 0}
    assert (
        dumps_canonical(value)
        == ('{"Z":0,"a":0,"b":{"a":[{"x":0,"y":0}],"z":1},"\u00e9":0,"\U0001f600":0}').encode()
    )


def test_canonical_key_order_is_utf8_byte_order() -> None:
    keys = ["\uffff", "\U00010000", "a", "\u00ff", "\ud7ff"]
    encoded = [key.encode() for key in sorted(keys)]
    assert encoded == sorted(encoded)


def test_pretty_bytes() -> None:
    value = {"a": [1, {"b": None}], "e": [], "o": {}, "s": "x"}
    assert dumps_pretty(value) == (
        b'{\n  "a": [\n    1,\n    {\n      "b": null\n    }\n  ],\n  "e": [],\n  "o": {},\n'
        b'  "s": "x"\n}\n'
    )
    assert dumps_pretty(3) == b"3\n"


def test_ints_and_bools_stay_distinct() -> None:
    assert dumps_compact([1, 1.0, True, 0, 0.0, False]) == b"[1,1.0,true,0,0.0,false]"
    assert dumps_compact(2**70) == str(2**70).encode()
    assert dumps_compact((1, "a")) == b'[1,"a"]'


def test_enum_members_encode_as_their_value() -> None:
    class Color(enum.StrEnum):
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    assert dumps_compact({"c": Color.RED, "l": Level.HIGH}) == b'{"c":"red","l":3}'
    assert dumps_compact([Color.RED, Color.RED]) == b'["red","red"]'


@pytest.mark.parametrize("dump", [dumps_compact, dumps_canonical, dumps_pretty])
@pytest.mark.parametrize(
    ("value", "code"),
    [
        ({"a": math.nan}, "json_non_finite"),
        ([math.inf], "json_non_finite"),
        ([1.0, -math.inf], "json_non_finite"),
        ({1: "a"}, "json_unsupported_type"),
        ({None: "a"}, "json_unsupported_type"),
        ({"a": {1, 2}}, "json_unsupported_type"),
        ([b"bytes"], "json_unsupported_type"),
        ({"a": object()}, "json_unsupported_type"),
        ("\ud800", "json_lone_surrogate"),
        ({"\udc00": 1}, "json_lone_surrogate"),
    ],
)
def test_refusals(dump: Any, value: object, code: str) -> None:
    with pytest.raises(KilnError) as caught:
        dump(value)
    assert caught.value.code == code


def test_integer_length_boundary_on_output() -> None:
    largest = 10**MAX_JSON_NUMBER_CHARS - 1
    lowest = -(10 ** (MAX_JSON_NUMBER_CHARS - 1) - 1)
    assert len(dumps_compact(largest)) == MAX_JSON_NUMBER_CHARS
    assert len(dumps_compact(lowest)) == MAX_JSON_NUMBER_CHARS
    assert dumps_compact([largest, lowest]) == f"[{largest},{lowest}]".encode()
    for value in (largest + 1, lowest - 1):
        for wrapped in (value, [value], [1, value], {"k": value}):
            with pytest.raises(KilnError) as caught:
                dumps_compact(wrapped)
            assert caught.value.code == "json_number_too_long"


def _nested(depth: int) -> Any:
    value: Any = 0
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


@pytest.mark.parametrize("dump", [dumps_compact, dumps_canonical, dumps_pretty])
def test_encoder_depth_boundary(dump: Any) -> None:
    dump(_nested(MAX_JSON_DEPTH))
    with pytest.raises(KilnError) as caught:
        dump(_nested(MAX_JSON_DEPTH + 1))
    assert caught.value.code == "json_too_deep"


def test_cycles_are_refused_not_recursed() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(KilnError) as caught:
        dumps_compact(loop)
    assert caught.value.code == "json_too_deep"


scalars = (
    st.none() | st.booleans() | st.integers(min_value=-(10**200), max_value=10**200) | st.text()
)
float_free = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(float_free)
def test_float_free_values_match_the_standard_library(value: Any) -> None:
    """Without floats our bytes must equal json.dumps with serde_json's settings."""
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert dumps_compact(value) == compact.encode()
    canonical = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    assert dumps_canonical(value) == canonical.encode()
    pretty = json.dumps(value, ensure_ascii=False, indent=2) + "\n"
    assert dumps_pretty(value) == pretty.encode()


# --- the encoder before the pretty fast paths, kept verbatim as the reference -------------
# (renamed with a _ref prefix); the encoder must write exactly its bytes and errors.

_encode_str = json.encoder.encode_basestring
_int_repr = int.__repr__
_first = itemgetter(0)
_INT_HIGH = 10**MAX_JSON_NUMBER_CHARS
_INT_LOW = -(10 ** (MAX_JSON_NUMBER_CHARS - 1))


def _ref_int(value: int) -> str:
    if not _INT_LOW < value < _INT_HIGH:
        raise JsonNumberTooLong(
            f"an integer longer than MAX_JSON_NUMBER_CHARS = {MAX_JSON_NUMBER_CHARS} characters"
        )
    return _int_repr(value)


def _ref_unsupported(value: object) -> JsonUnsupportedType:
    return JsonUnsupportedType(f"cannot encode a value of type {type(value).__name__} as JSON")


def _ref_scalar(value: object) -> str:
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
        return _ref_int(int(value))
    if isinstance(value, float):
        return format_float(float(value))
    raise _ref_unsupported(value)


def _ref_fast_array(items: list[Any] | tuple[Any, ...]) -> str | None:
    """Join homogeneous scalar arrays (token ids, logprobs, texts) in C-speed passes."""
    kinds = set(map(type, items))
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is int:
        if min(items) <= _INT_LOW or max(items) >= _INT_HIGH:
            return None  # the element loop raises the precise error
        return ",".join(map(_int_repr, items))
    if kind is str:
        return ",".join(map(_encode_str, items))
    if kind is float:
        return ",".join(map(format_float, items))
    return None


def _ref_compact(value: Any, out: list[str], depth: int, sort_keys: bool) -> None:
    kind = type(value)
    if kind is dict:
        if depth >= MAX_JSON_DEPTH:
            raise JsonTooDeep(f"nesting deeper than MAX_JSON_DEPTH = {MAX_JSON_DEPTH}")
        if not value:
            out.append("{}")
            return
        items = value.items()
        if sort_keys:
            _ref_check_keys(value)
            items = sorted(items, key=_first)
        sep = "{"
        for key, item in items:
            if type(key) is not str and not isinstance(key, str):
                raise _ref_bad_key(key)
            out.append(sep)
            out.append(_encode_str(key))
            out.append(":")
            _ref_compact(item, out, depth + 1, sort_keys)
            sep = ","
        out.append("}")
    elif kind is list or kind is tuple:
        if depth >= MAX_JSON_DEPTH:
            raise JsonTooDeep(f"nesting deeper than MAX_JSON_DEPTH = {MAX_JSON_DEPTH}")
        if not value:
            out.append("[]")
            return
        joined = _ref_fast_array(value)
        if joined is not None:
            out.append("[")
            out.append(joined)
            out.append("]")
            return
        sep = "["
        for item in value:
            out.append(sep)
            _ref_compact(item, out, depth + 1, sort_keys)
            sep = ","
        out.append("]")
    elif kind is str:
        out.append(_encode_str(value))
    elif kind is int:
        out.append(_ref_int(value))
    elif kind is float:
        out.append(format_float(value))
    else:
        out.append(_ref_scalar(value))


def _ref_pretty(value: Any, out: list[str], depth: int) -> None:
    kind = type(value)
    if kind is dict or kind is list or kind is tuple:
        if depth >= MAX_JSON_DEPTH:
            raise JsonTooDeep(f"nesting deeper than MAX_JSON_DEPTH = {MAX_JSON_DEPTH}")
        if not value:
            out.append("{}" if kind is dict else "[]")
            return
        inner = "\n" + "  " * (depth + 1)
        if kind is dict:
            sep = "{" + inner
            for key, item in value.items():
                if not isinstance(key, str):
                    raise _ref_bad_key(key)
                out.append(sep)
                out.append(_encode_str(key))
                out.append(": ")
                _ref_pretty(item, out, depth + 1)
                sep = "," + inner
            out.append("\n" + "  " * depth + "}")
        else:
            sep = "[" + inner
            for item in value:
                out.append(sep)
                _ref_pretty(item, out, depth + 1)
                sep = "," + inner
            out.append("\n" + "  " * depth + "]")
    else:
        out.append(_ref_scalar(value))


def _ref_check_keys(mapping: dict[Any, Any]) -> None:
    for key in mapping:
        if not isinstance(key, str):
            raise _ref_bad_key(key)


def _ref_bad_key(key: object) -> JsonUnsupportedType:
    return JsonUnsupportedType(f"object keys must be str, not {type(key).__name__}")


def _ref_to_utf8(parts: list[str]) -> bytes:
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise JsonLoneSurrogate("a string contains an unpaired UTF-16 surrogate") from exc


def _ref_dumps_compact(value: Any) -> bytes:
    """serde_json ``to_vec`` bytes: ``,``/``:`` separators, raw UTF-8, keys in given order."""
    out: list[str] = []
    _ref_compact(value, out, 0, False)
    return _ref_to_utf8(out)


def _ref_dumps_canonical(value: Any) -> bytes:
    """Compact bytes with object keys sorted recursively by code point (= UTF-8 byte order)."""
    out: list[str] = []
    _ref_compact(value, out, 0, True)
    return _ref_to_utf8(out)


def _ref_dumps_pretty(value: Any) -> bytes:
    """serde_json pretty bytes (2-space indent, ``": "``) plus one trailing LF, keys in order."""
    out: list[str] = []
    _ref_pretty(value, out, 0)
    out.append("\n")
    return _ref_to_utf8(out)


class _Text(str):
    pass


class _Count(enum.IntEnum):
    ONE = 1


class _Mapping(dict[str, Any]):
    pass


_any_float = st.floats() | st.sampled_from([1e16, 1e-5, 1e-7, 123456789e20, -0.0, 5e-324])
_any_int = st.integers() | st.sampled_from(
    [10**MAX_JSON_NUMBER_CHARS - 1, 10**MAX_JSON_NUMBER_CHARS, -(10 ** (MAX_JSON_NUMBER_CHARS - 1))]
)
_odd_scalars = st.sampled_from(
    [_Text("sub"), _Count.ONE, "\ud800", b"bytes", math.nan, 2**64, (), {}, []]
)
_leaves = st.none() | st.booleans() | _any_int | _any_float | st.text() | _odd_scalars
_keys = st.text() | st.sampled_from(["\udc00", "b", "a", "é", "\U0001f600"])
_odd_keys = st.sampled_from([1, None, _Text("k")])
_values = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.lists(inner, max_size=4).map(tuple)
        | st.lists(_any_int, max_size=6)
        | st.lists(_any_float, max_size=6)
        | st.lists(st.text(), max_size=4)
        | st.dictionaries(_keys, inner, max_size=5)
        | st.dictionaries(_keys | _odd_keys, inner, max_size=3)
        | st.dictionaries(_keys, inner, max_size=3).map(_Mapping)
    ),
    max_leaves=40,
)


def _outcome(dump: Any, value: Any) -> tuple[str, Any]:
    try:
        return ("bytes", dump(value))
    except KilnError as exc:
        return ("error", (exc.code, str(exc)))


@settings(max_examples=1500, deadline=None)
@given(_values)
def test_fast_paths_write_the_reference_bytes_and_errors(value: Any) -> None:
    """The inlined pretty leaves and joined pretty arrays change no byte and no error."""
    pairs = [
        (dumps_compact, _ref_dumps_compact),
        (dumps_canonical, _ref_dumps_canonical),
        (dumps_pretty, _ref_dumps_pretty),
    ]
    for fast, reference in pairs:
        assert _outcome(fast, value) == _outcome(reference, value)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1])
def test_fast_paths_match_the_reference_at_the_depth_bound(depth: int) -> None:
    leaves: tuple[Any, ...] = ([], {}, 1.5, 1e16, [1, 2], ["a"])
    for wrap in (lambda v: [v], lambda v: {"k": v}):
        for leaf in leaves:
            value: Any = leaf
            for _ in range(depth):
                value = wrap(value)
            for fast, reference in [
                (dumps_compact, _ref_dumps_compact),
                (dumps_canonical, _ref_dumps_canonical),
                (dumps_pretty, _ref_dumps_pretty),
            ]:
                assert _outcome(fast, value) == _outcome(reference, value)
