"""Compile the environment's action schema once and validate actions without leaking them.

The schema is environment-authored and the action is model-authored: both are untrusted.
Compilation refuses any reference that would need a network or filesystem fetch (a
hostile schema must not make us open connections), and a failed validation reports only
*where* it failed (keyword, instance pointer, schema pointer), never the offending value
or schema text, so a secret in an action cannot end up in a log (contract §8.6).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn, cast

import jsonschema
import referencing
import referencing.exceptions
from jsonschema.protocols import Validator
from referencing.jsonschema import DRAFT202012, specification_with

from kiln_verify.core.jsonenc import dumps_canonical
from kiln_verify.errors import ActionInvalid, ActionSchemaInvalid, KilnError
from kiln_verify.limits import (
    MAX_ACTION_ISSUES,
    MAX_COMPILED_ACTION_SCHEMAS,
    MAX_POINTER_BYTES,
    MAX_SCHEMA_REFS,
)


def _refuse(uri: str) -> NoReturn:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


def _escape(part: object) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


def render_pointer(parts: Any) -> str:
    """``$`` for the root, else ``$/a/0/b`` (RFC 6901 escaping), cut to MAX_POINTER_BYTES."""
    text = "$" + "".join("/" + _escape(part) for part in parts)
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_POINTER_BYTES:
        return text
    return data[: MAX_POINTER_BYTES - 3].decode("utf-8", "ignore") + "..."


@dataclass(frozen=True, slots=True)
class ActionIssue:
    keyword: str
    instance_pointer: str
    schema_pointer: str

    def describe(self) -> str:
        return f"{self.keyword} at {self.instance_pointer} (schema {self.schema_pointer})"


def _refs(schema: Any) -> Iterator[str]:
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                    yield value
                else:
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)


class ActionSchema:
    """A compiled ``schema.action``; :meth:`validate` raises :class:`ActionInvalid`."""

    def __init__(self, schema: Any) -> None:
        if not isinstance(schema, dict | bool):
            raise ActionSchemaInvalid("the action schema must be a JSON object or boolean")
        cls: type[Validator] = jsonschema.validators.validator_for(
            schema, default=jsonschema.Draft202012Validator
        )
        try:
            cls.check_schema(cast(Any, schema))
        except jsonschema.SchemaError as exc:
            raise ActionSchemaInvalid(
                f"the action schema is not a valid JSON Schema: keyword "
                f"{exc.validator!s} at {render_pointer(exc.absolute_path)}"
            ) from None
        specification = (
            specification_with(schema.get("$schema", ""), default=DRAFT202012)
            if isinstance(schema, dict)
            else DRAFT202012
        )
        resource = specification.create_resource(schema)
        registry: referencing.Registry[Any] = referencing.Registry(
            retrieve=_refuse  # type: ignore[call-arg]
        )
        registry = registry.with_resource("", resource).crawl()
        resolver = registry.resolver()
        for count, ref in enumerate(_refs(schema)):
            if count >= MAX_SCHEMA_REFS:
                raise ActionSchemaInvalid(f"the action schema has over {MAX_SCHEMA_REFS} $refs")
            if ref.startswith("#"):
                continue
            try:
                resolver.lookup(ref)
            except referencing.exceptions.Unresolvable:
                raise ActionSchemaInvalid(
                    "the action schema references an external document; remote and file "
                    "references are never fetched"
                ) from None
        self.schema = schema
        self._validator = cls(schema, registry=registry)

    def issues(self, action: Any) -> list[ActionIssue]:
        """Up to MAX_ACTION_ISSUES issues, in a deterministic (pointer) order."""
        try:
            errors = list(self._validator.iter_errors(action))
        except referencing.exceptions.Unresolvable:
            raise ActionSchemaInvalid(
                "the action schema has a reference that cannot be resolved locally"
            ) from None
        found = sorted(
            {
                ActionIssue(
                    str(error.validator),
                    render_pointer(error.absolute_path),
                    render_pointer(error.absolute_schema_path),
                )
                for error in errors
            },
            key=lambda issue: (issue.instance_pointer, issue.schema_pointer, issue.keyword),
        )
        return found

    def violation(self, action: Any) -> str:
        """Why ``action`` fails the schema, as the collector writes it in an
        ``ACTION_SCHEMA_VALIDATION_FAILED`` harness error, or "" when it passes.

        The one spelling of that message: the offline verifier re-derives it from the
        recorded action text and requires these exact bytes (kiln-openenv-contract §6.9).
        """
        issues = self.issues(action)
        if not issues:
            return ""
        shown = "; ".join(issue.describe() for issue in issues[:MAX_ACTION_ISSUES])
        return "the action violates the action schema: " + shown

    def validate(self, action: Any) -> None:
        found = self.issues(action)
        if not found:
            return
        shown = found[:MAX_ACTION_ISSUES]
        more = f" (+{len(found) - len(shown)} more)" if len(found) > len(shown) else ""
        error = ActionInvalid(
            "action violates the action schema: " + "; ".join(i.describe() for i in shown) + more
        )
        error.issues = tuple(shown)
        raise error


_COMPILED: OrderedDict[bytes, ActionSchema] = OrderedDict()
_COMPILED_LOCK = threading.Lock()


def compile_action_schema(schema: Any) -> ActionSchema:
    """:class:`ActionSchema` of ``schema``, shared by equal schemas (canonical JSON).

    Every inspection compiles the advertised schema, and a client re-inspects an unchanged
    environment after each collection or recorded TRL step; compiling runs jsonschema's
    metaschema check and the reference crawl, about 5 ms of a 7 ms inspection
    (docs/performance.md, "TRL recording overhead"). A compiled schema is immutable, so
    equal schemas share one; a schema that fails to compile is never remembered and fails
    again each time. The most recently used MAX_COMPILED_ACTION_SCHEMAS are kept.
    """
    try:
        key = dumps_canonical(schema)
    except (KilnError, TypeError, ValueError):
        return ActionSchema(schema)
    with _COMPILED_LOCK:
        found = _COMPILED.get(key)
        if found is not None:
            _COMPILED.move_to_end(key)
            return found
    compiled = ActionSchema(schema)
    with _COMPILED_LOCK:
        _COMPILED[key] = compiled
        while len(_COMPILED) > MAX_COMPILED_ACTION_SCHEMAS:
            _COMPILED.popitem(last=False)
    return compiled
