"""Paired held-out evaluation receipt ``kiln.openenv-environment-evaluation.v1`` (§2.10).

Shapes follow the openenv schema (not the looser control-plane copies): the gate's
``min_mean_improvement`` and the config's ``groups``/``group_size`` are required. The
decision → outcome mapping is enforced on construction.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, Self

from pydantic import Field, StrictStr, model_validator

from kiln_verify.limits import MAX_GROUP_SIZE, MAX_GROUPS
from kiln_verify.records import F64, U64, NonNegF64, Record, Seed, Sha256

__all__ = [
    "EVALUATION_POLICY_VERSION",
    "EVALUATION_SCHEMA",
    "EXACT_SIGN_TEST_ALPHA",
    "EnvironmentEvalConfig",
    "EnvironmentEvalEvidence",
    "EnvironmentEvalGate",
    "EnvironmentEvaluationReceipt",
    "EvaluationDecision",
    "EvaluationOutcome",
    "PolicyIdentity",
]

EVALUATION_SCHEMA: Final = "kiln.openenv-environment-evaluation.v1"
EVALUATION_POLICY_VERSION: Final = "paired_return_sign_test_v1"
EXACT_SIGN_TEST_ALPHA: Final = 0.05

EvaluationDecision = Literal["diagnostic", "passed", "rejected", "inconclusive"]
EvaluationOutcome = Literal["diagnostic", "promoted", "kept", "rejected", "inconclusive", "error"]

_ALLOWED_OUTCOMES: Final[dict[str, frozenset[str]]] = {
    "diagnostic": frozenset({"diagnostic"}),
    "passed": frozenset({"promoted", "kept", "error"}),
    "rejected": frozenset({"rejected"}),
    "inconclusive": frozenset({"inconclusive"}),
}


class EnvironmentEvalGate(Record):
    _omit_when_none = frozenset({"min_mean_return"})

    min_mean_improvement: NonNegF64
    min_mean_return: F64 | None = None


class EnvironmentEvalConfig(Record):
    _omit_when_none = frozenset({"seed_start", "gate"})

    groups: Annotated[U64, Field(ge=1, le=MAX_GROUPS)]
    group_size: Annotated[U64, Field(ge=1, le=MAX_GROUP_SIZE)]
    seed_start: Seed | None = None
    gate: EnvironmentEvalGate | None = None


class PolicyIdentity(Record):
    """Baseline or candidate policy; an absent ``adapter`` is the base model."""

    _omit_when_none = frozenset(
        {"adapter", "adapter_content_revision", "execution_provenance_sha256"}
    )

    adapter: Annotated[StrictStr, Field(min_length=1)] | None = None
    adapter_content_revision: Sha256 | None = None
    execution_provenance_sha256: Sha256 | None = None


class EnvironmentEvalEvidence(Record):
    policy_version: Literal["paired_return_sign_test_v1"] = EVALUATION_POLICY_VERSION
    paired_groups: Annotated[U64, Field(ge=1)]
    paired_episodes: Annotated[U64, Field(ge=1)]
    minimum_paired_groups: Literal[20] = 20
    baseline_mean_return: F64
    candidate_mean_return: F64
    mean_return_improvement: F64
    improved_groups: U64
    regressed_groups: U64
    tied_groups: U64
    exact_sign_test_p_value: Annotated[NonNegF64, Field(le=1.0)]
    exact_sign_test_alpha: F64 = EXACT_SIGN_TEST_ALPHA
    decision: EvaluationDecision
    reason: Annotated[StrictStr, Field(min_length=1)]

    @model_validator(mode="after")
    def _p_value_bounded(self) -> Self:
        if self.exact_sign_test_p_value > 1.0:
            raise ValueError("exact_sign_test_p_value must be at most 1")
        if self.exact_sign_test_alpha != EXACT_SIGN_TEST_ALPHA:
            raise ValueError("exact_sign_test_alpha must be 0.05")
        return self


class EnvironmentEvaluationReceipt(Record):
    schema_: Literal["kiln.openenv-environment-evaluation.v1"] = Field(
        EVALUATION_SCHEMA, alias="schema"
    )
    run_id: Annotated[StrictStr, Field(min_length=1)]
    config: EnvironmentEvalConfig
    seed_start: Seed
    baseline: PolicyIdentity
    candidate: PolicyIdentity
    baseline_summary_sha256: Sha256
    candidate_summary_sha256: Sha256
    evidence: EnvironmentEvalEvidence
    outcome: EvaluationOutcome
    verdict: Annotated[StrictStr, Field(min_length=1)]

    @model_validator(mode="after")
    def _outcome_matches_decision(self) -> Self:
        if self.outcome not in _ALLOWED_OUTCOMES[self.evidence.decision]:
            raise ValueError(
                f"outcome {self.outcome!r} is not allowed for decision {self.evidence.decision!r}"
            )
        return self
