"""Kiln's training-admission records: the preflight request and receipt, the sealed contract.

Field names, order, requiredness and closedness are the published control-plane schema's
(ericflo/kiln ``contracts/kiln-control-plane-v1.schema.json`` @7b449586):

``OpenEnvTrainingPreflightRequest``   ``POST /v1/openenv/training/preflight``'s body
``OpenEnvTrainingCapacitySnapshot``   what the trainer's queue held when admission looked
``OpenEnvTrainingPreflightReceipt``   ``kiln.openenv-training-preflight.v1``: the exact
                                      effective ``GrpoConfig``, the behaviour policy,
                                      capacity, ``capacity_reserved: false``
``OpenEnvTrainingContract``           ``kiln.openenv-training-contract.v1``: what a train run
                                      seals into ``run.json`` and embeds in its summary
``OpenEnvEnvironmentEvalConfig``      a train request's paired held-out evaluation (§9)

``post_eval`` is Kiln's ``PostEvalConfig`` (an open object with a required ``suite``); this
server has no static suites and refuses it at admission, so it is kept as the object read.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import Field, StrictBool, StrictStr, field_validator

from kiln_verify.control.request import NonNegative, Number, Positive
from kiln_verify.control.training.grpo_config import GrpoConfig
from kiln_verify.records import U64, FreeObject, Record
from kiln_verify.records.policy import BehaviorPolicyIdentity

__all__ = [
    "PREFLIGHT_SCHEMA",
    "TRAINING_CONTRACT_SCHEMA",
    "OpenEnvEnvironmentEvalConfig",
    "OpenEnvEnvironmentEvalGate",
    "OpenEnvTrainingCapacitySnapshot",
    "OpenEnvTrainingContract",
    "OpenEnvTrainingPreflightReceipt",
    "OpenEnvTrainingPreflightRequest",
]

PREFLIGHT_SCHEMA: Final = "kiln.openenv-training-preflight.v1"
TRAINING_CONTRACT_SCHEMA: Final = "kiln.openenv-training-contract.v1"

_Text = Annotated[StrictStr, Field(min_length=1)]


def _post_eval(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is not None:
        suite = value.get("suite")
        if not isinstance(suite, str) or not suite:
            raise ValueError("post_eval needs a non-empty suite")
    return value


class OpenEnvEnvironmentEvalGate(Record):
    """Fail-closed promotion thresholds (both optional; significance is always required)."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {"min_mean_return", "min_mean_improvement"}
    )

    min_mean_return: Number | None = None
    min_mean_improvement: Annotated[float, Field(ge=0.0)] | None = None


class OpenEnvEnvironmentEvalConfig(Record):
    """``environment_eval`` as sent: every key optional (Kiln's defaults: 20 groups of 1,
    seeds right after the training interval, no gate)."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {"groups", "group_size", "seed_start", "gate"}
    )

    groups: Positive | None = None
    group_size: Positive | None = None
    seed_start: NonNegative | None = None
    gate: OpenEnvEnvironmentEvalGate | None = None


class OpenEnvTrainingPreflightRequest(Record):
    """Side-effect-free training intent, checked before any environment is contacted."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {"adapter", "training_config", "auto_load", "post_eval"}
    )

    adapter: _Text | None = None
    output_adapter: _Text
    training_config: FreeObject | None = None
    auto_load: StrictBool | None = None
    post_eval: FreeObject | None = None

    _check_post_eval = field_validator("post_eval")(_post_eval)


class OpenEnvTrainingCapacitySnapshot(Record):
    """Point-in-time trainer capacity seen by admission; never a reservation."""

    checked_unix_ms: U64
    queued_jobs: U64
    max_queued_jobs: Annotated[U64, Field(ge=1)]
    tracked_jobs: U64
    max_tracked_jobs: Annotated[U64, Field(ge=1)]


class OpenEnvTrainingPreflightReceipt(Record):
    """``kiln.openenv-training-preflight.v1``: what the client must train with."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"post_eval"})

    schema_: Literal["kiln.openenv-training-preflight.v1"] = Field(PREFLIGHT_SCHEMA, alias="schema")
    effective_config: GrpoConfig
    post_eval: FreeObject | None = None
    behavior_policy: BehaviorPolicyIdentity
    capacity: OpenEnvTrainingCapacitySnapshot
    capacity_reserved: Literal[False] = False

    _check_post_eval = field_validator("post_eval")(_post_eval)

    def training_contract(self) -> OpenEnvTrainingContract:
        """The contract a run seals from this receipt (Kiln's ``training_contract()``)."""
        return OpenEnvTrainingContract(
            schema=TRAINING_CONTRACT_SCHEMA,
            effective_config=self.effective_config,
            post_eval=self.post_eval,
            behavior_policy=self.behavior_policy,
        )


class OpenEnvTrainingContract(Record):
    """``kiln.openenv-training-contract.v1``: the immutable settings a train run executes."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"post_eval", "behavior_policy"})

    schema_: Literal["kiln.openenv-training-contract.v1"] = Field(
        TRAINING_CONTRACT_SCHEMA, alias="schema"
    )
    effective_config: GrpoConfig
    post_eval: FreeObject | None = None
    behavior_policy: BehaviorPolicyIdentity | None = None

    _check_post_eval = field_validator("post_eval")(_post_eval)
