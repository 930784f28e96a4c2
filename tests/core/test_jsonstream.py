"""The streaming reader of one large JSON object: same values, same strictness as loads."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.core.jsonio import loads_object
from kiln_verify.core.jsonstream import Member, iter_members
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_JSON_DEPTH

CAP = 1 << 20


def stream(data: bytes, key: str = "items", chunk: int = 3, cap: int = CAP) -> list[Member]:
    return list(iter_members(io.BytesIO(data).read, key, max_bytes=cap, chunk_size=chunk))


def rebuild(members: list[Member], key: str = "items") -> dict[str, Any]:
    """The document the members stand for (elements gathered back into the array)."""
    result: dict[str, Any] = {}
    elements = [m.value for m in members if m.element]
    for member in members:
        if member.element:
            result.setdefault(key, elements)
        else:
            result[member.key] = member.value
    return result


def stream_code(data: bytes, chunk: int = 3, cap: int = CAP) -> str:
    with pytest.raises(KilnError) as caught:
        stream(data, chunk=chunk, cap=cap)
    return caught.value.code


def whole_code(data: bytes, cap: int = CAP) -> str:
    with pytest.raises(KilnError) as caught:
        loads_object(data, max_bytes=cap)
    return caught.value.code


def test_members_in_document_order() -> None:
    data = b'{"a": 1, "items": [{"x": [1, 2]}, "s", 3.5, null], "z": {"k": "}]"}}'
    members = stream(data, chunk=1)
    assert members == [
        Member("a", 1, False),
        Member("items", {"x": [1, 2]}, True),
        Member("items", "s", True),
        Member("items", 3.5, True),
        Member("items", None, True),
        Member("z", {"k": "}]"}, False),
    ]


def test_empty_and_non_array_values_are_ordinary_members() -> None:
    assert stream(b'{"items": []}') == [Member("items", [], False)]
    assert stream(b'{"items": 5}') == [Member("items", 5, False)]
    assert stream(b"{}") == []
    assert stream(b" \n{ } \n") == []


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 64])
def test_elements_split_across_chunks(chunk: int) -> None:
    tricky = ['a"b', "back\\slash\\", "\\u005d]", "}{", "\u00e9\U0001f600", ""]
    document = {"head": tricky, "items": [{"s": s, "n": [[{}], -1e-3]} for s in tricky]}
    data = json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8")
    assert rebuild(stream(data, chunk=chunk)) == loads_object(data, max_bytes=CAP)


HOSTILE = [
    b'{"items": [1, 2',  # unterminated array
    b'{"items": [1, 2,]}',  # trailing comma
    b'{"items": [1 2]}',
    b'{"items": [1, 2]',  # unterminated object
    b'{"items": [1], }',
    b'{"a": 1, "a": 2, "items": []}',  # duplicate top-level key
    b'{"items": [1], "items": [2]}',  # the named array twice
    b'{"items": [1], "items": 2}',
    b'{"items": [{"k": 1, "k": 2}]}',  # duplicate key inside an element
    b'{"items": [NaN]}',
    b'{"items": [1], "x": -Infinity}',
    b'{"items": ["\\ud800"]}',  # lone surrogate escape
    b'{"\\udc00": 1}',  # in a top-level key
    b'{"items": ["\xff"]}',  # invalid UTF-8
    b'{"items": [1]} x',  # extra data
    b'{"items": [1]} {}',
    b"\xef\xbb\xbf{}",  # byte order mark
    b"[1, 2]",  # not an object
    b'"text"',
    b"",
    b"   ",
    b'{"items": [01]}',
    b'{"items": ["unterminated]}',
    b'{"items": ["esc\\',
    b"{items: []}",
    b'{"a" 1}',
    b'{"items": [' + b"1" * 300 + b"]}",  # number too long
    b'{"items": [1e999]}',
    b'{"items": [tru]}',
    b'{"items": [}]}',
]


@pytest.mark.parametrize("data", HOSTILE)
@pytest.mark.parametrize("chunk", [1, 4, 1024])
def test_hostile_documents_fail_with_the_whole_parse_code(data: bytes, chunk: int) -> None:
    assert stream_code(data, chunk=chunk) == whole_code(data)


def test_duplicate_array_key_is_a_duplicate_key() -> None:
    assert stream_code(b'{"items": [1], "items": [2]}') == "json_duplicate_key"
    assert stream_code(b'{"a": 1, "items": [], "a": 2}') == "json_duplicate_key"


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("where", ["element", "member"])
def test_depth_is_counted_from_the_document_root(where: str) -> None:
    base = 2 if where == "element" else 1
    for depth, ok in ((MAX_JSON_DEPTH - base, True), (MAX_JSON_DEPTH - base + 1, False)):
        inner = nested(depth)
        data = b'{"items": [' + inner + b"]}" if where == "element" else b'{"x": ' + inner + b"}"
        if ok:
            assert rebuild(stream(data)) == loads_object(data, max_bytes=CAP)
        else:
            assert stream_code(data) == whole_code(data) == "json_too_deep"


def test_very_deep_hostile_nesting_fails_fast() -> None:
    data = b'{"items": [' + b"[" * 1_000_000
    assert stream_code(data, chunk=4096, cap=1 << 24) == "json_too_deep"


def test_byte_cap() -> None:
    data = b'{"items": [' + b"1, " * 100 + b"1]}"
    assert stream_code(data, cap=64) == "limit_exceeded"


def test_source_names_the_file() -> None:
    with pytest.raises(KilnError) as caught:
        list(iter_members(io.BytesIO(b'{"items": [1,]}').read, "items", max_bytes=CAP, source="f"))
    assert caught.value.path == "f"


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    head=st.dictionaries(st.text(max_size=6).filter(lambda k: k != "items"), _values, max_size=3),
    tail=st.dictionaries(st.text(max_size=6).filter(lambda k: k != "items"), _values, max_size=3),
    items=st.lists(_values, max_size=6),
    indent=st.sampled_from([None, 0, 2]),
    ascii_only=st.booleans(),
    chunk=st.integers(min_value=1, max_value=40),
)
def test_streaming_yields_what_loads_gives(
    head: dict[str, Any],
    tail: dict[str, Any],
    items: list[Any],
    indent: int | None,
    ascii_only: bool,
    chunk: int,
) -> None:
    document = {**head, "items": items, **{k: v for k, v in tail.items() if k not in head}}
    data = json.dumps(document, indent=indent, ensure_ascii=ascii_only).encode(
        "utf-8", "surrogatepass"
    )
    code: str | None = None
    try:
        expected = loads_object(data, max_bytes=CAP)
    except KilnError as exc:  # lone surrogates from st.text(): same refusal when streamed
        code = exc.code
    if code is not None:
        assert stream_code(data, chunk=chunk) == code
        return
    members = stream(data, chunk=chunk)
    assert rebuild(members) == expected
    assert [m.key for m in members if not m.element] == [
        k for k in expected if k != "items" or not items
    ]
