"""The volatile-identity rule for ``State.episode_id`` (kiln_verify.openenv.volatile)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kiln_verify.openenv.volatile import (
    VOLATILE_STATE_FIELDS,
    VolatileValue,
    compare_states,
    json_type,
    mask_volatile,
    volatile_state_fields,
)


def state(episode_id: Any = None, **fields: Any) -> dict[str, Any]:
    return {"episode_id": episode_id, "step_count": 0, **fields}


def test_only_episode_id_is_identity() -> None:
    assert VOLATILE_STATE_FIELDS == ("episode_id",)


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (None, ("episode_id",)),
        ({}, ("episode_id",)),
        ({"seed": 7}, ("episode_id",)),
        ({"episode_id": None}, ("episode_id",)),
        ({"episode_id": "run-7"}, ()),
        ({"episode_id": ""}, ()),
    ],
)
def test_volatile_unless_the_payload_sets_it(payload: Any, expected: tuple[str, ...]) -> None:
    assert volatile_state_fields(payload) == expected
    assert volatile_state_fields(payload, strict=True) == ()


def test_with_a_state_only_fields_it_carries_are_listed() -> None:
    assert volatile_state_fields({}, {"step_count": 0}) == ()
    assert volatile_state_fields({}, state("x")) == ("episode_id",)
    assert volatile_state_fields({}, ["not", "an", "object"]) == ()


def test_uuid_episode_ids_compare_equal_and_are_listed() -> None:
    first, second = state(str(uuid.uuid4()), total=3), state(str(uuid.uuid4()), total=3)
    comparison = compare_states(first, second, reset_payload={"seed": 1})
    assert comparison.equal
    assert comparison.volatile == ("episode_id",)
    assert comparison.difference is None


def test_other_fields_are_still_exact() -> None:
    comparison = compare_states(
        state("a", total=3), state("b", total=4), reset_payload={}, path="final_state"
    )
    assert not comparison.equal
    assert comparison.difference is not None
    assert comparison.difference.path == "final_state.total"
    assert (comparison.difference.expected, comparison.difference.actual) == ("'3'", "'4'")


def test_type_and_presence_are_compared() -> None:
    by_type = compare_states(state("a"), state(None), reset_payload={})
    assert by_type.difference is not None
    assert by_type.difference.path == "state.episode_id"
    assert (by_type.difference.expected, by_type.difference.actual) == (
        "'<volatile string>'",
        "'<volatile null>'",
    )
    absent = {"step_count": 0}
    by_presence = compare_states(state("a"), absent, reset_payload={})
    assert by_presence.volatile == ("episode_id",)
    assert by_presence.difference is not None
    assert by_presence.difference.path == "state.episode_id"
    assert by_presence.difference.actual == "<absent>"


def test_a_set_episode_id_is_exact() -> None:
    comparison = compare_states(
        state("run-7"), state("other"), reset_payload={"episode_id": "run-7"}
    )
    assert comparison.volatile == ()
    assert comparison.difference is not None
    assert comparison.difference.path == "state.episode_id"
    assert comparison.difference.actual == "'\"other\"'"


def test_strict_compares_everything_exactly() -> None:
    comparison = compare_states(state("a"), state("b"), reset_payload=None, strict=True)
    assert comparison.volatile == ()
    assert comparison.difference is not None
    assert comparison.difference.path == "state.episode_id"


def test_integer_and_float_step_counts_still_differ() -> None:
    left, right = state("a"), {**state("b"), "step_count": 0.0}
    comparison = compare_states(left, right, reset_payload={})
    assert comparison.difference is not None
    assert comparison.difference.path == "state.step_count"


def test_mask_leaves_inputs_alone() -> None:
    original = state("a")
    masked = mask_volatile(original, ("episode_id",))
    assert masked == {"episode_id": VolatileValue("string"), "step_count": 0}
    assert original == state("a")
    assert mask_volatile(["x"], ("episode_id",)) == ["x"]
    assert mask_volatile(original, ()) is original


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "null"),
        (True, "boolean"),
        (1, "integer"),
        (1.0, "number"),
        ("1", "string"),
        ([], "array"),
        ({}, "object"),
    ],
)
def test_json_type(value: Any, name: str) -> None:
    assert json_type(value) == name


json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)


@given(
    left=json_scalars,
    right=json_scalars,
    extra=st.dictionaries(st.sampled_from(["total", "seed", "board"]), json_scalars, max_size=3),
)
def test_property_value_never_matters_type_always_does(left: Any, right: Any,
                                                       extra: dict[str, Any]) -> None:
    comparison = compare_states(state(left, **extra), state(right, **extra), reset_payload={})
    assert comparison.equal is (json_type(left) == json_type(right))
    pinned = compare_states(
        state(left, **extra), state(right, **extra), reset_payload={"episode_id": "p"}
    )
    same = json_type(left) == json_type(right) and left == right
    assert pinned.equal is same
