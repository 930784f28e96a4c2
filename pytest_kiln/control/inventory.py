"""The control-plane case inventory: stable ids, levels and the contract clause of each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_kiln.cases.model import Level
from pytest_kiln.control import checks, training
from pytest_kiln.control.context import ControlContext

__all__ = ["CONTROL_CASES", "ControlCase"]

CONTRACT = "docs/control-plane.md"
"""The document every case's clause cites, by section heading (shipped in the repository)."""


@dataclass(frozen=True, slots=True)
class ControlCase:
    """One case: ``id`` is stable and never reused for another requirement."""

    id: str
    level: Level
    clause: str
    requirement: str
    check: Callable[[ControlContext], str | None] = field(repr=False)


def _clause(heading: str) -> str:
    return f"{CONTRACT} § {heading}"


CONTROL_CASES: tuple[ControlCase, ...] = (
    ControlCase(
        "runs.list",
        Level.MUST,
        _clause("Routes"),
        "GET /v1/openenv/runs is kiln.openenv-run-list.v5, newest first",
        checks.check_list,
    ),
    ControlCase(
        "runs.create",
        Level.MUST,
        _clause("Routes"),
        "a new request answers 202 with a v5 status, a UUID run id, the normalized "
        "request and its admission sequence",
        checks.check_create,
    ),
    ControlCase(
        "idempotency.replay",
        Level.MUST,
        _clause("Idempotency"),
        "an exact retry (also spelled with aliases and explicit defaults) answers 200 "
        "with the original run",
        checks.check_replay,
    ),
    ControlCase(
        "idempotency.conflict",
        Level.MUST,
        _clause("Idempotency"),
        "the same key with a changed field answers 409 openenv_run_idempotency_conflict",
        checks.check_conflict,
    ),
    ControlCase(
        "idempotency.concurrent",
        Level.MUST,
        _clause("Idempotency"),
        f"{checks.CONCURRENT_POSTS} concurrent identical POSTs create exactly one run",
        checks.check_concurrent_create,
    ),
    ControlCase(
        "idempotency.no-key",
        Level.MUST,
        _clause("Idempotency"),
        "a request without a key always creates a new run",
        checks.check_no_key,
    ),
    ControlCase(
        "idempotency.key-alphabet",
        Level.MUST,
        _clause("Idempotency"),
        "keys are 1..128 of [A-Za-z0-9._:-]; others answer 400 openenv_invalid_idempotency_key",
        checks.check_key_alphabet,
    ),
    ControlCase(
        "artifacts.headers",
        Level.MUST,
        _clause("Artifacts: a pathname is not publication"),
        "each manifest artifact is served with Content-Length, a strong quoted-digest "
        "ETag, private/no-store, nosniff and its exact bytes",
        checks.check_artifact_headers,
    ),
    ControlCase(
        "artifacts.unknown-kind",
        Level.MUST,
        _clause("Artifacts: a pathname is not publication"),
        "a kind missing from the manifest answers 404 openenv_artifact_not_found",
        checks.check_unknown_kind,
    ),
    ControlCase(
        "runs.cancel",
        Level.MUST,
        _clause("Routes"),
        "DELETE cancels a live run; a terminal one answers 409, an unknown one 404",
        checks.check_cancel,
    ),
    ControlCase(
        "failure.record",
        Level.MUST,
        _clause("Failure records"),
        "a failed run carries a closed kiln.openenv-run-failure.v1 record with code, "
        "stage and retryable by the classification rules",
        checks.check_failure_record,
    ),
    ControlCase(
        "metrics.label-hygiene",
        Level.MUST,
        _clause("Metrics"),
        "/metrics exposes the fixed families and no run id, key, URL or name",
        checks.check_metric_hygiene,
    ),
    ControlCase(
        "errors.typed-bodies",
        Level.SHOULD,
        _clause("Routes"),
        '404, 400 and 413 answers carry {"error": {code, message, hint}}',
        checks.check_error_bodies,
    ),
    ControlCase(
        "training.preflight-receipt",
        Level.MUST,
        _clause("Routes"),
        "a preflight answers kiln.openenv-training-preflight.v1 with Kiln's owned overrides "
        "in effective_config, a capacity snapshot and capacity_reserved false (not applicable "
        "on a server that answers 409 model_not_loaded)",
        training.check_preflight_receipt,
    ),
    ControlCase(
        "training.preflight-refusals",
        Level.MUST,
        _clause("Routes"),
        "a preflight without output_adapter, training an adapter over itself, with a bad "
        "adapter name, an unknown GrpoConfig field or post_eval is refused with its code and "
        "creates no run",
        training.check_preflight_refusals,
    ),
    ControlCase(
        "training.rollout-refuses-training-fields",
        Level.MUST,
        _clause("Run kinds"),
        "a rollout request with output_adapter, training_config or environment_eval answers "
        "400 openenv_invalid_request and creates no run",
        training.check_rollout_refuses_training_fields,
    ),
    ControlCase(
        "training.train-run",
        Level.MUST,
        _clause("Run kinds"),
        "a small kind=train run seals kiln.openenv-training-contract.v1 in its first status "
        "and completes with it unchanged; when it trains, train_receipt and adapter_manifest "
        "are published and training.training_data.openenv carries the lineage (not "
        "applicable on a server that answers 409 model_not_loaded)",
        training.check_train_run,
    ),
)
