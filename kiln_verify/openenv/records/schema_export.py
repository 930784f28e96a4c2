"""Generate ``contracts/kiln-openenv-v1.schema.json`` from the record models.

``python -m kiln_verify.openenv.records.schema_export`` rewrites the file;
``--check`` exits 1 when the checked-in bytes differ (a test does the same). The document
is draft 2020-12 with one ``$defs`` entry per record type, root ``$ref`` to the summary,
written by :func:`kiln_verify.core.jsonio.dumps_pretty` so the bytes are deterministic.
Fields Kiln omits when absent appear as optional and non-nullable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from kiln_verify.core.jsonio import dumps_pretty
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
from kiln_verify.records import Record
from kiln_verify.records.schema import export_main, record_definitions

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
    ReplayRunResult,
    EnvironmentEvaluationReceipt,
    ArtifactDownloadReceipt,
)


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
    """Write the schema file, or ``--check`` it (exit 1 when stale)."""
    return export_main(argv, path=SCHEMA_PATH, data=schema_bytes(), module=__spec__.name)


if __name__ == "__main__":
    raise SystemExit(main())
