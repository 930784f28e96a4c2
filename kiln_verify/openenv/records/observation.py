"""What an environment answered: recorded observations, protocol errors, terminations.

An observation is recorded with the tagged reward of :mod:`kiln_verify.openenv.protocol.wire`
(null, bool, integer and float stay distinct: ``1`` is not ``1.0``), and an OpenEnv error
reply with its whole ``data`` object; rollouts, replay manifests and summaries embed both.
``EpisodeTermination`` and its JSON Schema conditionals say how an episode ended.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Final, Literal

from pydantic import PlainSerializer, PlainValidator, StrictBool, StrictStr, WithJsonSchema

from kiln_verify.errors import KilnError
from kiln_verify.openenv.protocol.wire import ErrorCode, Observation, ProtocolError, Reward
from kiln_verify.records import I64_MAX, U64, FreeJson, Record

__all__ = [
    "TERMINATION_RULES",
    "EpisodeTermination",
    "ObservationRecord",
    "ProtocolErrorCode",
    "ProtocolErrorRecord",
    "RewardValue",
]


def _reward(value: Any) -> Reward:
    if isinstance(value, Reward):
        return value
    if type(value) is int and not -(2**63) <= value <= I64_MAX:
        raise ValueError("an integer reward must fit an i64")
    if type(value) is float and not math.isfinite(value):
        raise ValueError("a float reward must be finite")
    try:
        return Reward.from_json(value)
    except KilnError:
        raise ValueError("must be null, a boolean, an integer or a float") from None


RewardValue = Annotated[
    Reward,
    PlainValidator(_reward),
    PlainSerializer(lambda reward: reward.to_json()),
    WithJsonSchema({"type": ["null", "boolean", "integer", "number"]}),
]
"""The tagged reward of :mod:`~kiln_verify.openenv.protocol.wire`: ``1`` and ``1.0`` differ."""


ProtocolErrorCode = Literal[
    "INVALID_JSON",
    "UNKNOWN_TYPE",
    "VALIDATION_ERROR",
    "EXECUTION_ERROR",
    "CAPACITY_REACHED",
    "FACTORY_ERROR",
    "SESSION_ERROR",
]

EpisodeTermination = Literal["done", "max_steps", "invalid_model_action", "protocol_error"]

TERMINATION_RULES: Final[dict[str, Any]] = {
    "allOf": [
        {
            "if": {"properties": {"termination": {"const": "done"}}},
            "then": {"properties": {"terminal_done": {"const": True}}},
            "else": {"properties": {"terminal_done": {"const": False}}},
        },
        {
            "if": {"properties": {"termination": {"const": "protocol_error"}}},
            "then": {"required": ["protocol_error_code"]},
            "else": {"not": {"required": ["protocol_error_code"]}},
        },
    ]
}
"""JSON Schema conditionals: ``terminal_done`` ⇔ done; ``protocol_error_code`` ⇔ protocol_error."""


class ProtocolErrorRecord(Record):
    """A recorded OpenEnv error reply (the whole ``data`` object, optional keys omitted)."""

    _omit_when_none = frozenset({"errors", "active_sessions", "max_sessions", "factory_name"})

    code: ProtocolErrorCode
    message: StrictStr
    errors: list[FreeJson] | None = None
    active_sessions: U64 | None = None
    max_sessions: U64 | None = None
    factory_name: StrictStr | None = None

    @property
    def recoverable(self) -> bool:
        return not ErrorCode(self.code).is_terminal

    @classmethod
    def from_wire(cls, error: ProtocolError) -> ProtocolErrorRecord:
        """Record an error reply decoded by :mod:`kiln_verify.openenv.protocol.wire`."""
        return cls(
            code=error.code.value,
            message=error.message,
            errors=error.errors,
            active_sessions=error.active_sessions,
            max_sessions=error.max_sessions,
            factory_name=error.factory_name,
        )


class ObservationRecord(Record):
    """A recorded observation: payload, tagged reward, done, optional metadata.

    ``observation`` and ``metadata`` are free-form (written with sorted keys).
    """

    _omit_when_none = frozenset({"metadata"})

    observation: FreeJson
    reward: RewardValue
    done: StrictBool
    metadata: FreeJson = None

    @classmethod
    def from_wire(cls, observation: Observation) -> ObservationRecord:
        """Record an observation decoded by :mod:`kiln_verify.openenv.protocol.wire` (tag kept)."""
        return cls(
            observation=observation.observation,
            reward=observation.reward,
            done=observation.done,
            metadata=observation.metadata,
        )
