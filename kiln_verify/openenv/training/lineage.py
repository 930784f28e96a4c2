"""Kiln's training-data lineage records, ``kiln.openenv-training-data.v1`` (§3.3).

The record names and fields are exactly Kiln's control-plane definitions
(``contracts/kiln-control-plane-v1.schema.json`` @7b449586: ``OpenEnvTrainingDataProvenanceV1``,
``OpenEnvTrainingEnvironmentV1``, ``OpenEnvTerminationCountsV1``, ``DecimalU64``). The
shape is checked by the models (``record_invalid``); the consistency of the counts, which
Kiln's deserializer re-validates, by :func:`check_lineage` with its own code
(``training_data_totals_inconsistent``), so a reader can tell a tampered total from a
malformed document. :func:`read_training_data` does both.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field, StrictStr, WithJsonSchema

from kiln_verify.errors import TrainingDataTotalsInconsistent
from kiln_verify.limits import MAX_RECORD_URL_BYTES
from kiln_verify.records import (
    U64,
    BehaviorPolicyIdentity,
    IdentityText,
    Record,
    Sha256,
    validate_record,
)

__all__ = [
    "DECIMAL_U64_PATTERN",
    "TRAINING_DATA_SCHEMA",
    "DecimalU64",
    "OpenEnvTerminationCountsV1",
    "OpenEnvTrainingDataProvenanceV1",
    "OpenEnvTrainingEnvironmentV1",
    "check_lineage",
    "read_training_data",
]

TRAINING_DATA_SCHEMA: Final = "kiln.openenv-training-data.v1"
DECIMAL_U64_PATTERN: Final = r"^(0|[1-9][0-9]*)$"


def _u64_text(value: str) -> str:
    if int(value) > 2**64 - 1:
        raise ValueError("exceeds the unsigned 64-bit range")
    return value


DecimalU64 = Annotated[
    StrictStr,
    Field(pattern=DECIMAL_U64_PATTERN, max_length=20),
    AfterValidator(_u64_text),
    WithJsonSchema({"type": "string", "pattern": DECIMAL_U64_PATTERN}),
]
"""Kiln's ``DecimalU64``: a u64 written as canonical decimal text (no sign, no leading 0)."""

_Positive = Annotated[U64, Field(ge=1)]
_Url = Annotated[StrictStr, Field(min_length=1, max_length=MAX_RECORD_URL_BYTES)]


class OpenEnvTerminationCountsV1(Record):
    """Rollouts per termination class."""

    done: U64
    max_steps: U64
    invalid_model_action: U64
    protocol_error: U64

    @classmethod
    def zero(cls) -> OpenEnvTerminationCountsV1:
        return cls(done=0, max_steps=0, invalid_model_action=0, protocol_error=0)

    def counted(self, termination: str) -> OpenEnvTerminationCountsV1:
        """These counts plus one rollout that ended with ``termination``."""
        return self.model_copy(update={termination: getattr(self, termination) + 1})

    @property
    def total(self) -> int:
        return self.done + self.max_steps + self.invalid_model_action + self.protocol_error

    def plus(self, other: OpenEnvTerminationCountsV1) -> OpenEnvTerminationCountsV1:
        return OpenEnvTerminationCountsV1(
            done=self.done + other.done,
            max_steps=self.max_steps + other.max_steps,
            invalid_model_action=self.invalid_model_action + other.invalid_model_action,
            protocol_error=self.protocol_error + other.protocol_error,
        )


class OpenEnvTrainingEnvironmentV1(Record):
    """One endpoint (distinct base URL) of the corpus and its immutable schema identity."""

    _omit_when_none = frozenset({"openapi_version", "discovery_sha256"})

    environment_name: IdentityText
    environment_base_url: _Url
    openapi_version: IdentityText | None = None
    discovery_sha256: Sha256 | None = None
    environment_schema_sha256: Sha256
    action_schema_sha256: Sha256
    groups: _Positive
    rollouts: _Positive
    total_steps: U64
    terminations: OpenEnvTerminationCountsV1


class OpenEnvTrainingDataProvenanceV1(Record):
    """The semantic identity of an all-OpenEnv GRPO corpus (Kiln's struct order)."""

    _omit_when_none = frozenset({"behavior_policy"})

    schema_: Literal["kiln.openenv-training-data.v1"] = Field(TRAINING_DATA_SCHEMA, alias="schema")
    groups: _Positive
    rollouts: _Positive
    unique_seeds: _Positive
    seed_min: DecimalU64
    seed_max: DecimalU64
    total_steps: U64
    terminations: OpenEnvTerminationCountsV1
    group_plan_sha256: Sha256
    behavior_policy: BehaviorPolicyIdentity | None = None
    environments: list[OpenEnvTrainingEnvironmentV1] = Field(min_length=1)


def _inconsistent(rule: str, source: str | None) -> TrainingDataTotalsInconsistent:
    return TrainingDataTotalsInconsistent(f"training data lineage: {rule}", path=source)


def check_lineage(lineage: OpenEnvTrainingDataProvenanceV1, source: str | None = None) -> None:
    """Kiln's re-validation of a lineage's counts: at least one rollout per group, seed
    statistics in range, termination counts equal to rollouts (corpus-wide and per
    environment), environments sorted by unique base URL, and the per-environment sums
    equal to the corpus totals. Raises ``training_data_totals_inconsistent``."""
    if lineage.rollouts < lineage.groups:
        raise _inconsistent("fewer rollouts than groups", source)
    if lineage.unique_seeds > lineage.groups or int(lineage.seed_min) > int(lineage.seed_max):
        raise _inconsistent("seed statistics are inconsistent", source)
    if lineage.terminations.total != lineage.rollouts:
        raise _inconsistent("termination counts do not add up to rollouts", source)
    previous: str | None = None
    totals = OpenEnvTerminationCountsV1.zero()
    groups = rollouts = steps = 0
    for index, environment in enumerate(lineage.environments):
        url = environment.environment_base_url
        if previous is not None and previous >= url:
            raise _inconsistent("environments are not sorted by unique base URL", source)
        previous = url
        if environment.rollouts < environment.groups:
            raise _inconsistent(f"environments[{index}] has fewer rollouts than groups", source)
        if environment.terminations.total != environment.rollouts:
            raise _inconsistent(
                f"environments[{index}] termination counts do not add up to rollouts", source
            )
        groups += environment.groups
        rollouts += environment.rollouts
        steps += environment.total_steps
        totals = totals.plus(environment.terminations)
    if (groups, rollouts, steps, totals) != (
        lineage.groups,
        lineage.rollouts,
        lineage.total_steps,
        lineage.terminations,
    ):
        raise _inconsistent("per-environment totals do not equal the corpus totals", source)


def read_training_data(value: Any, source: str | None = None) -> OpenEnvTrainingDataProvenanceV1:
    """A parsed lineage document as a checked record (``record_invalid``, then the totals)."""
    lineage = validate_record(OpenEnvTrainingDataProvenanceV1, value, source=source)
    check_lineage(lineage, source)
    return lineage
