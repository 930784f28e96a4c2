"""Hostile JSON: every input here is refused with an exact code, quickly and safely."""

from __future__ import annotations

import time

import pytest

from kiln_verify.core.jsonio import iter_jsonl, loads
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_DISCOVERY_BODY_BYTES, MAX_ERROR_SNIPPET_CHARS

CAP = MAX_DISCOVERY_BODY_BYTES


def refused(data: bytes | str, max_bytes: int = CAP) -> KilnError:
    with pytest.raises(KilnError) as caught:
        loads(data, max_bytes=max_bytes)
    return caught.value


@pytest.mark.parametrize(
    "data",
    [
        "[" * 100_000,
        "[" * 100_000 + "]" * 100_000,
        '{"a":' * 100_000 + "1" + "}" * 100_000,
        "[{" * 50_000,
        '[{"k":' * 30_000,
        "[" * 200 + "]" * 199,  # unbalanced and deep
    ],
)
def test_deep_nesting_is_refused_without_recursion(data: str) -> None:
    assert refused(data).code == "json_too_deep"
    assert refused(data.encode()).code == "json_too_deep"


def test_deep_nesting_hidden_behind_strings_is_still_found() -> None:
    data = '["]]]]", "\\"]]", ' + "[" * 300 + "]" * 300 + "]"
    assert refused(data).code == "json_too_deep"


def test_unterminated_string_with_many_escaped_quotes_is_linear() -> None:
    data = '["' + '\\"[' * 400_000
    started = time.perf_counter()
    error = refused(data)
    assert error.code in {"json_syntax", "json_too_deep"}
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize(
    "data",
    [
        "1" * 5000,
        "-" + "9" * 100_000,
        "[" + "1" * 300 + "]",
        "0." + "0" * 400 + "1",
        "1e" + "0" * 300 + "1",
        '{"n": ' + "7" * 4301 + "}",
    ],
)
def test_huge_numbers_are_refused_before_conversion(data: str) -> None:
    started = time.perf_counter()
    assert refused(data).code == "json_number_too_long"
    assert time.perf_counter() - started < 1


NON_FINITE = [
    "NaN",
    "[NaN]",
    "-NaN",
    "Infinity",
    "-Infinity",
    '{"a":Infinity}',
    "[1e400]",
    "-1E+999",
]


@pytest.mark.parametrize("data", NON_FINITE)
def test_non_finite_numbers(data: str) -> None:
    error = refused(data)
    assert error.code in {"json_non_finite", "json_syntax"}
    if data != "-NaN":  # Python's scanner reads '-NaN' as a syntax error, which is also a refusal
        assert error.code == "json_non_finite"


def test_overflow_hidden_among_strings() -> None:
    assert refused('["e100", 1e999]').code == "json_non_finite"
    assert loads('["1e999", 1e-999]', max_bytes=CAP) == ["1e999", 0.0]


@pytest.mark.parametrize(
    "data",
    [
        b"\xef\xbb\xbf{}",  # UTF-8 byte order mark
        "\ufeff{}",
    ],
)
def test_byte_order_mark(data: bytes | str) -> None:
    error = refused(data)
    assert error.code == "json_syntax"
    assert "byte order mark" in error.rule


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe{\x00}\x00",  # UTF-16 with BOM
        b'"\x80"',  # lone continuation byte
        b'"\xc3"',  # truncated two-byte sequence
        b'"\xc0\xaf"',  # overlong '/'
        b'"\xe0\x80\xaf"',  # overlong three-byte
        b'"\xed\xa0\x80"',  # CESU-8 encoded surrogate
        b'"\xf4\x90\x80\x80"',  # above U+10FFFF
        b'"\xf8\x88\x80\x80\x80"',  # five-byte form
        b'{"a":"ok","\xfe":1}',
    ],
)
def test_invalid_utf8(data: bytes) -> None:
    assert refused(data).code == "json_invalid_utf8"


@pytest.mark.parametrize(
    "data",
    [
        '"\\ud800"',
        '"\\udc00"',
        '"\\uDBFF"',
        '"\\ud800\\u0041"',
        '"\\udc00\\ud800"',
        '["ok", {"\\ud83d": 1}]',
        '{"k": ["\\ude00x"]}',
        '"\ud800"',  # raw lone surrogate in str input
        '["\udfff"]',
    ],
)
def test_lone_surrogates(data: str) -> None:
    assert refused(data).code == "json_lone_surrogate"


def test_valid_pairs_and_escaped_backslashes_are_fine() -> None:
    assert loads('"\\ud83d\\ude00"', max_bytes=CAP) == "\U0001f600"
    assert loads('"\\\\ud800"', max_bytes=CAP) == "\\ud800"


@pytest.mark.parametrize(
    "data",
    [
        '{"a":1,"a":1}',
        '{"a":1,"b":2,"a":3}',
        '[{"x":{"y":[{"z":1,"z":2}]}}]',
        '{"\\u0061":1,"a":2}',  # same key after unescaping
        '{"a":{"b":1},"a":{"b":1}}',
        '{"": 1, "": 2}',
    ],
)
def test_duplicate_keys_at_any_depth(data: str) -> None:
    error = refused(data)
    assert error.code == "json_duplicate_key"


def test_duplicate_key_message_is_bounded() -> None:
    key = "k" * 100_000
    error = refused('{"' + key + '":1,"' + key + '":2}')
    assert error.code == "json_duplicate_key"
    assert len(str(error)) < 2 * MAX_ERROR_SNIPPET_CHARS + 300


def test_over_cap_input_is_refused_before_parsing() -> None:
    data = b"[" + b"1," * (CAP // 2) + b"1]"
    started = time.perf_counter()
    error = refused(data)
    assert error.code == "limit_exceeded"
    assert time.perf_counter() - started < 0.5


def test_other_hostile_spellings() -> None:
    assert refused("[1\u0663]").code == "json_syntax"  # non-ASCII digit
    assert refused('"a\tb"').code == "json_syntax"  # raw control character in a string
    assert refused('"\\x41"').code == "json_syntax"
    assert refused("[1,2]\x00").code == "json_syntax"
    assert refused("[1] [2]").code == "json_syntax"
    assert refused("[.5]").code == "json_syntax"
    assert refused("[1.]").code == "json_syntax"


def test_hostile_jsonl_line_reports_the_line() -> None:
    lines = [b"{}\n", b"[" * 10_000 + b"\n"]
    with pytest.raises(KilnError) as caught:
        list(iter_jsonl(lines, max_line_bytes=1 << 20))
    assert caught.value.code == "json_too_deep"
    assert caught.value.line == 2
