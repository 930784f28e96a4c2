"""The collection receipt ``openenv.rollout-summary.json`` (kiln-openenv-contract §2.2-§2.6).

:class:`RolloutSummary` models ``kiln.openenv-rollout-summary.v5`` and reads the legacy
v2, v3 and v4 receipts with their differences (:func:`check_version_rules`):

========  =========================================================================
version   rule
========  =========================================================================
v2        ``reset_options_sha256`` required, ``reset_plan_sha256`` forbidden; no
          ``training_contract``; no ``behavior_policy``
v3        ``reset_plan_sha256`` required, ``reset_options_sha256`` forbidden; no
          ``training_contract``; no ``behavior_policy``
v4        as v3, but may carry ``training_contract``
v5        as v4, and ``behavior_policy`` is required; when ``adapter`` is set,
          ``behavior_policy.adapter.name`` must equal it
all       ``training_submission`` requires ``training_contract``
========  =========================================================================

v1 and unknown versions are ``summary_version_unsupported``. A v5 receipt relabelled as
v2 (reset-options digest set to any well-formed digest; reset plan, contract, submission
and behaviour policy dropped) reads as a valid v2: for v2 the reset-options digest value
is not reconstructed (§2.6). Writers produce only v5
(:func:`kiln_verify.openenv.records.serialize.summary_bytes` refuses anything else).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, Self

from pydantic import ConfigDict, Field, StrictBool, StrictStr, model_validator

from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import SummaryVersionConflict, SummaryVersionUnsupported
from kiln_verify.limits import (
    MAX_ACTION_TOKENS,
    MAX_CAPACITY_WAIT_S,
    MAX_CONCURRENCY,
    MAX_ENVIRONMENTS,
    MAX_GROUP_SIZE,
    MAX_GROUPS,
    MAX_OPENENV_DATASET_BYTES,
    MAX_OPENENV_REPLAY_BYTES,
    MAX_OPENENV_SUMMARY_BYTES,
    MAX_RECOVERABLE_ERRORS,
    MAX_ROLLOUTS,
    MAX_STEPS,
)
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.observation import TERMINATION_RULES, EpisodeTermination
from kiln_verify.records import (
    F64,
    U64,
    BehaviorPolicyIdentity,
    FreeJson,
    NonNegF64,
    Record,
    Seed,
    Sha256,
    validate_record,
)

__all__ = [
    "SUMMARY_SCHEMA",
    "SUMMARY_VERSIONS",
    "TRAINING_CONTRACT_SCHEMA",
    "RolloutRecord",
    "RolloutStats",
    "RolloutSummary",
    "SummaryVersion",
    "TrainingContract",
    "TrainingSelection",
    "check_version_rules",
    "read_summary",
    "relabel_as_v2",
]

SUMMARY_SCHEMA: Final = "kiln.openenv-rollout-summary.v5"
TRAINING_CONTRACT_SCHEMA: Final = "kiln.openenv-training-contract.v1"
SummaryVersion = Literal[
    "kiln.openenv-rollout-summary.v2",
    "kiln.openenv-rollout-summary.v3",
    "kiln.openenv-rollout-summary.v4",
    "kiln.openenv-rollout-summary.v5",
]
SUMMARY_VERSIONS: Final = (
    "kiln.openenv-rollout-summary.v2",
    "kiln.openenv-rollout-summary.v3",
    "kiln.openenv-rollout-summary.v4",
    "kiln.openenv-rollout-summary.v5",
)

_Count = Annotated[U64, Field(le=MAX_GROUPS)]


class RolloutRecord(Record):
    """One episode's receipt line (group-major, then candidate order)."""

    model_config = ConfigDict(json_schema_extra=TERMINATION_RULES)

    _omit_when_none = frozenset({"protocol_error_code"})

    group_index: U64
    candidate_index: U64
    environment_name: Annotated[StrictStr, Field(min_length=1)]
    environment_url: Annotated[StrictStr, Field(min_length=1)]
    seed: Seed
    steps: Annotated[U64, Field(le=MAX_STEPS)]
    episode_return: F64
    terminal_done: StrictBool
    termination: EpisodeTermination
    recoverable_protocol_errors: U64
    capacity_retries: U64
    model_tokens: U64
    model_latency_ms: NonNegF64
    protocol_error_code: Annotated[StrictStr, Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.terminal_done != (self.termination == "done"):
            raise ValueError("terminal_done must be true exactly when termination is 'done'")
        if (self.protocol_error_code is not None) != (self.termination == "protocol_error"):
            raise ValueError(
                "protocol_error_code must be present exactly when termination is 'protocol_error'"
            )
        return self


class RolloutStats(Record):
    """Aggregates over ``rollouts`` (the verifier recomputes them and compares exactly).

    ``min``/``max`` are required but nullable (``null`` only for an empty record list,
    which a valid summary never has).
    """

    mean_episode_return: F64
    min_episode_return: F64 | None
    max_episode_return: F64 | None
    done_count: U64
    max_steps_count: U64
    invalid_model_action_count: U64
    protocol_error_count: U64
    recoverable_protocol_error_count: U64
    capacity_retry_count: U64
    total_environment_steps: U64
    total_model_tokens: U64
    mean_model_latency_ms: NonNegF64


class TrainingSelection(Record):
    """What a train flow submitted to GRPO out of the diagnostic collection (§5.7)."""

    _omit_when_none = frozenset({"warnings"})

    groups_submitted: _Count
    rollouts_submitted: _Count
    no_output_rollouts_discarded: _Count
    no_usable_output_groups_skipped: _Count
    no_reward_gradient_groups_skipped: _Count
    warnings: list[Annotated[StrictStr, Field(min_length=1)]] | None = None


class TrainingContract(Record):
    """``kiln.openenv-training-contract.v1`` (control-plane schema), as far as we check it.

    ``effective_config`` is Kiln's full ``GrpoConfig``; it is kept as an open object in the
    order it was read (not sorted: it is a typed Rust struct whose order we do not model).
    Only the keys the verifier checks are validated (see :func:`check_version_rules`).
    """

    _omit_when_none = frozenset({"post_eval", "behavior_policy"})

    schema_: Literal["kiln.openenv-training-contract.v1"] = Field(
        TRAINING_CONTRACT_SCHEMA, alias="schema"
    )
    effective_config: dict[str, Any]
    post_eval: dict[str, Any] | None = None
    behavior_policy: BehaviorPolicyIdentity | None = None


class RolloutSummary(Record):
    """The receipt; key order is Kiln's struct order (optional keys omitted when absent)."""

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": {"required": ["training_submission"]},
                    "then": {"required": ["training_contract"]},
                }
            ]
        }
    )

    _omit_when_none = frozenset(
        {
            "behavior_policy",
            "thinking_budget_tokens",
            "reset_options_sha256",
            "reset_plan_sha256",
            "training_selection",
            "training_contract",
            "training_submission",
        }
    )

    schema_: SummaryVersion = Field(SUMMARY_SCHEMA, alias="schema")
    kiln_url: Annotated[StrictStr, Field(min_length=1)]
    adapter: StrictStr | None
    adapter_label: Annotated[StrictStr, Field(min_length=1)]
    behavior_policy: BehaviorPolicyIdentity | None = None
    environments: list[EnvironmentInspection] = Field(min_length=1, max_length=MAX_ENVIRONMENTS)
    groups: Annotated[U64, Field(ge=1, le=MAX_GROUPS)]
    group_size: Annotated[U64, Field(ge=1, le=MAX_GROUP_SIZE)]
    rollout_count: Annotated[U64, Field(ge=1, le=MAX_ROLLOUTS)]
    seed_start: Seed
    max_steps: Annotated[U64, Field(ge=1, le=MAX_STEPS)]
    concurrency: Annotated[U64, Field(ge=1, le=MAX_CONCURRENCY)]
    max_action_tokens: Annotated[U64, Field(ge=1, le=MAX_ACTION_TOKENS)]
    thinking_budget_tokens: Annotated[U64, Field(le=MAX_ACTION_TOKENS - 1)] | None = None
    temperature: NonNegF64
    thinking: StrictBool
    protocol_error_reward: F64
    max_recoverable_errors: Annotated[U64, Field(le=MAX_RECOVERABLE_ERRORS)]
    capacity_wait_seconds: Annotated[U64, Field(ge=1, le=int(MAX_CAPACITY_WAIT_S))]
    reset_options_sha256: Sha256 | None = None
    reset_plan_sha256: Sha256 | None = None
    output_path: Annotated[StrictStr, Field(min_length=1)]
    replay_output_path: Annotated[StrictStr, Field(min_length=1)]
    summary_output_path: Annotated[StrictStr, Field(min_length=1)]
    dataset_sha256: Sha256
    dataset_bytes: Annotated[U64, Field(ge=1, le=MAX_OPENENV_DATASET_BYTES)]
    replay_sha256: Sha256
    replay_bytes: Annotated[U64, Field(ge=1, le=MAX_OPENENV_REPLAY_BYTES)]
    stats: RolloutStats
    rollouts: list[RolloutRecord] = Field(min_length=1, max_length=MAX_ROLLOUTS)
    training_selection: TrainingSelection | None = None
    training_contract: TrainingContract | None = None
    training_submission: FreeJson = None

    @model_validator(mode="after")
    def _budget_needs_thinking(self) -> Self:
        if self.thinking_budget_tokens is not None:
            if not self.thinking:
                raise ValueError("thinking_budget_tokens requires thinking = true")
            if self.thinking_budget_tokens >= self.max_action_tokens:
                raise ValueError("thinking_budget_tokens must be below max_action_tokens")
        if self.training_submission is not None and not isinstance(self.training_submission, dict):
            raise ValueError("training_submission must be a JSON object")
        return self

    @property
    def version(self) -> int:
        """The receipt version number (2..5)."""
        return int(self.schema_.rsplit(".v", 1)[1])


def check_version_rules(summary: RolloutSummary, source: str | None = None) -> None:
    """Apply §2.6's per-version field rules; raise ``summary_version_conflict``."""
    version = summary.version

    def conflict(rule: str) -> SummaryVersionConflict:
        return SummaryVersionConflict(f"rollout summary v{version}: {rule}", path=source)

    if version == 2:
        if summary.reset_options_sha256 is None:
            raise conflict("reset_options_sha256 is required")
        if summary.reset_plan_sha256 is not None:
            raise conflict("reset_plan_sha256 is not allowed")
    else:
        if summary.reset_plan_sha256 is None:
            raise conflict("reset_plan_sha256 is required")
        if summary.reset_options_sha256 is not None:
            raise conflict("reset_options_sha256 is not allowed (v2 only)")
    if version <= 3 and summary.training_contract is not None:
        raise conflict("training_contract is not allowed before v4")
    if summary.training_submission is not None and summary.training_contract is None:
        raise conflict("training_submission requires training_contract")
    if version == 5:
        if summary.behavior_policy is None:
            raise conflict("behavior_policy is required")
        if summary.adapter is not None:
            adapter = summary.behavior_policy.adapter
            if adapter is None or adapter.name != summary.adapter:
                raise conflict("behavior_policy.adapter.name must equal adapter")
    elif summary.behavior_policy is not None:
        raise conflict("behavior_policy is only allowed in v5")
    contract = summary.training_contract
    if contract is not None:
        config = contract.effective_config
        if config.get("behavior_policy") != "no_importance_correction":
            raise conflict(
                "training_contract.effective_config.behavior_policy must be "
                "'no_importance_correction'"
            )
        if config.get("base_adapter") != summary.adapter:
            raise conflict("training_contract.effective_config.base_adapter must equal adapter")
        output_name = config.get("output_name")
        if not isinstance(output_name, str) or not output_name:
            raise conflict("training_contract.effective_config.output_name must be non-empty")
        if (
            version == 5
            and contract.behavior_policy is not None
            and contract.behavior_policy != summary.behavior_policy
        ):
            raise conflict("training_contract.behavior_policy must equal behavior_policy")


def read_summary(data: bytes, source: str | None = None) -> RolloutSummary:
    """Parse a receipt: strict JSON (≤ ``MAX_OPENENV_SUMMARY_BYTES``), version, record, rules.

    Errors: ``json_*``/``limit_exceeded``; ``summary_version_unsupported`` (v1, unknown);
    ``record_invalid`` with the JSON path; ``summary_version_conflict`` (§2.6 rules).
    """
    value = loads_object(data, max_bytes=MAX_OPENENV_SUMMARY_BYTES, source=source)
    schema = value.get("schema")
    if schema not in SUMMARY_VERSIONS:
        raise SummaryVersionUnsupported(
            "rollout summary schema is not one of kiln.openenv-rollout-summary.v2..v5",
            path=source,
        )
    summary = validate_record(RolloutSummary, value, source=source)
    check_version_rules(summary, source)
    return summary


def relabel_as_v2(summary: RolloutSummary, reset_options_sha256: str) -> RolloutSummary:
    """The §2.6 relabelling of a v5 receipt as v2 (used to test legacy acceptance)."""
    data = summary.to_json()
    data["schema"] = "kiln.openenv-rollout-summary.v2"
    for key in ("reset_plan_sha256", "training_contract", "training_submission", "behavior_policy"):
        data.pop(key, None)
    data["reset_options_sha256"] = reset_options_sha256
    return validate_record(RolloutSummary, data)
