"""The ``environment_evaluation`` section of a train run's status (kiln-openenv-contract §9).

Kiln's ``OpenEnvEnvironmentEvalStatus`` and ``OpenEnvEnvironmentEvalProgress``
(``contracts/kiln-control-plane-v1.schema.json`` @7b449586): closed records, field order
and requiredness as published. The identities, statistics and evidence are the records the
evaluation engine already writes under Kiln's names (``OpenEnvPolicyIdentity`` =
:class:`~kiln_verify.openenv.records.evaluation.PolicyIdentity`, ``OpenEnvRolloutStats`` =
:class:`~kiln_verify.openenv.records.summary.RolloutStats`, ``OpenEnvEnvironmentEvalEvidence``
= :class:`~kiln_verify.openenv.records.evaluation.EnvironmentEvalEvidence`).

The run status keeps the section as its typed ``environment_evaluation``
(:class:`~kiln_verify.control.status.OpenEnvRunStatus`), so it lives here, below the status.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import Field, StrictStr

from kiln_verify.openenv.records.evaluation import (
    EnvironmentEvalEvidence,
    EvaluationOutcome,
    PolicyIdentity,
)
from kiln_verify.openenv.records.summary import RolloutStats
from kiln_verify.records import U64, Record, Seed

__all__ = [
    "EVALUATION_STATES",
    "EvaluationState",
    "OpenEnvEnvironmentEvalProgress",
    "OpenEnvEnvironmentEvalStatus",
]

EvaluationState = Literal[
    "pending", "collecting_baseline", "collecting_candidate", "completed", "failed", "cancelled"
]
EVALUATION_STATES: Final[tuple[str, ...]] = EvaluationState.__args__  # type: ignore[attr-defined]

_Positive = Annotated[U64, Field(ge=1)]


class OpenEnvEnvironmentEvalProgress(Record):
    """Live progress of the half being collected (both halves have the same totals)."""

    state: EvaluationState
    groups_completed: U64
    groups_total: _Positive
    rollouts_completed: U64
    rollouts_total: _Positive


class OpenEnvEnvironmentEvalStatus(Record):
    """Authoritative paired-evaluation status and promotion result of one train run."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {"baseline_stats", "candidate_stats", "evidence", "outcome", "verdict"}
    )

    state: EvaluationState
    seed_start: Seed
    groups: _Positive
    group_size: _Positive
    baseline: PolicyIdentity
    candidate: PolicyIdentity
    progress: OpenEnvEnvironmentEvalProgress
    baseline_stats: RolloutStats | None = None
    candidate_stats: RolloutStats | None = None
    evidence: EnvironmentEvalEvidence | None = None
    outcome: EvaluationOutcome | None = None
    verdict: StrictStr | None = None

    def moved(self, state: EvaluationState, **changes: Any) -> OpenEnvEnvironmentEvalStatus:
        """This section in ``state`` (the progress's state follows), with ``changes``."""
        progress = changes.pop("progress", self.progress)
        return self.model_copy(
            update={
                "state": state,
                "progress": progress.model_copy(update={"state": state}),
                **changes,
            }
        )
