"""The OpenEnv bundle's row of the schema-export table: ``contracts/kiln-openenv-v1.schema.json``.

``python -m kiln_verify.openenv.records.schema_export`` rewrites the file; ``--check``
exits 1 when the checked-in bytes differ (a test does the same). The document is draft
2020-12 with one ``$defs`` entry per record type, root ``$ref`` to the summary; how it is
built and written is :class:`kiln_verify.records.schema.SchemaContract`'s. Fields Kiln
omits when absent appear as optional and non-nullable.
"""

from __future__ import annotations

from typing import Final

from kiln_verify.openenv.records.evaluation import EnvironmentEvaluationReceipt
from kiln_verify.openenv.records.replay import ReplayManifest
from kiln_verify.openenv.records.reports import (
    ArtifactDownloadReceipt,
    ReplayRunReport,
    ReplayRunResult,
    VerificationReport,
)
from kiln_verify.openenv.records.rollout import AgenticGroup
from kiln_verify.openenv.records.summary import RolloutSummary
from kiln_verify.records.schema import SchemaContract

__all__ = ["CONTRACT", "ROOT_MODELS", "SCHEMA_ID", "SCHEMA_PATH", "build_schema", "schema_bytes"]

CONTRACT: Final = SchemaContract(
    file="kiln-openenv-v1.schema.json",
    title="kiln-verify OpenEnv bundle records",
    roots=(
        RolloutSummary,
        ReplayManifest,
        AgenticGroup,
        VerificationReport,
        ReplayRunReport,
        ReplayRunResult,
        EnvironmentEvaluationReceipt,
        ArtifactDownloadReceipt,
    ),
    root="ref",
    module="kiln_verify.openenv.records.schema_export",
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
