"""The whole-run records' row of the schema-export table:
``contracts/kiln-verify-run-v1.schema.json``.

Both records are ours (``kiln-verify.run-download.v1``, ``kiln-verify.run-verification.v1``);
``python -m kiln_verify.openenv.runcheck.schema_export`` rewrites the file, ``--check``
exits 1 when the checked-in bytes differ (a test does the same).
"""

from __future__ import annotations

from typing import Final

from kiln_verify.openenv.runcheck.records import RunDownloadReceipt, RunVerificationReport
from kiln_verify.records.schema import SchemaContract

__all__ = ["CONTRACT", "main"]

CONTRACT: Final = SchemaContract(
    file="kiln-verify-run-v1.schema.json",
    title="kiln-verify whole-run records",
    roots=(RunDownloadReceipt, RunVerificationReport),
    root="oneOf",
    module="kiln_verify.openenv.runcheck.schema_export",
)


def main(argv: list[str] | None = None) -> int:
    """Write the schema file, or ``--check`` it (exit 1 when stale)."""
    return CONTRACT.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
