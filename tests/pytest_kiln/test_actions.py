"""The suite's action builder: schema keywords it honours and the ones that stop it."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.openenv.protocol.wire import Observation, Reward
from pytest_kiln.cases import ActionBuilder, CaseContext, NotApplicable, candidate_actions
from pytest_kiln.cases.context import compile_action_schema
from pytest_kiln.cases.patterns import MAX_PATTERN_TEXT, string_for_pattern


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else required,
            "additionalProperties": False}


def valid(schema: dict[str, Any], observation: Observation | None = None) -> list[Any]:
    validator = jsonschema.Draft202012Validator(schema)
    return [a for a in candidate_actions(schema, observation) if validator.is_valid(a)]


def test_bounded_arrays_enum_const_pattern_and_bounds() -> None:
    schema = obj({
        "moves": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3},
        "mode": {"enum": ["fast", "slow"], "type": "string"},
        "kind": {"const": "plan", "type": "string"},
        "code": {"type": "string", "pattern": r"^[A-Z]{2}[0-9]$"},
        "weight": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "step": {"type": "integer", "minimum": 3, "multipleOf": 5},
    })
    assert valid(schema)[0] == {"moves": [0, 0], "mode": "fast", "kind": "plan", "code": "AA0",
                                "weight": 0.5, "step": 5}


def test_every_enum_value_is_a_candidate() -> None:
    schema = obj({"mode": {"enum": ["a", "b", "c"]}})
    assert valid(schema) == [{"mode": "a"}, {"mode": "b"}, {"mode": "c"}]


def test_unique_items_get_distinct_values() -> None:
    schema = obj({"picks": {"type": "array", "minItems": 3, "uniqueItems": True,
                            "items": {"enum": [4, 5, 6, 7]}}})
    assert valid(schema)[0] == {"picks": [4, 5, 6]}


def test_prefix_items_and_nested_objects() -> None:
    schema = obj({"pair": {"type": "array", "prefixItems": [{"type": "string"},
                                                            {"type": "integer", "minimum": 9}],
                           "minItems": 2},
                  "where": obj({"x": {"type": "integer"}, "y": {"type": "boolean"}}),
                  "extra": {"type": "object", "minProperties": 1,
                            "properties": {"tag": {"type": "string", "minLength": 3}}}})
    assert valid(schema)[0] == {"pair": ["a", 9], "where": {"x": 0, "y": False},
                                "extra": {"tag": "aaa"}}


def test_anyof_branches_are_tried_until_one_validates() -> None:
    schema = obj({"target": {"anyOf": [{"type": "integer", "minimum": 10, "maximum": 5},
                                       {"type": "string", "pattern": "^sq-[0-9]$"}]}})
    assert valid(schema)[0] == {"target": "sq-0"}


def test_oneof_action_shapes_each_yield_a_candidate() -> None:
    schema = {"oneOf": [
        obj({"type": {"const": "move"}, "to": {"type": "integer", "minimum": 1}}),
        obj({"type": {"const": "say"}, "text": {"type": "string", "minLength": 2}}),
    ]}
    assert valid(schema) == [{"type": "move", "to": 1}, {"type": "say", "text": "aa"}]


def test_local_refs_and_allof_are_followed() -> None:
    schema = {"$defs": {"Dir": {"enum": ["n", "s"]}},
              "allOf": [obj({"dir": {"$ref": "#/$defs/Dir"}}), {"required": ["dir"]}]}
    assert valid(schema)[0] == {"dir": "n"}


def test_optional_fields_send_a_value_before_null() -> None:
    schema = obj({"note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}})
    values = ActionBuilder(schema).values(schema["properties"]["note"])
    assert values[0] == "a"
    assert values[-1] is None


@pytest.mark.parametrize("key", ["legal_actions", "legal_moves", "valid_actions"])
def test_legal_moves_come_first(key: str) -> None:
    schema = obj({"col": {"type": "integer", "minimum": 0, "maximum": 6}})
    observation = Observation({key: [4, 5]}, Reward.from_json(None), False)
    assert valid(schema, observation)[0] == {"col": 4}


@pytest.mark.parametrize(
    ("schema", "note"),
    [
        (obj({"code": {"type": "string", "pattern": "^(?=a)b$"}}), "'pattern' at $/code"),
        (obj({"code": {"type": "string", "pattern": r"(a)\1"}}), "'pattern' at $/code"),
        (obj({"xs": {"type": "array", "minItems": 3, "maxItems": 2}}), "'minItems' at $/xs"),
        (obj({"xs": {"type": "array", "minItems": 100}}), "'minItems' at $/xs"),
        (obj({"xs": {"type": "array", "minItems": 3, "uniqueItems": True,
                     "items": {"enum": [1, 2]}}}), "'uniqueItems' at $/xs"),
        (obj({"s": {"type": "string", "minLength": 5, "maxLength": 2}}),
         "'minLength/maxLength' at $/s"),
        (obj({"n": {"type": "integer", "minimum": 5, "maximum": 2}}),
         "'minimum/maximum' at $/n"),
        (obj({"n": {"type": "integer", "not": {"const": 0}}}), "'not' at $/n"),
        (obj({"r": {"$ref": "https://example.com/s.json"}}), "'$ref' at $/r"),
        (obj({"e": {"enum": []}}), "'enum' at $/e"),
    ],
)
def test_the_keyword_that_stops_the_builder_is_named(schema: dict[str, Any], note: str) -> None:
    builder = ActionBuilder(schema)
    list(builder.candidates())
    assert note in builder.notes
    assert builder.stopped_by().startswith("; the action builder cannot satisfy ")
    assert note in builder.stopped_by()


def test_a_case_without_a_valid_action_says_what_stopped_it() -> None:
    schema = obj({"code": {"type": "string", "pattern": "^(?!x)y$"}})
    ctx = CaseContext("http://127.0.0.1:9")
    ctx._schema = compile_action_schema({"action": schema}, NotApplicable)
    with pytest.raises(NotApplicable) as caught:
        asyncio.run(ctx.valid_actions(None))
    assert str(caught.value) == (
        "no schema-valid action could be derived from the action schema; the action builder "
        "cannot satisfy 'pattern' at $/code"
    )


def test_without_a_note_the_violated_keyword_is_named() -> None:
    schema = {**obj({"a": {"type": "integer"}, "b": {"type": "integer"}}), "maxProperties": 1}
    ctx = CaseContext("http://127.0.0.1:9")
    ctx._schema = compile_action_schema({"action": schema}, NotApplicable)
    with pytest.raises(NotApplicable) as caught:
        asyncio.run(ctx.valid_actions(None))
    assert str(caught.value) == (
        "no schema-valid action could be derived from the action schema; candidates violate "
        "maxProperties at $ (schema $/maxProperties)"
    )


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (r"^[A-Z]{3}-\d+$", "AAA-0"),
        (r"^(up|down)$", "up"),
        (r"[^abc]x", "Ax"),
        (r"^\w+@\w+\.com$", "a@a.com"),
        (r"^[0-9a-f]{8}$", "00000000"),
        (r"^\S{2,4}$", "aa"),
        ("^$", ""),
        ("(", None),
        ("^a{1000}$", None),
    ],
)
def test_strings_for_patterns(pattern: str, text: str | None) -> None:
    assert string_for_pattern(pattern) == text
    if text is not None:
        assert re.search(pattern, text)
    assert MAX_PATTERN_TEXT == 256


SIMPLE_PATTERNS = [r"^[a-z]+$", r"^\d{3}$", r"^(x|y)-[A-F]{2}$", r"^[^\s]{1,4}\.$", r"id_\w"]

leaf = st.one_of(
    st.builds(lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
              st.integers(-50, 50), st.integers(0, 5)),
    st.builds(lambda lo: {"type": "number", "exclusiveMinimum": lo, "maximum": lo + 1},
              st.integers(-5, 5)),
    st.builds(lambda lo, span: {"type": "string", "minLength": lo, "maxLength": lo + span},
              st.integers(0, 6), st.integers(0, 3)),
    st.sampled_from(SIMPLE_PATTERNS).map(lambda p: {"type": "string", "pattern": p}),
    st.lists(st.integers() | st.text(max_size=3), min_size=1, max_size=4, unique=True)
    .map(lambda values: {"enum": values}),
    st.just({"type": "boolean"}),
    st.just({"const": "fixed"}),
)
node = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.builds(lambda item, lo: {"type": "array", "items": item, "minItems": lo,
                                    "maxItems": lo + 2}, inner, st.integers(0, 4)),
        st.lists(inner, min_size=1, max_size=3).map(lambda branches: {"anyOf": branches}),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, min_size=1, max_size=3)
        .map(obj),
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["x", "y", "z", "w"]), node, min_size=1, max_size=4))
def test_property_supported_schemas_always_get_a_valid_action(
    properties: dict[str, Any],
) -> None:
    schema = obj(properties)
    found = valid(schema)
    assert found, schema
