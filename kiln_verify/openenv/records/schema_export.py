"""Generate ``contracts/kiln-openenv-v1.schema.json`` from the record models.

``python -m kiln_verify.openenv.records.schema_export`` rewrites the file;
``--check`` exits 1 when the checked-in bytes differ (a test does the same). The document
is draft 2020-12 with one ``$defs`` entry per record type, root ``$ref`` to the summary,
written by :func:`kiln_verify.core.jsonio.dumps_pretty` so the bytes are deterministic.
Fields Kiln omits when absent appear as optional and non-nullable.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.openenv.records.common import Record
from kiln_verify.openenv.records.evaluation import EnvironmentEvaluationReceipt
from kiln_verify.openenv.records.replay import ReplayManifest
from kiln_verify.openenv.records.reports import (
    ArtifactDownloadReceipt,
    ReplayRunReport,
    VerificationReport,
)
from kiln_verify.openenv.records.rollout import AgenticGroup
from kiln_verify.openenv.records.summary import RolloutSummary

__all__ = ["ROOT_MODELS", "SCHEMA_ID", "SCHEMA_PATH", "build_schema", "schema_bytes"]

SCHEMA_ID: Final = "https://kiln-verify.invalid/contracts/kiln-openenv-v1.schema.json"
SCHEMA_PATH: Final = (
    Path(__file__).resolve().parents[3] / "contracts" / "kiln-openenv-v1.schema.json"
)
ROOT_MODELS: Final[tuple[type[Record], ...]] = (
    RolloutSummary,
    ReplayManifest,
    AgenticGroup,
    VerificationReport,
    ReplayRunReport,
    EnvironmentEvaluationReceipt,
    ArtifactDownloadReceipt,
)


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


def build_schema() -> dict[str, Any]:
    """The schema document as Python values."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "kiln-verify OpenEnv bundle records",
        "$ref": "#/$defs/RolloutSummary",
        "$defs": record_definitions(ROOT_MODELS),
    }


def schema_bytes() -> bytes:
    """The exact bytes of the checked-in schema file."""
    return dumps_pretty(build_schema())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    data = schema_bytes()
    if args == ["--check"]:
        current = SCHEMA_PATH.read_bytes() if SCHEMA_PATH.exists() else b""
        if current != data:
            print(f"{SCHEMA_PATH} is stale; run python -m {__spec__.name}", file=sys.stderr)
            return 1
        return 0
    SCHEMA_PATH.parent.mkdir(parents=True, exist_ok=True)
    SCHEMA_PATH.write_bytes(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
