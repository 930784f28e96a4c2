"""Deriving actions from an action schema: schema-valid candidates and a generic violation.

A valid candidate comes from the reset observation's ``legal_actions`` first, then from
values built for the required properties (``const``/``enum``/``default``, integer 0, number
0.0, string ``"a"``, boolean false, ...). A violation gives the first required property the
wrong JSON type. Callers check every candidate against the compiled schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kiln_verify.openenv.wire import Observation


def _resolve(root: dict[str, Any], node: Any, depth: int = 0) -> Any:
    """Follow local ``#/...`` references (a few levels); anything else is returned as is."""
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and depth < 8:
        ref: str = node["$ref"]
        if not ref.startswith("#/"):
            return node
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                return node
            target = target[part]
        node = target
        depth += 1
    return node


def _types(node: dict[str, Any]) -> list[str]:
    value = node.get("type")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def sample_value(root: dict[str, Any], node: Any, depth: int = 0) -> Iterator[Any]:
    """Plausible values for a property schema, most specific first."""
    node = _resolve(root, node)
    if not isinstance(node, dict) or depth > 6:
        yield "a"
        return
    if "const" in node:
        yield node["const"]
        return
    if isinstance(node.get("enum"), list) and node["enum"]:
        yield from node["enum"][:3]
        return
    if "default" in node and node["default"] is not None:
        yield node["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            for branch in branches:
                yield from sample_value(root, branch, depth + 1)
    for kind in _types(node):
        if kind == "integer":
            minimum = node.get("minimum", node.get("exclusiveMinimum"))
            yield (
                int(minimum) + (1 if "exclusiveMinimum" in node else 0)
                if isinstance(minimum, int | float)
                else 0
            )
            yield 1
        elif kind == "number":
            minimum = node.get("minimum")
            yield float(minimum) if isinstance(minimum, int | float) else 0.0
            yield 1.0
        elif kind == "string":
            length = node.get("minLength")
            if isinstance(length, int) and 1 < length <= 64:
                yield "a" * length
            else:
                yield from ("a", "0", "1")
        elif kind == "boolean":
            yield False
        elif kind == "array":
            yield []
        elif kind == "object":
            yield _build_object(root, node, depth + 1)
        elif kind == "null":
            yield None


def _properties(node: dict[str, Any]) -> dict[str, Any]:
    properties = node.get("properties")
    return properties if isinstance(properties, dict) else {}


def _required(node: dict[str, Any]) -> list[str]:
    required = node.get("required")
    if not isinstance(required, list):
        return []
    return [name for name in required if isinstance(name, str)]


def _build_object(root: dict[str, Any], node: dict[str, Any], depth: int) -> dict[str, Any]:
    props = _properties(node)
    return {
        name: next(iter(sample_value(root, props.get(name, {}), depth)), "a")
        for name in _required(node)
    }


def candidate_actions(
    schema: Any, observation: Observation | None = None
) -> Iterator[dict[str, Any]]:
    """Candidate valid actions: ``legal_actions`` first, then values built from the schema."""
    root: dict[str, Any] = schema if isinstance(schema, dict) else {}
    resolved = _resolve(root, root)
    node: dict[str, Any] = resolved if isinstance(resolved, dict) else {}
    base = _build_object(root, node, 0)
    names = _required(node)
    legal = observation.observation.get("legal_actions") if observation is not None else None
    if isinstance(legal, list) and legal:
        if len(names) == 1:
            yield {names[0]: legal[0]}
        if isinstance(legal[0], dict):
            yield dict(legal[0])
    yield base
    if isinstance(node.get("properties"), dict):
        props = _properties(node)
        for name in names:
            for value in list(sample_value(root, props.get(name, {})))[:4]:
                yield {**base, name: value}


def _wrong_type(root: dict[str, Any], node: Any) -> Any:
    resolved = _resolve(root, node)
    types = set(_types(resolved)) if isinstance(resolved, dict) else set()
    if types & {"string"}:
        return 12345
    if types & {"integer", "number", "boolean", "null"}:
        return "not-a-valid-value"
    if types & {"object", "array"}:
        return 0
    return {"kiln-conformance": ["unexpected"]}


def violating_action(schema: Any, valid: dict[str, Any]) -> dict[str, Any] | None:
    """A schema-violating action: a required property with the wrong JSON type."""
    root: dict[str, Any] = schema if isinstance(schema, dict) else {}
    node = _resolve(root, root)
    if not isinstance(node, dict):
        return None
    names = _required(node)
    if names:
        return {**valid, names[0]: _wrong_type(root, _properties(node).get(names[0], {}))}
    if node.get("additionalProperties") is False:
        return {**valid, "kiln_conformance_unknown_property": 1}
    return None
