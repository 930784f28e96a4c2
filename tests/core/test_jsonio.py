"""Strict parsing, its boundaries, and the JSONL reader."""

from __future__ import annotations

import io
from typing import Any

import pytest

from kiln_verify.core.jsonio import iter_jsonl, iter_lines, loads, loads_object
from kiln_verify.errors import KilnError, LimitExceeded
from kiln_verify.limits import MAX_JSON_DEPTH, MAX_JSON_NUMBER_CHARS

CAP = 1 << 20


def code_of(data: bytes | str, max_bytes: int = CAP) -> str:
    with pytest.raises(KilnError) as caught:
        loads(data, max_bytes=max_bytes)
    return caught.value.code


def test_accepts_ordinary_json() -> None:
    text = '{"a": [1, -2.5, 1e3, true, false, null, "\\u00e9\\ud83d\\ude00"], "b": {}}'
    value = loads(text.encode(), max_bytes=CAP)
    assert value == {"a": [1, -2.5, 1000.0, True, False, None, "\u00e9\U0001f600"], "b": {}}
    assert type(value["a"][0]) is int
    assert type(value["a"][2]) is float
    assert loads(text, max_bytes=CAP) == value
    assert loads(bytearray(text.encode()), max_bytes=CAP) == value
    assert loads(memoryview(text.encode()), max_bytes=CAP) == value


def test_scalars_and_whitespace() -> None:
    assert loads(b" \t\r\n 7 \n", max_bytes=CAP) == 7
    assert loads(b'"x"', max_bytes=CAP) == "x"
    assert loads(b"null", max_bytes=CAP) is None
    assert loads(b"1e-400", max_bytes=CAP) == 0.0  # underflow is finite, as in serde_json


@pytest.mark.parametrize(
    "text",
    [b"", b" ", b"[1,]", b'{"a":1,}', b"01", b"[1 2]", b"'a'", b"{a:1}", b"[1]x", b"\x00", b"+1"],
)
def test_syntax_errors(text: bytes) -> None:
    assert code_of(text) == "json_syntax"


def test_syntax_error_reports_line() -> None:
    with pytest.raises(KilnError) as caught:
        loads(b'{\n"a": 1,\n"b" 2}', max_bytes=CAP, source="doc.json")
    assert caught.value.code == "json_syntax"
    assert caught.value.line == 3
    assert caught.value.path == "doc.json"


def _nest(depth: int) -> str:
    return "[" * depth + "]" * depth


def _nest_objects(depth: int) -> str:
    return '{"k":' * (depth - 1) + "{}" + "}" * (depth - 1)


@pytest.mark.parametrize("make", [_nest, _nest_objects])
def test_depth_boundary(make: Any) -> None:
    loads(make(MAX_JSON_DEPTH), max_bytes=CAP)
    assert code_of(make(MAX_JSON_DEPTH + 1)) == "json_too_deep"


def test_depth_counts_nesting_not_total_brackets() -> None:
    wide = "[" + ",".join(["[[]]"] * 1000) + "]"
    assert len(loads(wide, max_bytes=CAP)) == 1000


def test_brackets_inside_strings_do_not_count() -> None:
    text = '["' + "[" * 500 + '", "\\"[[[", {"k": "{{{{"}]'
    assert loads(text, max_bytes=CAP)[0] == "[" * 500


def test_number_length_boundary() -> None:
    ok = "1" * MAX_JSON_NUMBER_CHARS
    assert loads(ok, max_bytes=CAP) == int(ok)
    negative = "-" + "1" * (MAX_JSON_NUMBER_CHARS - 1)
    assert loads(negative, max_bytes=CAP) == int(negative)
    fraction = "0." + "1" * (MAX_JSON_NUMBER_CHARS - 2)
    assert loads(f"[{fraction}]", max_bytes=CAP) == [float(fraction)]
    assert code_of("1" * (MAX_JSON_NUMBER_CHARS + 1)) == "json_number_too_long"
    assert code_of("-" + "1" * MAX_JSON_NUMBER_CHARS) == "json_number_too_long"
    assert code_of("[0." + "1" * (MAX_JSON_NUMBER_CHARS - 1) + "]") == "json_number_too_long"


def test_long_digit_strings_are_fine() -> None:
    digits = "7" * 10_000
    assert loads(f'["{digits}", 1]', max_bytes=CAP) == [digits, 1]


def test_byte_cap_boundary_bytes() -> None:
    data = b'["' + b"x" * 96 + b'"]'
    assert len(data) == 100
    loads(data, max_bytes=100)
    with pytest.raises(LimitExceeded) as caught:
        loads(data, max_bytes=99)
    assert caught.value.code == "limit_exceeded"
    assert caught.value.bound == 99


def test_byte_cap_counts_utf8_bytes_of_text() -> None:
    text = '"' + "\u00e9" * 49 + '"'  # 51 characters, 100 bytes
    loads(text, max_bytes=100)
    with pytest.raises(LimitExceeded):
        loads(text, max_bytes=99)


def test_byte_cap_is_checked_before_decoding() -> None:
    assert code_of(b"\xff" * 101, max_bytes=100) == "limit_exceeded"
    assert code_of("[" * 101, max_bytes=100) == "limit_exceeded"


def test_loads_object() -> None:
    assert loads_object(b'{"a":1}', max_bytes=CAP) == {"a": 1}
    with pytest.raises(KilnError) as caught:
        loads_object(b"[1]", max_bytes=CAP, source="m.json")
    assert caught.value.code == "json_not_object"
    assert caught.value.path == "m.json"


# --- JSONL ------------------------------------------------------------------------------


def test_jsonl_yields_numbered_lines() -> None:
    lines = [b'{"a":1}\n', b"[]\n", b"3\n"]
    parsed = list(iter_jsonl(lines, max_line_bytes=100))
    assert [(line.number, line.raw, line.value) for line in parsed] == [
        (1, b'{"a":1}', {"a": 1}),
        (2, b"[]", []),
        (3, b"3", 3),
    ]


@pytest.mark.parametrize(
    ("lines", "code", "line"),
    [
        ([b"1\n", b"\n", b"2\n"], "jsonl_blank_line", 2),
        ([b"1\n", b" \r\n"], "jsonl_blank_line", 2),
        ([b"1\n", b"2"], "jsonl_missing_newline", 2),
        ([b"1\n", b"[1,\n"], "json_syntax", 2),
        ([b"1\n", b"2\n", b'{"a":1,"a":2}\n'], "json_duplicate_key", 3),
        ([b"NaN\n"], "json_non_finite", 1),
        ([b"1\n", b'"\xff"\n'], "json_invalid_utf8", 2),
    ],
)
def test_jsonl_errors_carry_the_line_number(lines: list[bytes], code: str, line: int) -> None:
    with pytest.raises(KilnError) as caught:
        list(iter_jsonl(lines, max_line_bytes=100, source="rows.jsonl"))
    assert caught.value.code == code
    assert caught.value.line == line
    assert caught.value.path == "rows.jsonl"
    assert f"line {line}" in str(caught.value)


def test_jsonl_final_newline_can_be_optional() -> None:
    parsed = list(iter_jsonl([b"1\n", b"2"], max_line_bytes=10, require_final_newline=False))
    assert [line.value for line in parsed] == [1, 2]
    with pytest.raises(KilnError) as caught:
        list(iter_jsonl([b"1", b"2\n"], max_line_bytes=10, require_final_newline=False))
    assert caught.value.code == "jsonl_missing_newline"
    assert caught.value.line == 1


def test_jsonl_line_cap_boundary_counts_the_lf() -> None:
    line = b"[" + b"1," * 48 + b"1]\n"
    assert len(line) == 100
    assert len(list(iter_jsonl([line], max_line_bytes=100))) == 1
    with pytest.raises(LimitExceeded) as caught:
        list(iter_jsonl([b"1\n", line], max_line_bytes=99))
    assert caught.value.line == 2


def test_iter_lines_is_bounded_and_streams() -> None:
    good = b"a" * 9 + b"\n"
    stream = io.BytesIO(good + good + b"tail")
    assert list(iter_lines(stream, max_line_bytes=10)) == [good, good, b"tail"]
    with pytest.raises(LimitExceeded) as caught:
        list(iter_lines(io.BytesIO(good + b"b" * 10 + b"\n"), max_line_bytes=10))
    assert caught.value.line == 2
    with pytest.raises(LimitExceeded):
        list(iter_lines(io.BytesIO(b"x" * 11), max_line_bytes=10))


def test_iter_lines_feeds_iter_jsonl() -> None:
    stream = io.BytesIO(b'{"a":1}\n{"b":2}\n')
    lines = iter_lines(stream, max_line_bytes=64)
    assert [line.value for line in iter_jsonl(lines, max_line_bytes=64)] == [{"a": 1}, {"b": 2}]
