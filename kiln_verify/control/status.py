"""The control plane's answer records: run status (``run.json``), failures, lists, inspection.

``kiln.openenv-run.v5`` status and its parts follow the published control-plane schema and
kiln-openenv-contract §10 and §12. This server writes v5 only. ``training_contract`` is
Kiln's typed ``kiln.openenv-training-contract.v1`` (:mod:`kiln_verify.control.training.records`):
required in a v5 ``kind=train`` status, absent from a v5 rollout status and from every older
version (the schema's ``allOf``). A train run's ``training`` and ``environment_evaluation``
are Kiln's typed ``OpenEnvTrainingStatus`` and ``OpenEnvEnvironmentEvalStatus``
(:mod:`kiln_verify.control.training.trainer_status`, :mod:`.evaluation_status`), read as
strictly as the rest and written in Kiln's struct order. ``training_submission`` and
``post_evaluations`` (Kiln's hand-off to an external trainer and its static suites, which this
server never writes) stay free JSON, so the control client lists a Kiln server's runs without
refusing them.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import (
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from kiln_verify.control.request import OpenEnvRunRequest, RunKind
from kiln_verify.control.training.evaluation_status import OpenEnvEnvironmentEvalStatus
from kiln_verify.control.training.records import OpenEnvTrainingContract
from kiln_verify.control.training.trainer_status import OpenEnvTrainingStatus
from kiln_verify.limits import MAX_FAILURE_HINT_BYTES, MAX_FAILURE_MESSAGE_BYTES, MAX_TASK_PAGE
from kiln_verify.openenv.records.environment import EnvironmentIdentityRecord, EnvironmentInspection
from kiln_verify.openenv.records.observation import ProtocolErrorCode
from kiln_verify.openenv.records.summary import RolloutStats
from kiln_verify.records import U64, FreeJson, Record, Sha256

__all__ = [
    "ARTIFACT_KINDS",
    "FAILURE_CODES",
    "FAILURE_SCHEMA",
    "FAILURE_STAGES",
    "INSPECTION_SCHEMA",
    "RUN_LIST_SCHEMA",
    "RUN_SCHEMA",
    "RUN_STATES",
    "TASK_CATALOG_SCHEMA",
    "TERMINAL_STATES",
    "ApiErrorBody",
    "ApiErrorDetail",
    "ArtifactKind",
    "FailureCode",
    "FailureStage",
    "InspectResponse",
    "OpenEnvRunStatus",
    "RunAdmission",
    "RunArtifact",
    "RunFailure",
    "RunList",
    "RunProgress",
    "RunState",
    "TaskCatalogEntry",
    "TaskCatalogRecord",
    "TaskCatalogResponse",
    "TaskSplitRecord",
]

RUN_SCHEMA: Final = "kiln.openenv-run.v5"
RUN_LIST_SCHEMA: Final = "kiln.openenv-run-list.v5"
FAILURE_SCHEMA: Final = "kiln.openenv-run-failure.v1"
INSPECTION_SCHEMA: Final = "kiln.openenv-inspection.v1"
TASK_CATALOG_SCHEMA: Final = "kiln.openenv-task-catalog.v1"

RunState = Literal[
    "queued",
    "discovering",
    "collecting",
    "revalidating",
    "submitting",
    "rollout_ready",
    "training_queued",
    "training_running",
    "post_evaluating",
    "environment_evaluating",
    "completed",
    "failed",
    "cancelled",
]
RUN_STATES: Final[tuple[str, ...]] = RunState.__args__  # type: ignore[attr-defined]
TERMINAL_STATES: Final = frozenset({"rollout_ready", "completed", "failed", "cancelled"})
"""States a run never leaves (``rollout_ready`` ends a ``kind=rollout`` run)."""

FailureStage = Literal[
    "restoration",
    "admission",
    "discovery",
    "collection",
    "identity_verification",
    "artifact_publication",
    "training_submission",
    "training",
    "post_evaluation",
    "environment_evaluation",
    "orchestration",
]
FAILURE_STAGES: Final[tuple[str, ...]] = FailureStage.__args__  # type: ignore[attr-defined]

FailureCode = Literal[
    "run_admission_failed",
    "run_interrupted",
    "persisted_contract_invalid",
    "environment_unavailable",
    "environment_capacity_exhausted",
    "environment_protocol_error",
    "environment_identity_changed",
    "collection_failed",
    "artifact_publication_failed",
    "training_submission_failed",
    "training_failed",
    "training_evidence_invalid",
    "post_evaluation_failed",
    "environment_evaluation_failed",
    "internal_error",
]
FAILURE_CODES: Final[tuple[str, ...]] = FailureCode.__args__  # type: ignore[attr-defined]

ArtifactKind = Literal[
    "dataset",
    "replay",
    "summary",
    "train_receipt",
    "adapter_manifest",
    "environment_eval_baseline_dataset",
    "environment_eval_baseline_replay",
    "environment_eval_baseline_summary",
    "environment_eval_candidate_dataset",
    "environment_eval_candidate_replay",
    "environment_eval_candidate_summary",
    "environment_eval_receipt",
]
ARTIFACT_KINDS: Final[tuple[str, ...]] = ArtifactKind.__args__  # type: ignore[attr-defined]

_Positive = Annotated[StrictInt, Field(ge=1, le=2**64 - 1)]
_Text = Annotated[StrictStr, Field(min_length=1)]


def _utf8_at_most(limit: int) -> Any:
    def check(value: str) -> str:
        if len(value.encode("utf-8", "surrogatepass")) > limit:
            raise ValueError(f"is longer than {limit} UTF-8 bytes")
        return value

    return check


def _empty_to_none(value: list[Any] | None) -> list[Any] | None:
    return value or None


def _when(schemas: list[str], kind: str | None, then: dict[str, JsonValue]) -> JsonValue:
    required: list[JsonValue] = ["schema", "kind"] if kind is not None else ["schema"]
    enum: list[JsonValue] = list(schemas)
    properties: dict[str, JsonValue] = {"schema": {"enum": enum}}
    if kind is not None:
        properties["kind"] = {"const": kind}
    return {"if": {"required": required, "properties": properties}, "then": then}


_NO_CONTRACT: Final[dict[str, JsonValue]] = {"not": {"required": ["training_contract"]}}
_CONTRACT_RULES: Final[list[JsonValue]] = [
    _when([RUN_SCHEMA], "train", {"required": ["training_contract"]}),
    _when([RUN_SCHEMA], "rollout", _NO_CONTRACT),
    _when([f"kiln.openenv-run.v{n}" for n in range(1, 5)], None, _NO_CONTRACT),
]
"""Kiln's ``allOf``: the sealed contract belongs to v5 train runs only."""


class RunFailure(Record):
    """``kiln.openenv-run-failure.v1``: the typed diagnosis of a failed run (§10)."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"protocol_code", "http_status"})

    schema_: Literal["kiln.openenv-run-failure.v1"] = Field(FAILURE_SCHEMA, alias="schema")
    code: FailureCode
    stage: FailureStage
    retryable: StrictBool
    message: StrictStr
    hint: StrictStr
    occurred_unix_ms: U64
    protocol_code: ProtocolErrorCode | None = None
    http_status: Annotated[StrictInt, Field(ge=100, le=599)] | None = None

    _message = field_validator("message")(_utf8_at_most(MAX_FAILURE_MESSAGE_BYTES))
    _hint = field_validator("hint")(_utf8_at_most(MAX_FAILURE_HINT_BYTES))


class RunAdmission(Record):
    """Bounded FIFO admission: the stable ``sequence``; ``queue_position`` only while queued."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {"queue_position", "admitted_unix_ms", "queue_wait_ms"}
    )

    max_active_runs: _Positive
    sequence: _Positive
    queue_position: _Positive | None = None
    admitted_unix_ms: U64 | None = None
    queue_wait_ms: U64 | None = None


class RunProgress(Record):
    """Groups and rollouts finished so far out of the request's totals."""

    groups_completed: U64
    groups_total: _Positive
    rollouts_completed: U64
    rollouts_total: _Positive


class RunArtifact(Record):
    """One published file: its kind, relative download URL, digest and byte count."""

    kind: ArtifactKind
    url: _Text
    sha256: Sha256
    bytes: U64


class OpenEnvRunStatus(Record):
    """``kiln.openenv-run.v5`` (reads v1..v5): what ``run.json`` and the status route hold."""

    model_config = ConfigDict(json_schema_extra={"allOf": _CONTRACT_RULES})

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {
            "admission",
            "finished_unix_ms",
            "rollout_stats",
            "environments",
            "artifacts",
            "training_job_id",
            "training_contract",
            "training_submission",
            "training",
            "post_evaluations",
            "warnings",
            "environment_evaluation",
            "failure",
            "error",
        }
    )

    schema_: Literal[
        "kiln.openenv-run.v1",
        "kiln.openenv-run.v2",
        "kiln.openenv-run.v3",
        "kiln.openenv-run.v4",
        "kiln.openenv-run.v5",
    ] = Field(RUN_SCHEMA, alias="schema")
    run_id: _Text
    kind: RunKind
    state: RunState
    request: OpenEnvRunRequest
    submitted_unix_ms: U64
    admission: RunAdmission | None = None
    finished_unix_ms: U64 | None = None
    progress: RunProgress
    rollout_stats: RolloutStats | None = None
    environments: list[EnvironmentIdentityRecord] | None = None
    artifacts: list[RunArtifact] | None = None
    training_job_id: StrictStr | None = None
    training_contract: OpenEnvTrainingContract | None = None
    training_submission: FreeJson | None = None
    training: OpenEnvTrainingStatus | None = None
    post_evaluations: list[FreeJson] | None = None
    warnings: list[StrictStr] | None = None
    environment_evaluation: OpenEnvEnvironmentEvalStatus | None = None
    failure: RunFailure | None = None
    error: StrictStr | None = None

    @field_validator("environments", "artifacts", "post_evaluations", "warnings", mode="after")
    @classmethod
    def _no_empty_list(cls, value: list[Any] | None) -> list[Any] | None:
        return _empty_to_none(value)

    @model_validator(mode="after")
    def _admission_rules(self) -> OpenEnvRunStatus:
        if self.schema_ in ("kiln.openenv-run.v4", "kiln.openenv-run.v5"):
            if self.admission is None:
                raise ValueError("v4/v5 status must include admission")
            if self.state == "queued" and self.admission.queue_position is None:
                raise ValueError("a queued v4/v5 status must include admission.queue_position")
        if self.kind != self.request.kind:
            raise ValueError("kind must equal request.kind")
        sealed = self.training_contract is not None
        if self.schema_ != RUN_SCHEMA and sealed:
            raise ValueError("training_contract is a v5 field (v1..v4 status predates it)")
        if self.schema_ == RUN_SCHEMA and sealed != (self.kind == "train"):
            raise ValueError(
                "a v5 train status carries training_contract; a v5 rollout status never does"
            )
        return self

    @property
    def terminal(self) -> bool:
        """Whether the run can never change again (v1's ``training_queued`` hand-off too)."""
        return self.state in TERMINAL_STATES or (
            self.schema_ == "kiln.openenv-run.v1" and self.state == "training_queued"
        )

    def artifact(self, kind: str) -> RunArtifact | None:
        """The manifest entry with exactly this ``kind``, if the run published one."""
        for item in self.artifacts or ():
            if item.kind == kind:
                return item
        return None


class RunList(Record):
    """``GET /v1/openenv/runs``: the retained runs, newest first."""

    schema_: Literal["kiln.openenv-run-list.v5"] = Field(RUN_LIST_SCHEMA, alias="schema")
    runs: list[OpenEnvRunStatus]


class InspectResponse(Record):
    """``kiln.openenv-inspection.v1``: one identity and schema set per requested URL."""

    schema_: Literal["kiln.openenv-inspection.v1"] = Field(INSPECTION_SCHEMA, alias="schema")
    environments: Annotated[list[EnvironmentInspection], Field(min_length=1)]


class TaskSplitRecord(Record):
    """One provider-authored split; unknown provider fields are preserved as sent. ``type``
    is required, as in Kiln's ``OpenEnvTaskSplit``."""

    model_config = Record.model_config | {"extra": "allow"}

    name: _Text
    type: _Text


class TaskCatalogRecord(Record):
    """A bounded Task API catalog (task rows are untrusted data, never reset payloads)."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {"selected_split", "num_tasks", "start", "stop", "tasks"}
    )

    environment_name: _Text
    task_api: Literal["available", "unsupported"]
    splits: list[TaskSplitRecord]
    selected_split: _Text | None = None
    num_tasks: U64 | None = None
    start: U64 | None = None
    stop: U64 | None = None
    tasks: Annotated[list[FreeJson], Field(max_length=MAX_TASK_PAGE)] | None = None


class TaskCatalogEntry(Record):
    """One environment's canonical base URL and its catalog."""

    base_url: _Text
    catalog: TaskCatalogRecord


class TaskCatalogResponse(Record):
    """``kiln.openenv-task-catalog.v1``: one catalog entry per requested URL."""

    schema_: Literal["kiln.openenv-task-catalog.v1"] = Field(TASK_CATALOG_SCHEMA, alias="schema")
    catalogs: Annotated[list[TaskCatalogEntry], Field(min_length=1)]


class ApiErrorDetail(Record):
    """A refused request: the stable ``code``, what broke and how to fix it."""

    code: _Text
    message: StrictStr
    hint: StrictStr


class ApiErrorBody(Record):
    """Every non-2xx JSON answer of the control plane: ``{"error": {...}}``."""

    error: ApiErrorDetail
