"""The training corpus ``openenv.rollouts.jsonl`` (kiln-openenv-contract §3).

One line per GRPO group: :class:`AgenticGroup` = shared prompt ``messages`` plus one
:class:`ScoredRollout` per candidate (position = ``candidate_index``). Every completion
carries fail-closed ``kiln.openenv-rollout.v1`` provenance (:class:`OpenEnvRolloutProvenance`).

Read with :func:`iter_rollout_lines` (streaming, 1-based line numbers in every error);
write with :func:`kiln_verify.openenv.records.serialize.rollout_line_bytes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Annotated, Any, Final, Literal, NamedTuple, Self

from pydantic import AliasChoices, ConfigDict, Field, StrictStr, model_validator

from kiln_verify.core.jsonio import iter_jsonl, iter_lines
from kiln_verify.errors import RecordSchemaUnsupported
from kiln_verify.limits import MAX_OPENENV_DATASET_BYTES, MAX_RECORD_URL_BYTES, MAX_STEPS
from kiln_verify.openenv.records.observation import TERMINATION_RULES, EpisodeTermination
from kiln_verify.records import (
    F64,
    U64,
    BehaviorPolicyIdentity,
    ChatMessage,
    IdentityText,
    Record,
    Seed,
    Sha256,
    TurnSegment,
    bits_equal,
    validate_record,
)

__all__ = [
    "ROLLOUT_SCHEMA",
    "TURN_BREAK",
    "AgenticGroup",
    "OpenEnvRolloutProvenance",
    "RolloutLine",
    "ScoredRollout",
    "iter_rollout_lines",
]

ROLLOUT_SCHEMA: Final = "kiln.openenv-rollout.v1"
TURN_BREAK: Final = "<TURN_BREAK>"
"""Separator between action-segment contents in :attr:`ScoredRollout.text`."""


class OpenEnvRolloutProvenance(Record):
    """``kiln.openenv-rollout.v1``: which environment, reset and policy produced a rollout.

    Invariants checked on construction: ``terminal_done`` ⇔ ``termination == "done"``;
    ``protocol_error_code`` present ⇔ ``termination == "protocol_error"``.
    """

    model_config = ConfigDict(json_schema_extra=TERMINATION_RULES)

    _omit_when_none = frozenset(
        {"openapi_version", "discovery_sha256", "behavior_policy", "protocol_error_code"}
    )

    schema_: Literal["kiln.openenv-rollout.v1"] = Field(ROLLOUT_SCHEMA, alias="schema")
    environment_name: IdentityText
    environment_base_url: Annotated[StrictStr, Field(min_length=1, max_length=MAX_RECORD_URL_BYTES)]
    openapi_version: IdentityText | None = None
    discovery_sha256: Sha256 | None = None
    environment_schema_sha256: Sha256
    action_schema_sha256: Sha256
    behavior_policy: BehaviorPolicyIdentity | None = None
    reset_sha256: Sha256
    seed: Seed
    steps: Annotated[U64, Field(le=MAX_STEPS)]
    episode_return: F64
    terminal_done: bool
    termination: EpisodeTermination
    protocol_error_code: IdentityText | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.terminal_done != (self.termination == "done"):
            raise ValueError("terminal_done must be true exactly when termination is 'done'")
        if (self.protocol_error_code is not None) != (self.termination == "protocol_error"):
            raise ValueError(
                "protocol_error_code must be present exactly when termination is 'protocol_error'"
            )
        if len(self.environment_base_url.encode("utf-8")) > MAX_RECORD_URL_BYTES:
            raise ValueError(f"environment_base_url exceeds {MAX_RECORD_URL_BYTES} bytes")
        return self


class ScoredRollout(Record):
    """One candidate: action text, reward (= episode return, bit-exact), trajectory, provenance.

    Kiln's token-level ``provenance`` key is never emitted for OpenEnv rollouts and is
    refused here; ``openenv`` is required (an OpenEnv corpus never mixes in plain rows).
    """

    text: StrictStr
    reward: F64
    trajectory: list[TurnSegment] = Field(min_length=1)
    openenv: OpenEnvRolloutProvenance

    @model_validator(mode="after")
    def _reward_is_return(self) -> Self:
        if not bits_equal(self.reward, self.openenv.episode_return):
            raise ValueError("reward must equal openenv.episode_return bit for bit")
        return self

    def action_contents(self) -> list[str]:
        return [segment.content for segment in self.trajectory if segment.kind == "action"]


class AgenticGroup(Record):
    """One JSONL line: a GRPO group of candidates sharing one prompt.

    ``completions`` may be spelled ``rollouts`` on input (Kiln's alias); it is always
    written as ``completions``.
    """

    messages: list[ChatMessage] = Field(min_length=1)
    completions: list[ScoredRollout] = Field(
        min_length=1, validation_alias=AliasChoices("completions", "rollouts")
    )


class RolloutLine(NamedTuple):
    """One parsed corpus line: 1-based number, the raw bytes (without LF), the group."""

    number: int
    raw: bytes
    group: AgenticGroup


def _check_schema_strings(value: Any, line: int, source: str | None) -> None:
    """Name an unknown provenance version as such rather than as a shape error."""
    if not isinstance(value, dict):
        return
    completions = value.get("completions", value.get("rollouts"))
    if not isinstance(completions, list):
        return
    for completion in completions:
        if isinstance(completion, dict) and isinstance(completion.get("openenv"), dict):
            schema = completion["openenv"].get("schema")
            if isinstance(schema, str) and schema != ROLLOUT_SCHEMA:
                raise RecordSchemaUnsupported(
                    f"rollout provenance schema is not {ROLLOUT_SCHEMA}", path=source, line=line
                )


def iter_rollout_lines(
    stream: IO[bytes],
    source: str | None = None,
    *,
    max_line_bytes: int = MAX_OPENENV_DATASET_BYTES,
) -> Iterator[RolloutLine]:
    """Stream-parse a rollout corpus: strict JSON per LF-terminated line, then the record.

    Errors carry ``source`` and the 1-based line: JSON errors keep their ``json_*`` codes,
    shape errors are ``record_invalid``, an unknown provenance version is
    ``record_schema_unsupported``. Whether the file has at least one line is the caller's
    check (the verifier requires one).
    """
    lines = iter_lines(stream, max_line_bytes=max_line_bytes, source=source)
    for parsed in iter_jsonl(lines, max_line_bytes=max_line_bytes, source=source):
        _check_schema_strings(parsed.value, parsed.number, source)
        group = validate_record(AgenticGroup, parsed.value, source=source, line=parsed.number)
        yield RolloutLine(parsed.number, parsed.raw, group)
