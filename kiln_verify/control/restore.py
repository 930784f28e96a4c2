"""What a restart keeps: the pure decisions behind :meth:`RunRegistry.restore`.

Given the statuses found on disk, the configuration and the served run kinds,
:func:`plan_restore` decides without touching anything: queued runs that never acquired a
slot (of a kind this server runs) resume in their admission sequence; admitted runs that
were not terminal fail with ``run_interrupted`` (an environment session cannot be
resumed); terminal runs older than the TTL are forgotten; when more runs remain than
``max_tracked_runs``, the queued ones beyond the bound fail with ``run_admission_failed``.
The registry then persists the failures, binds idempotency keys and queues the rest.

Records written by earlier versions restore unchanged (``tests/control/data/run_json_v5``
holds v5 records written before the run-kind split); a pristine queued v4 rollout becomes
v5 once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kiln_verify.control import failures
from kiln_verify.control.config import ServerConfig
from kiln_verify.control.kind import KindTable
from kiln_verify.control.status import RUN_SCHEMA, OpenEnvRunStatus, RunFailure

__all__ = ["RestorePlan", "plan_restore", "restartable"]


@dataclass(slots=True)
class RestorePlan:
    """Runs to keep in restore order, and which of them failed during the restore."""

    kept: list[OpenEnvRunStatus] = field(default_factory=list)
    failed: list[OpenEnvRunStatus] = field(default_factory=list)
    next_sequence: int = 1


def restartable(status: OpenEnvRunStatus, kinds: KindTable) -> bool:
    """A pristine queued run of a served kind: it never acquired a slot, nothing started."""
    admission = status.admission
    return (
        status.state == "queued"
        and status.kind in kinds
        and status.schema_ in ("kiln.openenv-run.v4", "kiln.openenv-run.v5")
        and admission is not None
        and admission.admitted_unix_ms is None
        and admission.queue_wait_ms is None
        and status.progress.groups_completed == 0
        and status.progress.rollouts_completed == 0
        and status.artifacts is None
        and status.failure is None
        and status.rollout_stats is None
    )


def _as_v5(status: OpenEnvRunStatus, kinds: KindTable) -> OpenEnvRunStatus:
    """A pristine queued v4 run becomes v5 once (rollouts carry no training contract)."""
    if restartable(status, kinds) and status.schema_ != RUN_SCHEMA:
        return status.model_copy(update={"schema_": RUN_SCHEMA})
    return status


def _failed(status: OpenEnvRunStatus, failure: RunFailure, now: int) -> OpenEnvRunStatus:
    admission = status.admission
    if admission is not None:
        admission = admission.model_copy(update={"queue_position": None})
    return status.model_copy(
        update={
            "state": "failed",
            "finished_unix_ms": now,
            "admission": admission,
            "failure": failure,
            "error": failure.message,
        }
    )


def plan_restore(
    statuses: list[OpenEnvRunStatus], config: ServerConfig, kinds: KindTable, now: int
) -> RestorePlan:
    """The restore decisions for ``statuses`` (see the module docstring)."""
    plan = RestorePlan()
    if statuses:
        plan.next_sequence = 1 + max(
            (s.admission.sequence for s in statuses if s.admission), default=0
        )
    kept: list[OpenEnvRunStatus] = []
    for status in statuses:
        if status.terminal or restartable(status, kinds):
            kept.append(_as_v5(status, kinds))
            continue
        failure = failures.explicit(
            "run_interrupted",
            "restoration",
            True,
            f"the server restarted while the run was {status.state}; an environment "
            "session cannot be resumed",
            failures.FALLBACK["restoration"][2],
            now,
        )
        failed = _failed(_as_v5(status, kinds), failure, now)
        plan.failed.append(failed)
        kept.append(failed)
    horizon = now - config.openenv.tracked_run_ttl_secs * 1000
    kept = [s for s in kept if not (s.terminal and (s.finished_unix_ms or 0) < horizon)]
    kept.sort(key=lambda s: _restore_order(s, kinds))
    limit = config.openenv.max_tracked_runs
    for index, status in enumerate(kept[limit:], start=limit):
        if restartable(status, kinds):
            failure = failures.explicit(
                "run_admission_failed",
                "restoration",
                True,
                f"the server restarted with max_tracked_runs = {limit}, too few to keep "
                "this queued run",
                "raise [openenv] max_tracked_runs or let retained history expire, then "
                "submit a new run",
                now,
            )
            kept[index] = _failed(status, failure, now)
            plan.failed.append(kept[index])
    plan.kept = kept[:limit]
    return plan


def _restore_order(status: OpenEnvRunStatus, kinds: KindTable) -> tuple[int, int, int]:
    """Restartable queued runs first in sequence order, then the rest newest first."""
    if restartable(status, kinds):
        return (0, status.admission.sequence if status.admission else 0, 0)
    return (1, -status.submitted_unix_ms, 0)
