"""Recorded-GRPO rows: ``GrpoGroup`` with ``kiln.rollout-provenance.v1`` (§4.7).

A GRPO row has the shape of the OpenEnv corpus line (``AgenticGroup`` of
``kiln_verify.openenv.records.rollout``): the prompt ``messages`` and a list of scored
``completions``. It uses the same :class:`ChatMessage`, :class:`TurnSegment` and
:class:`BehaviorPolicyIdentity` (all from :mod:`kiln_verify.records`), but has its own
completion type: an OpenEnv completion requires ``openenv`` environment provenance and
refuses Kiln's token-level ``provenance`` key, whereas an HF/TRL completion is exactly the
opposite (``provenance`` required, no ``openenv``; the trajectory is optional and omitted
when empty). Subclassing ``AgenticGroup`` would have to narrow ``completions`` to an
unrelated element type, so the group is a sibling record with the same field names, order
and ``rollouts`` input alias.

Checked on construction, per completion: every rule of ``RolloutProvenanceV1::validate``
(bounds, ordered action positions inside the completion, token ids matching the sequence,
sampled log-probabilities finite and ``<= 1e-6``, forced tokens only with a thinking budget
and only its close tokens, at least one sampled token), full coverage of the completion
positions when there is no trajectory, and the recomputed ``scored_payload_sha256``; per
group: 2..1024 completions, the recomputed ``prompt_messages_sha256`` and one behaviour
policy. Export-level checks (uniform width, identities equal to the export's model) are
the corpus verifier's.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final, Literal, Self

from pydantic import AliasChoices, Field, PlainValidator, StrictStr, WithJsonSchema, model_validator

from kiln_verify.core.jsonio import dumps_canonical
from kiln_verify.hf.digests import prompt_messages_digest, scored_payload_digest
from kiln_verify.hf.manifest.fields import U32, U64, PositiveU64, Sha256
from kiln_verify.limits import (
    MAX_GENERATION_BACKEND_BYTES,
    MAX_GROUP_COMPLETIONS,
    MAX_ROLLOUT_TOKENS,
    MAX_STOP_BYTES,
    MAX_STOP_SEQUENCES,
    MAX_TEMPLATE_INVOCATION_BYTES,
    MAX_TEMPLATE_ITEMS,
)
from kiln_verify.records import (
    MAX_LOGPROB,
    BehaviorPolicyIdentity,
    ChatMessage,
    FreeJson,
    FreeObject,
    Record,
    TokenProvenance,
    TurnSegment,
    sort_keys,
)

__all__ = [
    "F32",
    "ROLLOUT_PROVENANCE",
    "ActionToken",
    "GrpoCompletion",
    "GrpoGroup",
    "RolloutProvenance",
    "SamplingRecord",
    "TemplateInvocation",
    "ThinkingBudget",
    "TokenizerIdentity",
    "rollout_provenance",
]

ROLLOUT_PROVENANCE: Final = "kiln.rollout-provenance.v1"
MIN_GROUP_COMPLETIONS: Final = 2
_F32 = struct.Struct("<f")
_F32_MAX: Final = 3.4028234663852886e38


def _f32_spelling(value: float) -> str:
    """Shortest decimal that reads back as the f32 nearest to ``value``."""
    target = _F32.pack(value)
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if _F32.pack(float(text)) == target:
            return text
    raise AssertionError("9 significant digits always round-trip an f32")  # pragma: no cover


def _f32(value: Any) -> float:
    """An f32 field: a JSON float whose f64 value is the one serde writes back for the f32.

    Magnitudes outside ``[1e-5, 1e12)`` (other than zero) are refused: there Kiln's f32
    spelling may use scientific notation where ours would not, so we fail closed rather than
    accept a row we could not reproduce byte for byte.
    """
    if type(value) is not float:
        raise ValueError("must be a JSON float spelled with '.' or an exponent, not an integer")
    if not math.isfinite(value) or abs(value) > _F32_MAX:
        raise ValueError("must be a finite f32")
    if value != 0.0 and not 1e-5 <= abs(value) < 1e12:
        raise ValueError("must be 0 or have a magnitude in [1e-5, 1e12)")
    if float(_f32_spelling(value)) != value:
        raise ValueError("is not exactly representable as the shortest spelling of an f32")
    return value


F32 = Annotated[float, PlainValidator(_f32), WithJsonSchema({"type": "number"})]
"""An f32 sampling parameter, kept as the f64 of its shortest f32 spelling."""


def _reward(value: Any) -> float:
    if type(value) is not float or not math.isfinite(value) or abs(value) > _F32_MAX:
        raise ValueError("must be a finite JSON float within the f32 range")
    return value


Reward = Annotated[float, PlainValidator(_reward), WithJsonSchema({"type": "number"})]


def _logprob(value: Any) -> float | None:
    if value is None:
        return None
    if type(value) is not float or not math.isfinite(value) or abs(value) > _F32_MAX:
        raise ValueError("must be null or a finite JSON float within the f32 range")
    return value


LogProb = Annotated[
    float | None, PlainValidator(_logprob), WithJsonSchema({"type": ["number", "null"]})
]


def _short_text(limit: int) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value or value != value.strip():
            raise ValueError("must be a non-empty string without surrounding whitespace")
        if len(value.encode("utf-8", "surrogatepass")) > limit:
            raise ValueError(f"is longer than {limit} UTF-8 bytes")
        return value

    return PlainValidator(check)


class ActionToken(Record):
    """One model-chosen position: ``sampled`` (with its log-probability) or ``forced``."""

    sequence_index: U64
    token_id: U32
    source: Literal["sampled", "forced"]
    behavior_logprob: LogProb

    @model_validator(mode="after")
    def _logprob_rule(self) -> Self:
        if self.source == "sampled":
            if self.behavior_logprob is None or self.behavior_logprob > MAX_LOGPROB:
                raise ValueError("a sampled token needs a finite behavior_logprob <= 1e-6")
        elif self.behavior_logprob is not None:
            raise ValueError("a forced token has behavior_logprob null")
        return self


class TokenizerIdentity(Record):
    """Tokenizer vocabulary, tokenizer config and inference chat template digests."""

    vocab_sha256: Sha256
    config_sha256: Sha256
    chat_template_sha256: Sha256


class TemplateInvocation(Record):
    """Extra chat-template inputs; each part omitted when empty, the whole when all are."""

    _omit_when_none = frozenset({"tools", "tool_choice", "template_kwargs"})

    tools: list[FreeJson] | None = Field(None, min_length=1, max_length=MAX_TEMPLATE_ITEMS)
    tool_choice: FreeJson = None
    template_kwargs: FreeObject | None = None

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        kwargs = self.template_kwargs
        if kwargs is not None:
            if not kwargs or len(kwargs) > MAX_TEMPLATE_ITEMS:
                raise ValueError(f"template_kwargs must have 1..{MAX_TEMPLATE_ITEMS} keys")
            if any(not 1 <= len(key.encode("utf-8", "surrogatepass")) <= 256 for key in kwargs):
                raise ValueError("template_kwargs keys must have 1..256 UTF-8 bytes")
        if self.tools is None and self.tool_choice is None and kwargs is None:
            raise ValueError("an empty template_invocation must be omitted")
        if len(dumps_canonical(self.to_json())) > MAX_TEMPLATE_INVOCATION_BYTES:
            raise ValueError(f"is larger than {MAX_TEMPLATE_INVOCATION_BYTES} bytes")
        return self


class ThinkingBudget(Record):
    """A thinking budget: at least one of the two bounds and the tokens that close it."""

    _omit_when_none = frozenset({"max_tokens", "max_time_ms"})

    max_tokens: U64 | None = None
    max_time_ms: U64 | None = None
    close_token_ids: list[U32] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_bound(self) -> Self:
        if self.max_tokens is None and self.max_time_ms is None:
            raise ValueError("a thinking budget needs max_tokens or max_time_ms")
        return self


class SamplingRecord(Record):
    """The sampling parameters of one generation (f32 fields as in Kiln)."""

    _omit_when_none = frozenset({"thinking_budget"})

    temperature: Annotated[F32, Field(ge=0)]
    top_p: Annotated[F32, Field(ge=0, le=1)]
    top_k: U32
    min_p: Annotated[F32, Field(ge=0, le=1)]
    max_tokens: PositiveU64
    repetition_penalty: Annotated[F32, Field(gt=0)]
    presence_penalty: Annotated[F32, Field(ge=-2, le=2)]
    frequency_penalty: Annotated[F32, Field(ge=-2, le=2)]
    stop: list[Annotated[StrictStr, Field(min_length=1)]] = Field(max_length=MAX_STOP_SEQUENCES)
    thinking_budget: ThinkingBudget | None = None

    @model_validator(mode="after")
    def _stop_bytes(self) -> Self:
        if sum(len(text.encode("utf-8", "surrogatepass")) for text in self.stop) > MAX_STOP_BYTES:
            raise ValueError(f"stop sequences exceed {MAX_STOP_BYTES} bytes together")
        return self


class RolloutProvenance(Record):
    """``kiln.rollout-provenance.v1``: the exact tokens, policy and sampling of a completion."""

    _omit_when_none = frozenset({"template_invocation"})

    schema_: Literal["kiln.rollout-provenance.v1"] = Field(ROLLOUT_PROVENANCE, alias="schema")
    input_token_ids: list[U32] = Field(min_length=1, max_length=MAX_ROLLOUT_TOKENS)
    prompt_token_count: PositiveU64
    prompt_messages_sha256: Sha256
    scored_payload_sha256: Sha256
    action_tokens: list[ActionToken] = Field(min_length=1)
    behavior_policy: BehaviorPolicyIdentity
    tokenizer: TokenizerIdentity
    template_invocation: TemplateInvocation | None = None
    sampling: SamplingRecord
    seed: U64
    generation_backend: Annotated[str, _short_text(MAX_GENERATION_BACKEND_BYTES)]

    @model_validator(mode="after")
    def _tokens(self) -> Self:
        length = len(self.input_token_ids)
        if self.prompt_token_count > length:
            raise ValueError("prompt_token_count exceeds the number of input tokens")
        budget = self.sampling.thinking_budget
        previous = -1
        sampled = 0
        for token in self.action_tokens:
            index = token.sequence_index
            if index <= previous:
                raise ValueError("action_tokens sequence_index values must strictly increase")
            previous = index
            if not self.prompt_token_count <= index < length:
                raise ValueError("an action token lies outside the completion positions")
            if self.input_token_ids[index] != token.token_id:
                raise ValueError("an action token_id differs from input_token_ids")
            if token.source == "sampled":
                sampled += 1
            elif budget is None or token.token_id not in budget.close_token_ids:
                raise ValueError("a forced token needs a thinking budget that closes with it")
        if not sampled:
            raise ValueError("at least one action token must be sampled")
        return self

    def action_positions(self) -> list[int]:
        return [token.sequence_index for token in self.action_tokens]


class GrpoCompletion(Record):
    """One scored completion (Kiln ``ScoredRollout`` with token provenance)."""

    _omit_when_none = frozenset({"trajectory"})

    text: StrictStr
    reward: Reward
    trajectory: list[TurnSegment] | None = Field(None, min_length=1)
    provenance: RolloutProvenance

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        segments = self.trajectory or []
        for segment in segments:
            limit = segment.warning_prefix_len
            if limit is not None and limit > len(segment.content.encode("utf-8")):
                raise ValueError("warning_prefix_len exceeds the segment's content bytes")
        provenance = self.provenance
        if not segments:
            expected = list(range(provenance.prompt_token_count, len(provenance.input_token_ids)))
            if provenance.action_positions() != expected:
                raise ValueError(
                    "without a trajectory every completion position must be an action token"
                )
        if provenance.scored_payload_sha256 != str(scored_payload_digest(self.text, segments)):
            raise ValueError(
                "provenance.scored_payload_sha256 is not the digest of text/trajectory"
            )
        return self


class GrpoGroup(Record):
    """One GRPO ``train.jsonl`` row: shared prompt plus 2..1024 scored completions.

    ``completions`` may be spelled ``rollouts`` on input (Kiln's alias, never canonical).
    """

    messages: list[ChatMessage] = Field(min_length=1)
    completions: list[GrpoCompletion] = Field(
        min_length=MIN_GROUP_COMPLETIONS,
        max_length=MAX_GROUP_COMPLETIONS,
        validation_alias=AliasChoices("completions", "rollouts"),
    )

    @model_validator(mode="after")
    def _shared_identities(self) -> Self:
        prompt = str(prompt_messages_digest(self.messages))
        policy = self.completions[0].provenance.behavior_policy
        for completion in self.completions:
            if completion.provenance.prompt_messages_sha256 != prompt:
                raise ValueError("prompt_messages_sha256 is not the digest of the group messages")
            if completion.provenance.behavior_policy != policy:
                raise ValueError("all completions of a group must share one behavior_policy")
        return self


def rollout_provenance(
    token: TokenProvenance,
    *,
    messages: Sequence[ChatMessage | Mapping[str, Any]],
    text: str,
    trajectory: Sequence[TurnSegment] = (),
    behavior_policy: BehaviorPolicyIdentity,
    tokenizer: TokenizerIdentity,
    tools: Sequence[Any] = (),
    tool_choice: Any = None,
    thinking_budget: ThinkingBudget | None = None,
) -> RolloutProvenance:
    """Build the record from a :class:`~kiln_verify.records.TokenProvenance`.

    The policy knows the tokens, sampling and seed of one generation; the caller supplies
    what the row adds: the group messages and completion text/trajectory (for the two
    digests), the behaviour policy, the tokenizer identity and any tools.
    """
    data = token.to_dict()
    sampling = dict(data["sampling"])
    if thinking_budget is not None:
        sampling["thinking_budget"] = thinking_budget
    kwargs = dict(token.template_kwargs)
    invocation = None
    if tools or tool_choice is not None or kwargs:
        invocation = TemplateInvocation(
            tools=[sort_keys(tool) for tool in tools] or None,
            tool_choice=tool_choice,
            template_kwargs=kwargs or None,
        )
    return RolloutProvenance(
        schema=ROLLOUT_PROVENANCE,
        input_token_ids=data["input_token_ids"],
        prompt_token_count=data["prompt_token_count"],
        prompt_messages_sha256=str(prompt_messages_digest(messages)),
        scored_payload_sha256=str(scored_payload_digest(text, trajectory)),
        action_tokens=[ActionToken(**entry) for entry in data["action_tokens"]],
        behavior_policy=behavior_policy,
        tokenizer=tokenizer,
        template_invocation=invocation,
        sampling=SamplingRecord(**sampling),
        seed=data["seed"],
        generation_backend=data["generation_backend"],
    )
