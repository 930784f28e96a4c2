"""The training chain's row of the schema-export table: ``contracts/kiln-training-v1.schema.json``.

Kiln's lineage record (``OpenEnvTrainingDataProvenanceV1`` and its parts, exactly Kiln's
control-plane definitions) and our two evidence records (``TrainReceipt``,
``AdapterManifest``, under our own schema names). ``python -m
kiln_verify.openenv.training.schema_export`` rewrites the file; ``--check`` exits 1 when
the checked-in bytes differ (a test does the same). How the document is built is
:class:`kiln_verify.records.schema.SchemaContract`'s.
"""

from __future__ import annotations

from typing import Final

from kiln_verify.openenv.training.evidence import AdapterManifest, TrainReceipt
from kiln_verify.openenv.training.lineage import OpenEnvTrainingDataProvenanceV1
from kiln_verify.records.schema import SchemaContract

__all__ = ["CONTRACT", "main"]

CONTRACT: Final = SchemaContract(
    file="kiln-training-v1.schema.json",
    title="kiln-verify training chain records",
    roots=(OpenEnvTrainingDataProvenanceV1, TrainReceipt, AdapterManifest),
    root="oneOf",
    module="kiln_verify.openenv.training.schema_export",
)


def main(argv: list[str] | None = None) -> int:
    """Write the schema file, or ``--check`` it (exit 1 when stale)."""
    return CONTRACT.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
