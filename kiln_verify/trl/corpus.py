"""The recorded-GRPO rows of a TRL tool-calling batch, from exactly what TRL generated.

One group of ``num_generations`` consecutive completions is one ``GrpoGroup`` row
(kiln-hf-trl-contract §4.7). Per completion:

* ``messages``: the prompt TRL rendered (the row's prompt with the reset text appended),
  identical across the group; ``template_invocation.tools``: the action tool's JSON schema
  as TRL passed it to the template, plus TRL's ``chat_template_kwargs``;
* ``input_token_ids``: TRL's prompt ids then its completion ids (generated tokens and the
  tool-result tokens TRL spliced in); ``action_tokens``: every position TRL's ``tool_mask``
  marks 1, ``sampled``, with the behaviour log-probability the recorder captured;
* ``trajectory``: each maximal run of sampled tokens is one action segment whose content is
  the run decoded (its stop token dropped), and TRL's tool messages between two runs are the
  observation segments, so the stream re-derives under kiln-verify's token-stream rule
  (docs/hf-contract.md); ``text`` is the ``<TURN_BREAK>``-join of the actions;
* ``reward``: the reward TRL trained with (its weighted sum of reward functions).

Every row is re-rendered with the exported tokenizer and template before it is kept (the
``hf verify`` check), so a batch the exporter would refuse fails here, with the rule's code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kiln_verify.core.jsonio import loads
from kiln_verify.errors import KilnError, TokenStreamError, TrlRecordingFailed
from kiln_verify.hf.digests import prompt_messages_digest, scored_payload_digest
from kiln_verify.hf.manifest import GrpoGroup, grpo_row_bytes
from kiln_verify.hf.manifest.grpo import ROLLOUT_PROVENANCE, GrpoCompletion
from kiln_verify.hf.rerender import TokenRerender
from kiln_verify.limits import MAX_GRPO_ROW_BYTES
from kiln_verify.openenv.records.rollout import TURN_BREAK
from kiln_verify.records import BehaviorPolicyIdentity, ChatMessage, TurnSegment
from kiln_verify.tokens import TokenCodec

__all__ = ["TrlCompletion", "grpo_rows"]


@dataclass(frozen=True, slots=True)
class TrlCompletion:
    """One completion of TRL's batch, as the recorder captured it."""

    messages: list[dict[str, Any]]
    prompt_ids: list[int]
    completion_ids: list[int]
    tool_mask: list[int]
    logprobs: list[float]
    turns: list[dict[str, Any]]
    reward: float
    seed: int


def _runs(mask: Sequence[int]) -> list[tuple[int, int, int]]:
    """``(value, start, end)`` of each maximal run of equal mask values."""
    runs: list[tuple[int, int, int]] = []
    start = 0
    for index in range(1, len(mask) + 1):
        if index == len(mask) or mask[index] != mask[start]:
            runs.append((mask[start], start, index))
            start = index
    return runs


def _trajectory(
    completion: TrlCompletion, codec: TokenCodec, stop_ids: frozenset[int]
) -> list[TurnSegment]:
    actions = [(a, b) for value, a, b in _runs(completion.tool_mask) if value == 1]
    tools = [m for m in completion.turns if m.get("role") == "tool"]
    replies = [m for m in completion.turns if m.get("role") == "assistant"]
    if len(replies) != len(actions):
        raise ValueError(f"{len(replies)} assistant turns for {len(actions)} sampled runs")
    segments: list[TurnSegment] = []
    tool_index = 0
    for turn in completion.turns:
        role = turn.get("role")
        if role == "assistant":
            start, end = actions.pop(0)
            ids = completion.completion_ids[start:end]
            if ids and ids[-1] in stop_ids:
                ids = ids[:-1]
            segments.append(TurnSegment.action(codec.decode(ids)))
        elif role == "tool":
            content = tools[tool_index].get("content")
            tool_index += 1
            if not isinstance(content, str):
                raise ValueError("a tool result is not text")
            segments.append(TurnSegment.observation(content))
        else:
            raise ValueError(f"TRL's completion holds a {str(role)[:20]!r} turn")
    return segments


def _completion(
    completion: TrlCompletion,
    *,
    codec: TokenCodec,
    stop_ids: frozenset[int],
    behavior: BehaviorPolicyIdentity,
    tokenizer: Mapping[str, str],
    invocation: Mapping[str, Any],
    sampling: Mapping[str, Any],
) -> GrpoCompletion:
    trajectory = _trajectory(completion, codec, stop_ids)
    text = TURN_BREAK.join(s.content for s in trajectory if s.kind == "action")
    start = len(completion.prompt_ids)
    actions = [
        {
            "sequence_index": start + offset,
            "token_id": completion.completion_ids[offset],
            "source": "sampled",
            "behavior_logprob": min(float(completion.logprobs[offset]), 0.0),
        }
        for offset, keep in enumerate(completion.tool_mask)
        if keep == 1
    ]
    provenance: dict[str, Any] = {
        "schema": ROLLOUT_PROVENANCE,
        "input_token_ids": [*completion.prompt_ids, *completion.completion_ids],
        "prompt_token_count": start,
        "prompt_messages_sha256": str(prompt_messages_digest(completion.messages)),
        "scored_payload_sha256": str(scored_payload_digest(text, trajectory)),
        "action_tokens": actions,
        "behavior_policy": behavior,
        "tokenizer": dict(tokenizer),
        "template_invocation": dict(invocation),
        "sampling": dict(sampling),
        "seed": completion.seed,
        "generation_backend": "trl",
    }
    return GrpoCompletion.model_validate(
        {
            "text": text,
            "reward": completion.reward,
            "trajectory": trajectory,
            "provenance": provenance,
        }
    )


def grpo_rows(
    completions: Sequence[TrlCompletion],
    *,
    group_size: int,
    rerender: TokenRerender,
    stop_ids: frozenset[int],
    behavior: BehaviorPolicyIdentity,
    tokenizer: Mapping[str, str],
    invocation: Mapping[str, Any],
    sampling: Mapping[str, Any],
) -> bytes:
    """The canonical corpus bytes of one batch (one row per group, in batch order). Each row
    is read back from its written bytes and re-rendered by ``hf verify``'s own check
    (:meth:`~kiln_verify.hf.rerender.TokenRerender.check_group`: prompt and trajectory) before
    it is kept."""
    codec = rerender.codec
    rows = []
    for first in range(0, len(completions), group_size):
        members = completions[first : first + group_size]
        group = first // group_size
        messages = members[0].messages
        built = []
        for offset, completion in enumerate(members):
            where = f"group {group} completion {offset}"
            if completion.messages != messages:
                raise TrlRecordingFailed(f"{where}: its prompt differs from completion 0's")
            try:
                row = _completion(
                    completion,
                    codec=codec,
                    stop_ids=stop_ids,
                    behavior=behavior,
                    tokenizer=tokenizer,
                    invocation=invocation,
                    sampling=sampling,
                )
            except TokenStreamError as exc:
                raise type(exc)(f"{where}: {exc.rule}") from None
            except (KilnError, ValidationError, ValueError) as exc:
                raise TrlRecordingFailed(f"{where}: {str(exc)[:300]}") from None
            built.append(row)
        try:
            chat = [ChatMessage.model_validate(m) for m in messages]
            row_bytes = grpo_row_bytes(GrpoGroup(messages=chat, completions=built))
            rerender.check_group(
                GrpoGroup.model_validate(loads(row_bytes, max_bytes=MAX_GRPO_ROW_BYTES))
            )
        except TokenStreamError as exc:
            raise type(exc)(f"group {group}: {exc.rule}") from None
        except (KilnError, ValidationError) as exc:
            raise TrlRecordingFailed(f"group {group}: {str(exc)[:300]}") from None
        rows.append(row_bytes)
    return b"".join(rows)
