"""The HF/TRL hand-off's row of the schema-export table: ``contracts/kiln-hf-trl-v1.schema.json``.

``python -m kiln_verify.hf.schema_export`` rewrites the file; ``--check`` exits 1 when the
checked-in bytes differ (a test does the same). Same conventions as the OpenEnv schema
(both are rows of :class:`kiln_verify.records.schema.SchemaContract`): draft 2020-12, one
``$defs`` entry per record type, closed objects, optional fields that Kiln omits appear
optional and non-nullable. The root is a ``oneOf`` over the four documents plus the GRPO
row.
"""

from __future__ import annotations

from typing import Final

from kiln_verify.hf.manifest import (
    ExportManifest,
    GrpoGroup,
    ImportReceipt,
    SftIngestionReceipt,
    TrainingResult,
)
from kiln_verify.records.schema import SchemaContract

__all__ = [
    "CONTRACT",
    "ROOT_MODELS",
    "SCHEMA_ID",
    "SCHEMA_PATH",
    "build_schema",
    "main",
    "schema_bytes",
]

CONTRACT: Final = SchemaContract(
    file="kiln-hf-trl-v1.schema.json",
    title="kiln-verify HF/TRL hand-off records",
    roots=(ExportManifest, TrainingResult, ImportReceipt, SftIngestionReceipt, GrpoGroup),
    root="oneOf",
    module="kiln_verify.hf.schema_export",
)
SCHEMA_ID: Final = CONTRACT.schema_id
SCHEMA_PATH: Final = CONTRACT.path
ROOT_MODELS: Final = CONTRACT.roots
build_schema = CONTRACT.build
schema_bytes = CONTRACT.data


def main(argv: list[str] | None = None) -> int:
    """Write the schema file, or ``--check`` it (exit 1 when stale)."""
    return CONTRACT.main(argv, path=SCHEMA_PATH)


if __name__ == "__main__":
    raise SystemExit(main())
