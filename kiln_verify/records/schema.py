"""JSON Schema ``$defs`` generated from record models, as the records read documents.

Each contract's ``contracts/*.schema.json`` (OpenEnv bundle, HF/TRL hand-off, control
plane) is built from its root models by :func:`record_definitions`: pydantic's validation
schemas, then closed objects and, for fields Kiln omits when absent, no ``null`` branch, so
the checked-in schema says what :func:`~kiln_verify.records.validate_record` accepts.

How a contract file is exported is said once, here: :class:`SchemaContract` is one row of
the table (file name, title, root models, how the root names them, the few definitions a
contract opens up or annotates) and knows how to build, serialize, write and ``--check``
it. Each half contributes only its row, in its own ``schema_export`` module
(``kiln_verify.openenv.records``, ``kiln_verify.hf``, ``kiln_verify.control``), which is
also the ``python -m`` command that rewrites or checks that half's file.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.records.base import Record

__all__ = ["CONTRACTS_DIR", "SchemaContract", "export_main", "record_definitions"]

CONTRACTS_DIR: Final = Path(__file__).resolve().parents[2] / "contracts"
"""The checked-in contract files (``contracts/`` at the repository root)."""


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


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SchemaContract:
    """One row of the schema-export table: everything that differs between contracts.

    ``root``: ``"ref"`` points the document at the first root model (a bundle's summary),
    ``"oneOf"`` accepts any root. ``input_aliases`` annotates definitions whose input
    accepts other field names (``x-kiln-input-aliases``); ``open_records`` are
    provider-authored objects whose unknown fields are preserved, not refused."""

    file: str
    title: str
    roots: tuple[type[Record], ...]
    root: Literal["ref", "oneOf"]
    module: str
    """The ``python -m`` module that exports this contract (named in the stale message)."""
    input_aliases: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    open_records: tuple[str, ...] = ()

    @property
    def schema_id(self) -> str:
        return f"https://kiln-verify.invalid/contracts/{self.file}"

    @property
    def path(self) -> Path:
        return CONTRACTS_DIR / self.file

    def build(self) -> dict[str, Any]:
        """The schema document as Python values (draft 2020-12, keys in this order)."""
        defs = record_definitions(self.roots)
        for name, aliases in self.input_aliases.items():
            defs[name]["x-kiln-input-aliases"] = dict(aliases)
        for name in self.open_records:
            defs[name]["additionalProperties"] = True
        document: dict[str, Any] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": self.schema_id,
            "title": self.title,
        }
        if self.root == "ref":
            document["$ref"] = f"#/$defs/{self.roots[0].__name__}"
        else:
            document["oneOf"] = [{"$ref": f"#/$defs/{model.__name__}"} for model in self.roots]
        document["$defs"] = defs
        return document

    def data(self) -> bytes:
        """The exact bytes of the checked-in file (:func:`~kiln_verify.core.jsonio.
        dumps_pretty`: deterministic)."""
        return dumps_pretty(self.build())

    def main(self, argv: Sequence[str] | None = None, *, path: Path | None = None) -> int:
        """Write the file (at ``path``, default :attr:`path`), or ``--check`` it."""
        target = self.path if path is None else path
        return export_main(argv, path=target, data=self.data(), module=self.module)
