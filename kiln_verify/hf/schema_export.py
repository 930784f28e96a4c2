"""Generate ``contracts/kiln-hf-trl-v1.schema.json`` from the HF/TRL record models.

``python -m kiln_verify.hf.schema_export`` rewrites the file; ``--check`` exits 1 when the
checked-in bytes differ (a test does the same). Same conventions as the OpenEnv schema
(both use :func:`kiln_verify.records.schema.record_definitions`): draft 2020-12, one
``$defs`` entry per record type, closed objects, optional fields that Kiln omits appear
optional and non-nullable, bytes from
:func:`kiln_verify.core.jsonio.dumps_pretty`. The root is a ``oneOf`` over the four
documents plus the GRPO row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from kiln_verify.core.jsonio import dumps_pretty
from kiln_verify.hf.manifest import (
    ExportManifest,
    GrpoGroup,
    ImportReceipt,
    SftIngestionReceipt,
    TrainingResult,
)
from kiln_verify.records import Record
from kiln_verify.records.schema import export_main, record_definitions

__all__ = ["ROOT_MODELS", "SCHEMA_ID", "SCHEMA_PATH", "build_schema", "main", "schema_bytes"]

SCHEMA_ID: Final = "https://kiln-verify.invalid/contracts/kiln-hf-trl-v1.schema.json"
SCHEMA_PATH: Final = (
    Path(__file__).resolve().parents[2] / "contracts" / "kiln-hf-trl-v1.schema.json"
)
ROOT_MODELS: Final[tuple[type[Record], ...]] = (
    ExportManifest,
    TrainingResult,
    ImportReceipt,
    SftIngestionReceipt,
    GrpoGroup,
)


def build_schema() -> dict[str, Any]:
    """The schema document as Python values."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "kiln-verify HF/TRL hand-off records",
        "oneOf": [{"$ref": f"#/$defs/{model.__name__}"} for model in ROOT_MODELS],
        "$defs": record_definitions(ROOT_MODELS),
    }


def schema_bytes() -> bytes:
    """The exact bytes of the checked-in schema file."""
    return dumps_pretty(build_schema())


def main(argv: list[str] | None = None) -> int:
    """Write the schema file, or ``--check`` it (exit 1 when stale)."""
    return export_main(argv, path=SCHEMA_PATH, data=schema_bytes(), module=__spec__.name)


if __name__ == "__main__":
    raise SystemExit(main())
