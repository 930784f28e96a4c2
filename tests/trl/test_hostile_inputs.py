"""Hostile input to the TRL factory's pure rules, generated: every action schema is either
turned into a tool whose signature says exactly what the schema says, or refused with
``trl_action_schema_unsupported`` (never another exception, never a tool that drops part of
the action space); every dataset row's ``reset`` object is either the seed-free template
or refused with ``trl_reset_field_reserved`` / ``trl_batch_ambiguous``."""

from __future__ import annotations

import keyword
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln_verify.errors import TrlActionSchemaUnsupported, TrlBatchAmbiguous, TrlResetFieldReserved
from kiln_verify.limits import MAX_TRL_TOOL_PARAMETERS
from kiln_verify.trl.run import RESERVED_RESET_FIELDS, reset_template
from kiln_verify.trl.signature import build_tool, docstring_line, tool_parameters

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCALARS = ("string", "integer", "number", "boolean")
JSON_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}

names = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n) and n != "self"
)


descriptions = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        ["Args:\n  x: y", "Returns:\n  nothing", "a: b", "  ", "\n\n", "Raises: E", ":", "(int)"]
    ),
)


@st.composite
def expressible_property(draw: st.DrawFn) -> tuple[dict[str, Any], str, bool]:
    """A property schema a signature can hold, its JSON type and whether it is nullable."""
    shape = draw(st.sampled_from(["scalar", "array", "object"]))
    if shape == "scalar":
        kind = draw(st.sampled_from(SCALARS))
        schema: dict[str, Any] = {"type": kind}
        json_type = JSON_TYPES[kind]
    elif shape == "array":
        schema = {"type": "array", "items": {"type": draw(st.sampled_from(SCALARS))}}
        json_type = "array"
    else:
        schema = {"type": "object"}
        json_type = "object"
    nullable = draw(st.booleans())
    if nullable:
        if draw(st.booleans()):
            schema = {"anyOf": [schema, {"type": "null"}]}
        else:
            schema = {**schema, "type": [schema["type"], "null"]}
    if draw(st.booleans()):
        schema["description"] = draw(descriptions)
    return schema, json_type, nullable


@st.composite
def expressible_schema(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, tuple[str, bool]]]:
    keys = draw(st.lists(names, min_size=1, max_size=8, unique=True))
    properties, facts = {}, {}
    for key in keys:
        schema, json_type, nullable = draw(expressible_property())
        properties[key] = schema
        facts[key] = (json_type, nullable)
    required = draw(st.lists(st.sampled_from(keys), unique=True))
    return {"type": "object", "properties": properties, "required": required}, facts


@SETTINGS
@given(expressible_schema(), descriptions)
def test_an_expressible_schema_becomes_exactly_that_signature(
    case: tuple[dict[str, Any], dict[str, tuple[str, bool]]], description: str
) -> None:
    pytest.importorskip("transformers")
    from transformers.utils.chat_template_utils import get_json_schema

    schema, facts = case
    parameters = tool_parameters(schema)
    tool = build_tool("step", description, parameters, lambda _self, args: repr(args))
    function = get_json_schema(tool.__get__(object()))["function"]
    assert function["description"] == (docstring_line(description) or "Act in the environment.")
    described = function["parameters"]
    assert set(described["properties"]) == set(facts)
    assert sorted(described.get("required", [])) == sorted(schema["required"])
    for key, (json_type, _nullable) in facts.items():
        assert described["properties"][key]["type"] == json_type
        assert described["properties"][key]["description"]
    # the tool hands on exactly the keywords the model gave: a null optional property is
    # dropped, a null required one kept for the schema to judge, and keywords the schema does
    # not know reach the episode, whose action schema records them as an invalid action
    given_args = {key: 1 for key in schema["required"]}
    assert tool(object(), **given_args) == repr(given_args)
    nulls = {key: None for key in facts if key not in given_args}
    assert tool(object(), **given_args, **nulls) == repr(given_args)
    required_nulls = {key: None for key in schema["required"]}
    assert tool(object(), **required_nulls) == repr(required_nulls)
    assert tool(object(), **given_args, not_a_property=2) == repr(
        {**given_args, "not_a_property": 2}
    )


REFUSED_PROPERTIES = [
    {"$ref": "#/$defs/A"},
    {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    {"allOf": [{"type": "string"}]},
    {"not": {"type": "string"}},
    {"type": "object", "properties": {"a": {"type": "string"}}},
    {"type": "object", "patternProperties": {"^a": {"type": "string"}}},
    {"type": "array", "items": {"type": "object"}},
    {"type": "array", "items": [{"type": "string"}]},
    {"type": "array", "items": {"type": ["string", "null"]}},
    {"type": "array"},
    {"type": ["string", "integer"]},
    {"type": ["null"]},
    {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
    {"anyOf": [{"type": "null"}]},
    {"anyOf": "string"},
    {"type": "null"},
    {"description": "untyped"},
    {"type": 7},
    "string",
    None,
]


@SETTINGS
@given(
    expressible_schema(),
    st.sampled_from(REFUSED_PROPERTIES),
    names,
    st.booleans(),
)
def test_one_inexpressible_property_anywhere_refuses_the_whole_tool(
    case: tuple[dict[str, Any], dict[str, tuple[str, bool]]],
    bad: Any,
    name: str,
    required: bool,
) -> None:
    schema, _ = case
    schema["properties"][name] = bad
    if required and name not in schema["required"]:
        schema["required"].append(name)
    with pytest.raises(TrlActionSchemaUnsupported) as raised:
        tool_parameters(schema)
    assert raised.value.code == "trl_action_schema_unsupported"


bad_names = st.one_of(
    st.sampled_from([*sorted(keyword.kwlist), "self", "_x", "__init__", "1a", "a-b", "a b", ""]),
    st.text(min_size=1, max_size=10).filter(lambda n: not n.isidentifier()),
)


@SETTINGS
@given(expressible_schema(), bad_names)
def test_a_property_no_parameter_can_be_named_after_is_refused(
    case: tuple[dict[str, Any], dict[str, tuple[str, bool]]], bad: str
) -> None:
    schema, _ = case
    schema["properties"][bad] = {"type": "string"}
    with pytest.raises(TrlActionSchemaUnsupported):
        tool_parameters(schema)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@SETTINGS
@given(json_values)
def test_arbitrary_json_as_a_schema_is_a_tool_or_a_typed_refusal(schema: Any) -> None:
    try:
        parameters = tool_parameters(schema)
    except TrlActionSchemaUnsupported:
        return
    assert 0 < len(parameters) <= MAX_TRL_TOOL_PARAMETERS


def test_more_parameters_than_the_limit_are_refused() -> None:
    properties = {f"p{i}": {"type": "string"} for i in range(MAX_TRL_TOOL_PARAMETERS + 1)}
    with pytest.raises(TrlActionSchemaUnsupported, match="more than"):
        tool_parameters({"type": "object", "properties": properties})


@SETTINGS
@given(
    st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    st.sampled_from(sorted(RESERVED_RESET_FIELDS)),
    json_values,
)
def test_a_row_reset_with_a_reserved_field_is_always_refused(
    template: dict[str, Any], field: str, value: Any
) -> None:
    with pytest.raises(TrlResetFieldReserved) as raised:
        reset_template({"prompt": [], "reset": {**template, field: value}})
    assert raised.value.code == "trl_reset_field_reserved"
    assert field in raised.value.rule


@SETTINGS
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_a_row_reset_is_the_template_or_refused_as_not_json(template: dict[str, Any]) -> None:
    template = {k: v for k, v in template.items() if k not in RESERVED_RESET_FIELDS}

    def finite(value: Any) -> bool:
        if isinstance(value, float):
            return math.isfinite(value)
        if isinstance(value, list):
            return all(finite(v) for v in value)
        if isinstance(value, dict):
            return all(finite(v) for v in value.values())
        return True

    if finite(template):
        assert reset_template({"reset": template}) == template
    else:
        with pytest.raises(TrlBatchAmbiguous, match="not JSON"):
            reset_template({"reset": template})


@pytest.mark.parametrize("reset", [[], "seed=1", 3, [("seed", 1)]])
def test_a_row_reset_that_is_not_an_object_is_refused(reset: Any) -> None:
    with pytest.raises(TrlBatchAmbiguous, match="JSON object"):
        reset_template({"reset": reset})
