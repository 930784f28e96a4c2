"""The environment's action as a TRL tool: a Python signature derived from the action schema.

TRL turns every public method of an environment instance into a tool and describes it to
the model with ``transformers.utils.get_json_schema`` (type hints plus a Google-style
docstring). So the one action of an OpenEnv environment becomes one method whose keyword
parameters are the action schema's properties, typed from the schema, and whose docstring
carries the environment's description and each property's description: what the model
reads is derived from what the server advertises, never written by hand.

A schema that no signature can express is refused here, at construction, with
``trl_action_schema_unsupported`` naming the property and the rule, rather than exposing a
tool that silently drops part of the action space. Expressible: a root ``object`` with
``properties`` (names that are Python identifiers, not keywords, not ``self`` and not
private); each property a scalar (``string``, ``integer``, ``number``, ``boolean``), an
array of one scalar type, or a free-form object (no ``properties``: OpenEnv's ``metadata``),
optionally nullable (``{"type": [T, "null"]}`` or pydantic's ``anyOf`` with ``null``).
Refused: references, ``oneOf``/``allOf``, nested objects with properties, arrays of
objects or of mixed types, a property without a type, ``patternProperties`` at the root.

The schema itself still validates every action the tool receives (the episode machine
judges each call with the compiled
:class:`~kiln_verify.openenv.protocol.action_schema.ActionSchema`);
the signature only decides what the model is told and which keywords Python accepts.
"""

from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kiln_verify.errors import TrlActionSchemaUnsupported
from kiln_verify.limits import MAX_TRL_TOOL_PARAMETERS

__all__ = ["ToolParameter", "build_tool", "docstring_line", "tool_parameters"]

_SCALARS: Mapping[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}
_REFUSED_KEYS = ("$ref", "$dynamicRef", "oneOf", "allOf", "not", "if")


@dataclass(frozen=True, slots=True)
class ToolParameter:
    """One keyword parameter of the action tool."""

    name: str
    annotation: Any
    required: bool
    description: str


def _refuse(rule: str) -> TrlActionSchemaUnsupported:
    return TrlActionSchemaUnsupported(f"the action schema cannot be a tool signature: {rule}")


def _non_null(name: str, prop: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """The property's schema without its ``null`` alternative, and whether it had one."""
    for key in _REFUSED_KEYS:
        if key in prop:
            raise _refuse(f"property {name!r} uses {key!r}")
    alternatives = prop.get("anyOf")
    if alternatives is not None:
        if not isinstance(alternatives, list):
            raise _refuse(f"property {name!r} has a malformed 'anyOf'")
        kept = [a for a in alternatives if not (isinstance(a, dict) and a.get("type") == "null")]
        if len(kept) != 1 or len(kept) == len(alternatives) or not isinstance(kept[0], dict):
            raise _refuse(f"property {name!r}: 'anyOf' other than one type or null")
        inner, _ = _non_null(name, kept[0])
        return inner, True
    kind = prop.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        if len(types) != 1 or len(types) == len(kind):
            raise _refuse(f"property {name!r}: a type list other than one type or null")
        return {**prop, "type": types[0]}, True
    return prop, False


def _annotation(name: str, prop: Mapping[str, Any]) -> Any:
    kind = prop.get("type")
    if isinstance(kind, str) and kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        items = prop.get("items")
        if not isinstance(items, dict):
            raise _refuse(f"property {name!r}: an array needs one 'items' schema")
        inner, nullable = _non_null(f"{name}[]", items)
        item_kind = inner.get("type")
        if nullable or not isinstance(item_kind, str) or item_kind not in _SCALARS:
            raise _refuse(f"property {name!r}: only arrays of one scalar type are expressible")
        element: Any = _SCALARS[item_kind]
        return list[element]
    if kind == "object":
        if prop.get("properties") or prop.get("patternProperties"):
            raise _refuse(f"property {name!r}: nested objects with properties")
        return dict
    raise _refuse(f"property {name!r} has no expressible type ({str(kind)[:40]})")


_SECTION = re.compile(r"(Args|Returns|Raises):")


def docstring_line(text: str) -> str:
    """``text`` as one docstring line ``get_json_schema`` reads back unchanged in meaning:
    whitespace collapsed, and a section heading (``Args:``, ``Returns:``, ``Raises:``, which
    its parser finds anywhere in the text) defused to ``Args -``. A server's description
    otherwise cuts the docstring apart and TRL fails at trainer construction."""
    return _SECTION.sub(r"\1 -", " ".join(text.split()))


def _describe(name: str, prop: Mapping[str, Any], inner: Mapping[str, Any]) -> str:
    """The parameter's description: the first non-blank of the schema's texts, else its
    name (a blank ``Args:`` entry is refused by ``get_json_schema``)."""
    for text in (prop.get("description"), inner.get("description"), prop.get("title")):
        line = docstring_line(text) if isinstance(text, str) else ""
        if line:
            return line
    return name


def tool_parameters(schema: Any) -> list[ToolParameter]:
    """The tool's parameters, required ones first (schema order within each); refused as
    :class:`TrlActionSchemaUnsupported` when no signature can express the schema."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise _refuse("the root is not an object schema")
    for key in (*_REFUSED_KEYS, "anyOf", "patternProperties"):
        if key in schema:
            raise _refuse(f"the root uses {key!r}")
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        raise _refuse("the root declares no properties")
    if len(properties) > MAX_TRL_TOOL_PARAMETERS:
        raise _refuse(f"{len(properties)} properties, more than {MAX_TRL_TOOL_PARAMETERS}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise _refuse("'required' is not a list of names")
    missing = sorted(set(required) - properties.keys())
    if missing:
        raise _refuse(f"required property {missing[0][:40]!r} is not declared")
    found = []
    for name, prop in properties.items():
        if not name.isidentifier() or keyword.iskeyword(name) or name == "self":
            raise _refuse(f"property {name[:40]!r} is not a Python parameter name")
        if name.startswith("_"):
            raise _refuse(f"property {name[:40]!r} would be a private parameter")
        if not isinstance(prop, dict):
            raise _refuse(f"property {name!r} is not a schema object")
        inner, nullable = _non_null(name, prop)
        annotation = _annotation(name, inner)
        is_required = name in required
        if nullable or not is_required:
            annotation = annotation | None
        found.append(ToolParameter(name, annotation, is_required, _describe(name, prop, inner)))
    return sorted(found, key=lambda p: not p.required)


def _docstring(description: str, parameters: Sequence[ToolParameter]) -> str:
    lines = [docstring_line(description) or "Act in the environment.", "", "Args:"]
    lines += [f"    {p.name}: {p.description}" for p in parameters]
    lines += ["", "Returns:", "    The environment's answer to the action."]
    return "\n".join(lines)


def build_tool(
    name: str,
    description: str,
    parameters: Sequence[ToolParameter],
    call: Callable[[Any, dict[str, Any]], str],
) -> Callable[..., str]:
    """A method ``name(self, *, <parameters>) -> str`` that calls ``call(self, arguments)``
    with the keywords the model gave. A null for an optional parameter is left out (the
    Python default and an absent property mean the same); a null for a required one is kept,
    since only the schema can say whether that property admits null."""
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        raise _refuse(f"tool name {name[:40]!r} is not a public Python name")
    if name in ("reset", "get_reward"):
        raise _refuse(f"tool name {name!r} is reserved by TRL")

    required = frozenset(p.name for p in parameters if p.required)

    def tool(self: Any, **arguments: Any) -> str:
        return call(self, {k: v for k, v in arguments.items() if v is not None or k in required})

    signature = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for parameter in parameters:
        default = inspect.Parameter.empty if parameter.required else None
        signature.append(
            inspect.Parameter(
                parameter.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=parameter.annotation,
                default=default,
            )
        )
        annotations[parameter.name] = parameter.annotation
    annotations["return"] = str
    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = inspect.Signature(signature)  # type: ignore[attr-defined]
    tool.__annotations__ = annotations
    tool.__doc__ = _docstring(description, parameters)
    return tool
