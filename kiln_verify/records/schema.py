"""JSON Schema ``$defs`` generated from record models, as the records read documents.

Each contract's ``contracts/*.schema.json`` (OpenEnv bundle, HF/TRL hand-off, control
plane) is built from its root models by :func:`record_definitions`: pydantic's validation
schemas, then closed objects and, for fields Kiln omits when absent, no ``null`` branch, so
the checked-in schema says what :func:`~kiln_verify.records.validate_record` accepts.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from kiln_verify.records.base import Record

__all__ = ["export_main", "record_definitions"]


def _all_models(roots: Sequence[type[BaseModel]]) -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    stack: list[type[BaseModel]] = list(roots)
    while stack:
        model = stack.pop()
        if model.__name__ in found:
            continue
        found[model.__name__] = model
        for field in model.model_fields.values():
            stack.extend(_models_in(field.annotation))
    return found


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    result: list[type[BaseModel]] = []
    for arg in getattr(annotation, "__args__", ()) or ():
        result.extend(_models_in(arg))
    for meta in getattr(annotation, "__metadata__", ()) or ():
        result.extend(_models_in(meta))
    return result


def _drop_null(prop: dict[str, Any]) -> dict[str, Any]:
    """``anyOf [X, null]`` with default null -> ``X`` (the key is optional, never null)."""
    prop = dict(prop)
    prop.pop("default", None)
    branches = prop.get("anyOf")
    if isinstance(branches, list):
        kept = [branch for branch in branches if branch != {"type": "null"}]
        del prop["anyOf"]
        if len(kept) == 1:
            prop.update(kept[0])
        else:
            prop["anyOf"] = kept
    return prop


def record_definitions(roots: Sequence[type[BaseModel]]) -> dict[str, Any]:
    """`$defs` for the records reachable from ``roots``, sorted by name, as we read them:
    closed objects, and optional fields that are omitted (never null) without a null branch."""
    _, generated = models_json_schema(
        [(model, "validation") for model in roots],
        ref_template="#/$defs/{model}",
    )
    defs: dict[str, Any] = generated["$defs"]
    for name, model in _all_models(roots).items():
        definition = defs.get(name)
        if definition is None or not issubclass(model, Record):
            continue
        definition["additionalProperties"] = False
        props: dict[str, Any] = definition.get("properties", {})
        for key in model._omit_when_none:
            if key in props:
                props[key] = _drop_null(props[key])
    return {name: defs[name] for name in sorted(defs)}


def export_main(argv: Sequence[str] | None, *, path: Path, data: bytes, module: str) -> int:
    """The command line of a contract's ``schema_export`` module: write ``data`` to
    ``path``, or with ``--check`` exit 1 when the checked-in file differs (the test suite
    and ``python -m MODULE --check`` use the same rule); 2 on other arguments."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--check"]:
        current = path.read_bytes() if path.exists() else b""
        if current != data:
            print(f"{path} is stale; run python -m {module}", file=sys.stderr)
            return 1
        return 0
    if args:
        print(f"usage: python -m {module} [--check]", file=sys.stderr)
        return 2
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return 0
