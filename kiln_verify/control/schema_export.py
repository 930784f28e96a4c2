"""Generate ``contracts/kiln-control-plane-v1.schema.json`` from the control-plane records.

``python -m kiln_verify.control.schema_export`` rewrites the file; ``--check`` exits 1 when
the checked-in bytes differ (a test does the same). Same conventions as the other two
contracts (:mod:`kiln_verify.openenv.records.schema_export`): draft 2020-12, one ``$defs``
entry per record, closed objects, optional fields omitted rather than null, bytes from
:func:`kiln_verify.core.jsonio.dumps_pretty`. The root is a ``oneOf`` over the request and
answer documents of the routes (docs/control-plane.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from kiln_verify.control.request import InspectRequest, OpenEnvRunRequest, TaskCatalogRequest
from kiln_verify.control.status import (
    ApiErrorBody,
    InspectResponse,
    OpenEnvRunStatus,
    RunFailure,
    RunList,
    TaskCatalogResponse,
)
from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.records import Record
from kiln_verify.records.schema import export_main, record_definitions

__all__ = ["ROOT_MODELS", "SCHEMA_ID", "SCHEMA_PATH", "build_schema", "main", "schema_bytes"]

SCHEMA_ID: Final = "https://kiln-verify.invalid/contracts/kiln-control-plane-v1.schema.json"
SCHEMA_PATH: Final = (
    Path(__file__).resolve().parents[2] / "contracts" / "kiln-control-plane-v1.schema.json"
)
ROOT_MODELS: Final[tuple[type[Record], ...]] = (
    OpenEnvRunRequest,
    OpenEnvRunStatus,
    RunList,
    RunFailure,
    InspectRequest,
    InspectResponse,
    TaskCatalogRequest,
    TaskCatalogResponse,
    ApiErrorBody,
)


_ALIASED: Final = ("OpenEnvRunRequest", "InspectRequest", "TaskCatalogRequest")
_OPEN: Final = ("TaskSplitRecord",)
"""Provider-authored objects whose unknown fields are preserved, not refused."""


def build_schema() -> dict[str, Any]:
    """The schema document as Python values."""
    defs = record_definitions(ROOT_MODELS)
    for name in _ALIASED:
        defs[name]["x-kiln-input-aliases"] = {"environments": "environment_urls"}
    for name in _OPEN:
        defs[name]["additionalProperties"] = True
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "kiln-verify control-plane records",
        "oneOf": [{"$ref": f"#/$defs/{model.__name__}"} for model in ROOT_MODELS],
        "$defs": defs,
    }


def schema_bytes() -> bytes:
    """The exact bytes of the checked-in schema file."""
    return dumps_pretty(build_schema())


def main(argv: list[str] | None = None) -> int:
    """Write the schema file, or ``--check`` it (exit 1 when stale)."""
    return export_main(argv, path=SCHEMA_PATH, data=schema_bytes(), module=__spec__.name)


if __name__ == "__main__":
    raise SystemExit(main())
