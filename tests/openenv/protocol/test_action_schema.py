"""Action-schema compilation (no remote references) and bounded, value-free diagnostics."""

from __future__ import annotations

from typing import Any

import pytest

from kiln_verify.errors import ActionInvalid, ActionSchemaInvalid
from kiln_verify.limits import MAX_ACTION_ISSUES, MAX_COMPILED_ACTION_SCHEMAS, MAX_POINTER_BYTES
from kiln_verify.openenv.protocol.action_schema import (
    ActionSchema,
    compile_action_schema,
    render_pointer,
)

SECRET = "hunter2-do-not-print"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["amount"],
    "properties": {
        "amount": {"$ref": "#/$defs/Amount"},
        "note": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "null"}]},
        "metadata": {"type": "object"},
    },
    "$defs": {"Amount": {"type": "integer", "minimum": 0}},
}


def test_valid_action_passes() -> None:
    ActionSchema(SCHEMA).validate({"amount": 3, "note": None})


def test_issues_name_keyword_and_pointers_never_values() -> None:
    schema = ActionSchema(SCHEMA)
    with pytest.raises(ActionInvalid) as caught:
        schema.validate({"amount": SECRET, "note": SECRET})
    text = str(caught.value)
    assert SECRET not in text
    assert "hunter" not in repr(caught.value.issues)
    keywords = {issue.keyword for issue in caught.value.issues}
    assert "type" in keywords or "anyOf" in keywords
    assert all(issue.instance_pointer.startswith("$") for issue in caught.value.issues)


def test_root_is_rendered_dollar() -> None:
    with pytest.raises(ActionInvalid) as caught:
        ActionSchema(SCHEMA).validate([])
    assert caught.value.issues[0].instance_pointer == "$"
    assert caught.value.issues[0].schema_pointer == "$/type"


def test_at_most_four_issues() -> None:
    schema = ActionSchema(
        {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(10)}}
    )
    with pytest.raises(ActionInvalid) as caught:
        schema.validate({f"k{i}": "x" for i in range(10)})
    assert len(caught.value.issues) == MAX_ACTION_ISSUES
    assert "(+6 more)" in str(caught.value)


def test_pointer_bound_and_escaping() -> None:
    assert render_pointer([]) == "$"
    assert render_pointer(["a/b", "c~d", 0]) == "$/a~1b/c~0d/0"
    long = render_pointer(["é" * 300])
    assert len(long.encode("utf-8")) <= MAX_POINTER_BYTES
    assert long.endswith("...")


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "https://example.com/schema.json"},
        {"properties": {"a": {"$ref": "file:///etc/passwd"}}},
        {"$ref": "other.json#/x"},
        {"type": 12},
        [],
    ],
)
def test_bad_or_remote_schemas_refused(schema: Any) -> None:
    with pytest.raises(ActionSchemaInvalid):
        ActionSchema(schema)


def test_embedded_id_reference_is_local() -> None:
    schema = {
        "$defs": {"x": {"$id": "urn:kiln:x", "type": "integer"}},
        "properties": {"a": {"$ref": "urn:kiln:x"}},
    }
    compiled = ActionSchema(schema)
    compiled.validate({"a": 1})
    with pytest.raises(ActionInvalid):
        compiled.validate({"a": "no"})


def test_equal_schemas_share_one_compiled_validator() -> None:
    """Re-inspecting an unchanged environment must not compile its schema again; key order
    does not make a schema different (canonical JSON), a changed keyword does."""
    first = compile_action_schema(SCHEMA)
    reordered = dict(reversed(list(SCHEMA.items())))
    assert compile_action_schema(reordered) is first
    changed = {**SCHEMA, "required": ["amount", "note"]}
    assert compile_action_schema(changed) is not first
    with pytest.raises(ActionInvalid):
        compile_action_schema(changed).validate({"amount": 1})


def test_a_schema_that_fails_to_compile_fails_every_time() -> None:
    broken = {"type": "object", "properties": {"amount": {"type": 7}}}
    for _ in range(2):
        with pytest.raises(ActionSchemaInvalid):
            compile_action_schema(broken)


def test_the_compiled_schemas_kept_are_bounded() -> None:
    schemas = [
        {"type": "object", "properties": {f"p{i}": {"type": "integer"}}}
        for i in range(MAX_COMPILED_ACTION_SCHEMAS + 1)
    ]
    first = compile_action_schema(schemas[0])
    for schema in schemas[1:]:
        compile_action_schema(schema)
    assert compile_action_schema(schemas[0]) is not first  # the oldest was dropped
    assert compile_action_schema(schemas[-1]) is compile_action_schema(schemas[-1])
