"""The control plane's row of the schema-export table (its contract file,
``contracts/kiln-control-plane-v1.schema.json``).

``python -m kiln_verify.control.schema_export`` rewrites the file; ``--check`` exits 1 when
the checked-in bytes differ (a test does the same). Same conventions as the other two
contracts (rows of :class:`kiln_verify.records.schema.SchemaContract`): draft 2020-12, one
``$defs`` entry per record, closed objects, optional fields omitted rather than null. The
root is a ``oneOf`` over the request and answer documents of the routes
(docs/control-plane.md); the requests accept ``environment_urls`` for ``environments``,
and a task split is provider-authored (its unknown fields are preserved, not refused).
Training admission adds Kiln's preflight request and receipt and the training contract
(:mod:`kiln_verify.control.training.records`), with ``GrpoConfig`` open as Kiln's is.
"""

from __future__ import annotations

from typing import Final

from kiln_verify.control.request import InspectRequest, OpenEnvRunRequest, TaskCatalogRequest
from kiln_verify.control.status import (
    ApiErrorBody,
    InspectResponse,
    OpenEnvRunStatus,
    RunFailure,
    RunList,
    TaskCatalogResponse,
)
from kiln_verify.control.training.records import (
    OpenEnvTrainingContract,
    OpenEnvTrainingPreflightReceipt,
    OpenEnvTrainingPreflightRequest,
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

_ENVIRONMENT_URLS: Final = {"environments": "environment_urls"}

CONTRACT: Final = SchemaContract(
    file="kiln-control-plane-v1.schema.json",
    title="kiln-verify control-plane records",
    roots=(
        OpenEnvRunRequest,
        OpenEnvRunStatus,
        RunList,
        RunFailure,
        InspectRequest,
        InspectResponse,
        TaskCatalogRequest,
        TaskCatalogResponse,
        ApiErrorBody,
        OpenEnvTrainingPreflightRequest,
        OpenEnvTrainingPreflightReceipt,
        OpenEnvTrainingContract,
    ),
    root="oneOf",
    module="kiln_verify.control.schema_export",
    input_aliases={
        **{
            name: _ENVIRONMENT_URLS
            for name in ("OpenEnvRunRequest", "InspectRequest", "TaskCatalogRequest")
        },
        "GrpoConfig": {"reference_policy": "kl_reference_policy"},
    },
    open_records=(
        "TaskSplitRecord",
        # Kiln's open GrpoConfig parts: unknown keys are read and ignored (admission
        # refuses them before reading, docs/training-admission.md)
        "GrpoConfig",
        "KlReferencePolicy",
        "LossConfig",
        "EchoConfig",
        "OpdAuxConfig",
    ),
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
