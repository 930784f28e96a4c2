"""Hostile safetensors headers: each refused with an exact code, quickly, no other exception."""

from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln_verify.core.safetensors_header import parse_safetensors, read_safetensors_header
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_SAFETENSORS_HEADER_BYTES
from tests.hf.adapter_check.kit import raw_file, safetensors_bytes

GOOD = safetensors_bytes(
    {"a": ("F32", [2, 3]), "b": ("BF16", [4]), "empty": ("F16", [0, 5]), "s": ("I64", [])},
    {"format": "pt"},
)


def entry(dtype: str, shape: Any, start: Any, end: Any) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [start, end]}


def refused(data: bytes) -> KilnError:
    with pytest.raises(KilnError) as caught:
        parse_safetensors(data)
    return caught.value


def test_good_file_parses() -> None:
    header = parse_safetensors(GOOD)
    assert list(header.tensors) == ["a", "b", "empty", "s"]
    assert header.tensors["a"].shape == (2, 3)
    assert header.tensors["a"].nbytes == 24
    assert header.tensors["empty"].nbytes == 0
    assert header.tensors["s"].shape == ()
    assert header.metadata == {"format": "pt"}
    assert header.data_size == 24 + 8 + 0 + 8


def test_unpadded_header_and_no_metadata() -> None:
    header = parse_safetensors(safetensors_bytes({"x": ("U8", [3])}, pad=False))
    assert header.metadata is None
    assert header.header_size == len(
        b'{"x": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}}'
    )


def test_prefix_over_limit() -> None:
    data = struct.pack("<Q", MAX_SAFETENSORS_HEADER_BYTES + 1) + b"{}"
    error = refused(data)
    assert error.code == "limit_exceeded"
    assert "MAX_SAFETENSORS_HEADER_BYTES" in error.rule


def test_prefix_huge() -> None:
    assert refused(b"\xff" * 8 + b"{}").code == "limit_exceeded"


def test_prefix_beyond_file() -> None:
    error = refused(struct.pack("<Q", 100) + b"{}")
    assert error.code == "safetensors_invalid"
    assert error.rule == "header length 100 exceeds the 2 bytes after the prefix"


@pytest.mark.parametrize("data", [b"", b"\x02\x00\x00", b"\x00" * 7])
def test_short_file(data: bytes) -> None:
    error = refused(data)
    assert error.code == "safetensors_invalid"
    assert "fewer than the 8-byte length prefix" in error.rule


@pytest.mark.parametrize("size", [0, 1])
def test_header_too_small(size: int) -> None:
    assert refused(struct.pack("<Q", size) + b"{" * size).code == "safetensors_invalid"


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (b"not json", "json_syntax"),
        (b'{"a": ', "json_syntax"),
        (b"\xff\xfe{}", "json_invalid_utf8"),
        (b"[]", "json_not_object"),
        (b'{"a": NaN}', "json_non_finite"),
        (b'{"__metadata__": {}, "__metadata__": {}}', "json_duplicate_key"),
        (
            b'{"t": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]},'
            b' "t": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}',
            "json_duplicate_key",
        ),
        (
            b'{"t": {"dtype": "U8", "dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}',
            "json_duplicate_key",
        ),
        (b"[" * 200 + b"]" * 200, "json_too_deep"),
    ],
)
def test_not_strict_json(header: bytes, code: str) -> None:
    assert refused(raw_file(header, b"")).code == code


@pytest.mark.parametrize(
    ("header", "data_size", "rule"),
    [
        ({"t": entry("F33", [1], 0, 4)}, 4, "tensor 't': unknown dtype 'F33'"),
        ({"t": entry("F4", [2], 0, 1)}, 1, "tensor 't': unknown dtype 'F4'"),
        (
            {"t": {"dtype": 7, "shape": [1], "data_offsets": [0, 1]}},
            1,
            "tensor 't': unknown dtype '7'",
        ),
        (
            {"t": entry("U8", [-1], 0, 0)},
            0,
            "tensor 't': shape must be a list of non-negative integers",
        ),
        (
            {"t": entry("U8", [True], 0, 1)},
            1,
            "tensor 't': shape must be a list of non-negative integers",
        ),
        (
            {"t": entry("U8", [1.0], 0, 1)},
            1,
            "tensor 't': shape must be a list of non-negative integers",
        ),
        (
            {"t": entry("U8", "1", 0, 1)},
            1,
            "tensor 't': shape must be a list of non-negative integers",
        ),
        (
            {"t": entry("U8", [1], 1, 0)},
            1,
            "tensor 't': data_offsets must be [start, end] with 0 <= start <= end",
        ),
        ({"t": entry("U8", [1], -1, 0)}, 1, "tensor 't': data_offsets must be [start, end]"),
        (
            {"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1, 2]}},
            1,
            "tensor 't': data_offsets must be",
        ),
        (
            {"t": {"dtype": "U8", "shape": [1], "data_offsets": 1}},
            1,
            "tensor 't': data_offsets must be",
        ),
        (
            {"t": entry("U8", [4], 0, 4)},
            3,
            "tensor 't': data_offsets end 4 is beyond the data section (3 bytes)",
        ),
        (
            {"t": entry("F32", [2], 0, 4)},
            4,
            "tensor 't': data_offsets span 4 bytes but shape '[2]' of F32 needs 8",
        ),
        (
            {"t": entry("U8", [10**200, 10**200], 0, 4)},
            4,
            "tensor 't': data_offsets span 4 bytes but shape",
        ),
        (
            {"a": entry("U8", [4], 0, 4), "b": entry("U8", [4], 2, 6)},
            6,
            "tensor 'b': data_offsets start 2 overlaps byte 4 after tensor 'a'",
        ),
        (
            {"a": entry("U8", [4], 0, 4), "b": entry("U8", [4], 4, 8), "c": entry("U8", [4], 4, 8)},
            8,
            "tensor 'c': data_offsets start 4 overlaps byte 8 after tensor 'b'",
        ),
        (
            {"a": entry("U8", [4], 0, 4), "b": entry("U8", [2], 6, 8)},
            8,
            "tensor 'b': data_offsets start 6 leaves a gap before byte 4 after tensor 'a'",
        ),
        (
            {"a": entry("U8", [2], 2, 4)},
            4,
            "tensor 'a': data_offsets start 2 leaves a gap before byte 0",
        ),
        ({"a": entry("U8", [2], 0, 2)}, 4, "the tensors cover 2 bytes but the data section has 4"),
        ({}, 1, "the tensors cover 0 bytes but the data section has 1"),
        (
            {"t": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0], "extra": 1}},
            0,
            "tensor 't': keys must be exactly dtype, shape, data_offsets"
            " (missing '', unexpected 'extra')",
        ),
        (
            {"t": {"dtype": "U8", "shape": [0]}},
            0,
            "tensor 't': keys must be exactly dtype, shape, data_offsets (missing 'data_offsets'",
        ),
        ({"t": [1, 2]}, 0, "tensor 't': entry is not an object"),
        ({"__metadata__": {"format": 1}}, 0, "__metadata__ must be an object of string values"),
        ({"__metadata__": "pt"}, 0, "__metadata__ must be an object of string values"),
    ],
)
def test_inconsistent_header(header: dict[str, Any], data_size: int, rule: str) -> None:
    error = refused(raw_file(json.dumps(header).encode(), bytes(data_size)))
    assert error.code == "safetensors_invalid"
    assert error.rule.startswith(rule)


def test_long_name_is_cut() -> None:
    name = "n" * 10_000
    error = refused(raw_file(json.dumps({name: entry("X", [0], 0, 0)}).encode(), b""))
    assert error.code == "safetensors_invalid"
    assert len(error.rule) < 200


def test_read_from_file_matches_memory(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    path.write_bytes(GOOD)
    assert read_safetensors_header(path) == parse_safetensors(GOOD)
    link = tmp_path / "link.safetensors"
    link.symlink_to(path)
    with pytest.raises(KilnError) as caught:
        read_safetensors_header(link)
    assert caught.value.code == "path_symlink"
    path.write_bytes(struct.pack("<Q", 50) + b"{}")
    with pytest.raises(KilnError) as caught:
        read_safetensors_header(path)
    assert caught.value.code == "safetensors_invalid"
    assert caught.value.path == str(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=256))
def test_random_bytes_only_kiln_errors(data: bytes) -> None:
    with contextlib.suppress(KilnError):
        parse_safetensors(data)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, len(GOOD) - 1), st.integers(0, 255)), min_size=1, max_size=4)
)
def test_mutated_file_only_kiln_errors(flips: list[tuple[int, int]]) -> None:
    data = bytearray(GOOD)
    for index, value in flips:
        data[index] = value
    with contextlib.suppress(KilnError):
        parse_safetensors(bytes(data))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.binary(max_size=64))
def test_random_header_text_only_kiln_errors(header: bytes, data: bytes) -> None:
    with contextlib.suppress(KilnError):
        parse_safetensors(raw_file(b'{"t": ' + header, data))
