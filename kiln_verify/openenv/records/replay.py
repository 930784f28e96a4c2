"""The exact transcript ``openenv.replay.json`` = ``kiln.openenv-replay.v1`` (contract §2.7).

For each group: environment index, seed, exact effective reset payload and reset
observation; for each candidate: the ordered action/result exchanges, the final state and
the episode outcome. Only shapes and per-record invariants are checked here; cross-record
rules (contiguous indices, return recomputation, termination vs last exchange) belong to
the offline verifier, which can use :meth:`ReplayCandidate.ended_by_terminal_code` etc.

Read with :func:`read_replay`; write with
:func:`kiln_verify.openenv.records.serialize.replay_bytes` (pretty JSON + LF).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, Self

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    model_serializer,
    model_validator,
)

from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import RecordSchemaUnsupported
from kiln_verify.limits import (
    MAX_ENVIRONMENTS,
    MAX_GROUP_SIZE,
    MAX_GROUPS,
    MAX_OPENENV_REPLAY_BYTES,
    MAX_STEPS,
)
from kiln_verify.openenv.records.environment import CLIENT_PROFILE, EnvironmentInspection
from kiln_verify.openenv.records.observation import (
    EpisodeTermination,
    ObservationRecord,
    ProtocolErrorRecord,
)
from kiln_verify.records import (
    F64,
    U64,
    FreeJson,
    FreeObject,
    NonNegF64,
    Record,
    Seed,
    Sha256,
    omit_unset,
    validate_record,
)

__all__ = [
    "REPLAY_SCHEMA",
    "ObservationResult",
    "ProtocolErrorResult",
    "ReplayCandidate",
    "ReplayExchange",
    "ReplayExchangeResult",
    "ReplayGroup",
    "ReplayManifest",
    "read_replay",
]

REPLAY_SCHEMA: Final = "kiln.openenv-replay.v1"


class ObservationResult(Record):
    """``{"kind":"observation","observation":{...}}``: the step was answered normally."""

    kind: Literal["observation"] = "observation"
    observation: ObservationRecord

    @property
    def ends_episode(self) -> bool:
        return self.observation.done


class ProtocolErrorResult(Record):
    """``{"kind":"protocol_error","error":{...},"continued":bool}``.

    ``continued`` = the episode went on on the same socket (a recoverable error within
    budget); ``false`` = this error ended the candidate.
    """

    kind: Literal["protocol_error"] = "protocol_error"
    error: ProtocolErrorRecord
    continued: StrictBool

    @model_validator(mode="after")
    def _terminal_codes_end(self) -> Self:
        if self.continued and not self.error.recoverable:
            raise ValueError("a terminal error code cannot be continued")
        return self

    @property
    def ends_episode(self) -> bool:
        return not self.continued


ReplayExchangeResult = Annotated[
    ObservationResult | ProtocolErrorResult, Field(discriminator="kind")
]


class ReplayExchange(Record):
    """One ``step``: the exact action object sent and what came back."""

    step_index: U64
    action: FreeObject
    result: ReplayExchangeResult


class ReplayCandidate(Record):
    """One candidate's transcript and outcome (struct order as Kiln writes it).

    ``final_state`` is absent exactly when the candidate ended on a terminal-code error;
    a recorded ``null`` state is a present value and is written as ``null``.
    """

    _omit_when_unset = frozenset({"final_state"})

    candidate_index: U64
    exchanges: list[ReplayExchange] = Field(max_length=MAX_STEPS)
    final_state: FreeJson = None
    episode_return: F64
    terminal_done: StrictBool
    termination: EpisodeTermination
    recoverable_protocol_errors: U64
    capacity_retries: U64
    model_tokens: U64
    model_latency_ms: NonNegF64

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.terminal_done != (self.termination == "done"):
            raise ValueError("terminal_done must be true exactly when termination is 'done'")
        return self

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        return omit_unset(self, handler)

    @property
    def has_final_state(self) -> bool:
        """Whether ``final_state`` is present (it may be present and ``null``)."""
        return "final_state" in self.model_fields_set

    @property
    def ended_by_terminal_code(self) -> bool:
        """The last exchange is a protocol error with a terminal code (no final state)."""
        if not self.exchanges:
            return False
        last = self.exchanges[-1].result
        return isinstance(last, ProtocolErrorResult) and not last.error.recoverable

    @property
    def prefix_only(self) -> bool:
        """The last model output never reached the wire (``invalid_model_action``)."""
        return self.termination == "invalid_model_action"


class ReplayGroup(Record):
    """One group: environment, seed, exact reset payload and observation, candidates."""

    group_index: U64
    environment_index: U64
    seed: Seed
    reset_payload: FreeObject
    reset_observation: ObservationRecord
    candidates: list[ReplayCandidate] = Field(min_length=1, max_length=MAX_GROUP_SIZE)


class ReplayManifest(Record):
    """``kiln.openenv-replay.v1``: the whole transcript, linked to the corpus by digest."""

    schema_: Literal["kiln.openenv-replay.v1"] = Field(REPLAY_SCHEMA, alias="schema")
    client_profile: Literal["openenv-http/1.x"] = CLIENT_PROFILE
    dataset_sha256: Sha256
    protocol_error_reward: F64
    max_steps: Annotated[U64, Field(ge=1, le=MAX_STEPS)]
    environments: list[EnvironmentInspection] = Field(min_length=1, max_length=MAX_ENVIRONMENTS)
    groups: list[ReplayGroup] = Field(min_length=1, max_length=MAX_GROUPS)

    def exchange_count(self) -> int:
        """Total exchanges over all candidates (the reports' ``environment_exchanges``)."""
        return sum(len(c.exchanges) for group in self.groups for c in group.candidates)


def read_replay(data: bytes, source: str | None = None) -> ReplayManifest:
    """Parse a replay manifest: strict JSON (≤ ``MAX_OPENENV_REPLAY_BYTES``), then the record.

    Errors: ``json_*``/``limit_exceeded`` from the parser, ``record_schema_unsupported``
    for another ``schema`` string, ``record_invalid`` with the JSON path otherwise.
    """
    value = loads_object(data, max_bytes=MAX_OPENENV_REPLAY_BYTES, source=source)
    schema = value.get("schema")
    if schema != REPLAY_SCHEMA:
        raise RecordSchemaUnsupported(f"replay manifest schema is not {REPLAY_SCHEMA}", path=source)
    return validate_record(ReplayManifest, value, source=source)
