"""Properties of the parser and the byte rules, over generated documents."""

from __future__ import annotations

import contextlib
import math
import random
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln_verify.core.jsonio import dumps_canonical, dumps_compact, dumps_pretty, loads
from kiln_verify.errors import KilnError

CAP = 1 << 22
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**100), max_value=10**100)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=40,
)


def typed(value: Any) -> Any:
    """A form where 1, 1.0, True and 0.0/-0.0 all differ, for type-preserving equality."""
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, int):
        return ("i", value)
    if isinstance(value, float):
        return ("f", struct.pack("<d", value))
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("l", [typed(item) for item in value])
    return ("o", [(key, typed(item)) for key, item in value.items()])


@SETTINGS
@given(json_values)
def test_round_trip_preserves_values_types_and_key_order(value: Any) -> None:
    for dump in (dumps_compact, dumps_pretty):
        assert typed(loads(dump(value), max_bytes=CAP)) == typed(value)


@SETTINGS
@given(json_values)
def test_compact_is_a_fixed_point(value: Any) -> None:
    data = dumps_compact(value)
    assert dumps_compact(loads(data, max_bytes=CAP)) == data


def shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    return value


@SETTINGS
@given(json_values, st.randoms(use_true_random=False))
def test_canonical_is_idempotent_and_key_order_independent(value: Any, rng: random.Random) -> None:
    canonical = dumps_canonical(value)
    assert dumps_canonical(loads(canonical, max_bytes=CAP)) == canonical
    assert dumps_canonical(shuffled(value, rng)) == canonical
    assert dumps_canonical(loads(dumps_pretty(value), max_bytes=CAP)) == canonical


def _pair(key: str, value: Any) -> str:
    return dumps_compact(key).decode() + ":" + dumps_compact(value).decode()


@SETTINGS
@given(
    key=st.text(max_size=5),
    first=json_values,
    second=json_values,
    others=st.dictionaries(st.text(max_size=5), json_scalars, max_size=4),
    position=st.integers(min_value=0, max_value=5),
    wrappers=st.lists(st.none() | st.text(max_size=3), max_size=8),
)
def test_duplicate_keys_are_always_rejected(
    key: str,
    first: Any,
    second: Any,
    others: dict[str, Any],
    position: int,
    wrappers: list[str | None],
) -> None:
    members = [_pair(k, v) for k, v in others.items() if k != key]
    members.insert(0, _pair(key, first))
    members.insert(1 + position % len(members), _pair(key, second))
    text = "{" + ",".join(members) + "}"
    for wrapper in wrappers:  # bury the object at a random depth in arrays and objects
        text = (
            f"[1,{text}]"
            if wrapper is None
            else "{"
            + _pair(wrapper, 0)
            + ","
            + dumps_compact(wrapper + "!").decode()
            + ":"
            + text
            + "}"
        )
    with pytest.raises(KilnError) as caught:
        loads(text, max_bytes=CAP)
    assert caught.value.code == "json_duplicate_key", text[:200]


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_kiln_errors(data: bytes) -> None:
    with contextlib.suppress(KilnError):
        loads(data, max_bytes=CAP)


json_alphabet = st.sampled_from(
    [
        *'[]{}",:.-+eE0123456789\\ \n\tabfnrtuxyzNIaIl',
        "true",
        "false",
        "null",
        "NaN",
        "Infinity",
        "\\ud800",
        "\\udc00",
        "\\u00e9",
        "\u00e9",
        "\x00",
    ]
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(json_alphabet, max_size=60).map("".join))
def test_json_like_text_raises_only_kiln_errors(text: str) -> None:
    for data in (text, text.encode("utf-8", "surrogatepass")):
        try:
            value = loads(data, max_bytes=CAP)
        except KilnError:
            continue
        # Whatever is accepted must be re-encodable: finite, no lone surrogates.
        dumps_compact(value)


@SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_parsed_floats_are_always_finite_and_exact(value: float) -> None:
    parsed = loads(dumps_compact([value]), max_bytes=CAP)[0]
    assert math.isfinite(parsed)
    assert struct.pack("<d", parsed) == struct.pack("<d", value)
