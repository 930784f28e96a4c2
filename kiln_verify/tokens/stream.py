"""The token-stream rule of a trajectory (docs/hf-contract.md, "The token stream of a
trajectory"), one turn at a time.

A stream is built turn by turn. Turn 0 is the group's messages rendered with a generation
prompt and encoded: those are the prompt tokens. The model then generates action 0's
tokens. Turn ``k+1`` does not re-encode the whole conversation (that would re-tokenize
the model's own tokens differently from how it sampled them, and lose the log-probs); it
appends to the stream exactly what the template adds after action ``k``:

1. action ``k``'s tokens decode to its segment's content, optionally followed by one
   special token the model stopped with (the end-of-turn token);
2. the next turn's rendering (the conversation up to action ``k+1``, with a generation
   prompt) must begin with this turn's rendering + the content + that stop token's text:
   the template is *prefix-preserving* (``chat_template_not_prefix_preserving``
   otherwise);
3. the rest of the next rendering (the turn's closing, every environment turn between the
   two actions, the next generation prompt) is encoded on its own: those are the
   environment tokens appended after action ``k``.

The last action must be preserved the same way when it is appended to the conversation
without a generation prompt (:func:`last_turn`); the stream ends with it. Forced tokens
follow :func:`check_forced`.

The ``transformers`` policy calls :func:`next_turn` to extend the stream it records;
:mod:`kiln_verify.tokens.rerender` calls it to re-derive a recorded one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kiln_verify.errors import (
    ChatTemplateNotPrefixPreserving,
    TokenStreamActionTextMismatch,
    TokenStreamForcedMismatch,
)
from kiln_verify.tokens.codec import THINK_CLOSE, TokenCodec

__all__ = [
    "ActionBudget",
    "action_stop",
    "chat_message",
    "check_forced",
    "first_difference",
    "last_turn",
    "next_turn",
]


@dataclass(frozen=True, slots=True)
class ActionBudget:
    """A thinking budget as the forced-token rule needs it (``sampling.thinking_budget``)."""

    max_tokens: int | None
    max_time_ms: int | None
    close_token_ids: tuple[int, ...]


def chat_message(role: str, content: str, tool_call_id: str | None = None) -> dict[str, Any]:
    """A trajectory segment as a chat message: ``role``, ``content`` and, when the
    segment has one, ``tool_call_id``; ``kind`` and ``warning_prefix_len`` are not
    rendered (they describe the segment, they are not part of the conversation)."""
    message: dict[str, Any] = {"role": role, "content": content}
    if tool_call_id is not None:
        message["tool_call_id"] = tool_call_id
    return message


def first_difference(a: str | Sequence[int], b: str | Sequence[int]) -> int:
    """The first index at which ``a`` and ``b`` differ (the shorter length if one is a
    prefix of the other)."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


def action_stop(
    codec: TokenCodec, ids: Sequence[int], content: str, *, final: bool = False, thinking: bool
) -> str | None:
    """The stop-token text with which ``ids`` spell ``content`` ("" for none), or ``None``.

    ``ids`` decode to ``content`` whole, or without their last token when that is a
    special token (the model's end-of-turn). The last action of a thinking trajectory may
    also be a reply whose final content is blank: the collector then keeps only the
    reasoning before ``</think>`` (``judge_model_reply``), so ``content`` is that part.
    """
    options: list[tuple[Sequence[int], str]] = [(ids, "")]
    if ids and ids[-1] in codec.special_ids:
        options.append((ids[:-1], codec.decode(ids[-1:])))
    for body, stop in options:
        decoded = codec.decode(body)
        if decoded == content:
            return stop
        if final and thinking:
            head, sep, tail = decoded.partition(THINK_CLOSE)
            if sep and not tail.strip() and head == content:
                return stop
    return None


def _text_mismatch(
    codec: TokenCodec, ids: Sequence[int], content: str, where: str
) -> TokenStreamActionTextMismatch:
    decoded = codec.decode(ids)
    at = first_difference(decoded, content)
    return TokenStreamActionTextMismatch(
        f"{where}: its {len(ids)} action tokens decode to a text that differs from the "
        f"action segment at character {at}"
    )


def next_turn(
    codec: TokenCodec,
    invocation: Mapping[str, Any],
    *,
    turn_text: str,
    action_ids: Sequence[int],
    content: str,
    next_chat: Sequence[Mapping[str, Any]],
    where: str,
) -> tuple[str, list[int]]:
    """Turn ``k+1`` from turn ``k``: (its rendering, the environment tokens to append).

    ``turn_text`` is turn ``k``'s rendering, ``action_ids`` action ``k``'s tokens,
    ``content`` its segment, ``next_chat`` the conversation up to action ``k+1``.
    """
    stop = action_stop(codec, action_ids, content, thinking=False)
    if stop is None:
        raise _text_mismatch(codec, action_ids, content, where)
    rendered = codec.render(next_chat, invocation, generation_prompt=True)
    head = turn_text + content
    if not rendered.startswith(head):
        raise ChatTemplateNotPrefixPreserving(
            f"{where}: the next turn renders the conversation differently from character "
            f"{first_difference(rendered, head)} on (this turn ends at {len(head)}): the "
            "template rewrites an earlier turn"
        )
    rest = rendered[len(head) :]
    if not rest.startswith(stop):
        raise ChatTemplateNotPrefixPreserving(
            f"{where}: the model ended its turn with a stop token whose text the template "
            "does not write after the action (the template closes turns with another token)"
        )
    return rendered, codec.encode(rest[len(stop) :])


def last_turn(
    codec: TokenCodec,
    invocation: Mapping[str, Any],
    *,
    turn_text: str,
    action_ids: Sequence[int],
    content: str,
    final_chat: Sequence[Mapping[str, Any]],
    thinking: bool,
    where: str,
) -> None:
    """The last action: its tokens spell its segment, and the template renders the
    conversation ending with it (no generation prompt) as a continuation of its turn."""
    if action_stop(codec, action_ids, content, final=True, thinking=thinking) is None:
        raise _text_mismatch(codec, action_ids, content, where)
    rendered = codec.render(final_chat, invocation, generation_prompt=False)
    head = turn_text + content
    if not rendered.startswith(head):
        raise ChatTemplateNotPrefixPreserving(
            f"{where}: the conversation ending with this action renders differently from "
            f"character {first_difference(rendered, head)} on: the template rewrites the turn"
        )


def check_forced(
    codec: TokenCodec,
    ids: Sequence[int],
    sources: Sequence[str],
    budget: ActionBudget | None,
    *,
    thinking: bool,
    where: str,
) -> None:
    """Forced tokens in one action are exactly the budget's close tokens, once, forced
    when the budget ran out (``TokenStreamForcedMismatch`` otherwise).

    With ``max_tokens`` B (and no time bound) the recorder samples reasoning tokens until
    ``</think>`` has been decoded or B tokens were sampled; in the second case it forces
    the close tokens. So: forced tokens start exactly after B sampled tokens whose text has
    no ``</think>``; and an action longer than B tokens whose first B tokens never close the
    reasoning must have them. A time bound can force earlier, so with ``max_time_ms`` the
    start may be any point up to B and the converse is not checked.
    """
    forced = [index for index, source in enumerate(sources) if source == "forced"]
    if not forced:
        if budget is None or budget.max_tokens is None or budget.max_time_ms is not None:
            return
        limit = budget.max_tokens
        if thinking and len(ids) > limit and THINK_CLOSE not in codec.decode(ids[:limit]):
            raise TokenStreamForcedMismatch(
                f"{where}: the reasoning ran past the thinking budget of {limit} tokens "
                "without the forced close tokens"
            )
        return
    if not thinking or budget is None:
        raise TokenStreamForcedMismatch(f"{where}: forced tokens without a thinking budget")
    start = forced[0]
    close = budget.close_token_ids
    if forced != list(range(start, start + len(close))) or tuple(
        ids[start : start + len(close)]
    ) != tuple(close):
        raise TokenStreamForcedMismatch(
            f"{where}: the forced tokens (from action token {start}) are not one run of the "
            "budget's close tokens"
        )
    bound = budget.max_tokens
    if bound is not None and (start > bound or (start < bound and budget.max_time_ms is None)):
        raise TokenStreamForcedMismatch(
            f"{where}: close tokens were forced after {start} sampled tokens; the budget "
            f"forces them after {bound}"
        )
    if THINK_CLOSE in codec.decode(ids[:start]):
        raise TokenStreamForcedMismatch(
            f"{where}: close tokens were forced after the reasoning had already closed"
        )
