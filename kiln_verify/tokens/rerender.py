"""Re-render a recorded trajectory stream and name the first thing that is not the rule's.

Walking the actions in order, the re-rendering knows where each action must start (right after
the prompt, then right after the previous environment tokens) and takes its extent from the
recorded action positions (a maximal run). Each piece is then checked against
:mod:`kiln_verify.tokens.stream`, and a failure is classified so that every kind of
mismatch has its own code and names the token position:

=============================================================  ================================
what is wrong                                                  code
=============================================================  ================================
no action where one must start; tokens after the last action;  ``token_stream_boundary_
an action token left unmarked (the boundary is shifted)        mismatch``
an environment position (template or observation token)        ``token_stream_environment_
marked as an action token                                      marked_action``
the action tokens do not decode to the action segment          ``token_stream_action_text_
                                                               mismatch``
the environment tokens are not the rendered turns, encoded     ``token_stream_environment_
                                                               mismatch``
the template rewrites an earlier turn                          ``chat_template_not_prefix_
                                                               preserving``
forced tokens that the budget did not force                    ``token_stream_forced_mismatch``
the trajectory has no stream (no leading assistant action)     ``token_stream_unrenderable``
=============================================================  ================================

When an action's run does not decode to its segment, the re-rendering looks for the extent that
would (the shortest run that spells the segment and is followed by the expected
environment tokens): found earlier, the run swallowed environment tokens; found later, the
recorded boundary stops short; not found, the text itself differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kiln_verify.errors import (
    KilnError,
    TokenStreamBoundaryMismatch,
    TokenStreamEnvironmentMarkedAction,
    TokenStreamEnvironmentMismatch,
    TokenStreamUnrenderable,
)
from kiln_verify.tokens.codec import TokenCodec
from kiln_verify.tokens.stream import (
    ActionBudget,
    action_stop,
    chat_message,
    check_forced,
    first_difference,
    last_turn,
    next_turn,
)

__all__ = ["ActionBudget", "Segment", "rerender_trajectory"]


class Segment(Protocol):
    """What the rule reads of a trajectory segment (``TurnSegment`` has these)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def tool_call_id(self) -> str | None: ...


def _run_end(actions: Mapping[int, str], start: int, length: int) -> int:
    end = start
    while end < length and end in actions:
        end += 1
    return end


def rerender_trajectory(
    codec: TokenCodec,
    invocation: Mapping[str, Any],
    *,
    messages: Sequence[Mapping[str, Any]],
    segments: Sequence[Segment],
    ids: Sequence[int],
    prompt_count: int,
    actions: Mapping[int, str],
    budget: ActionBudget | None,
    where: str,
) -> None:
    """Raise the first rule the stream breaks. ``ids[:prompt_count]`` must already be the
    re-rendered prompt; ``actions`` maps each action position to ``sampled``/``forced``."""
    thinking = (invocation.get("template_kwargs") or {}).get("enable_thinking") is True
    chat = [dict(m) for m in messages]
    turns = [chat_message(s.role, s.content, s.tool_call_id) for s in segments]
    action_at = [index for index, s in enumerate(segments) if s.kind == "action"]
    if not action_at or action_at[0] != 0:
        raise TokenStreamUnrenderable(f"{where}: the trajectory does not start with an action")
    if any(segments[index].role != "assistant" for index in action_at):
        raise TokenStreamUnrenderable(f"{where}: an action segment is not an assistant turn")
    text = codec.render(chat, invocation, generation_prompt=True)
    pos, length = prompt_count, len(ids)
    for number, segment_index in enumerate(action_at):
        here = f"{where} action {number}"
        content = segments[segment_index].content
        if pos >= length:
            raise TokenStreamBoundaryMismatch(
                f"{here}: the token stream ends at position {pos}, before this action"
            )
        if pos not in actions:
            raise TokenStreamBoundaryMismatch(
                f"{here}: token {pos} begins the action but is not an action token"
            )
        end = _run_end(actions, pos, length)
        sources = [actions[i] for i in range(pos, end)]
        if number == len(action_at) - 1:
            if end != length:
                raise TokenStreamBoundaryMismatch(
                    f"{here}: token {end} follows the last action but is not an action token "
                    "(the stream ends with the last action)"
                )
            last_turn(
                codec,
                invocation,
                turn_text=text,
                action_ids=ids[pos:end],
                content=content,
                final_chat=chat + turns[: segment_index + 1],
                thinking=thinking,
                where=f"{here} (token {pos})",
            )
            check_forced(codec, ids[pos:end], sources, budget, thinking=thinking, where=here)
            return
        next_chat = chat + turns[: action_at[number + 1]]
        try:
            text, env = next_turn(
                codec,
                invocation,
                turn_text=text,
                action_ids=ids[pos:end],
                content=content,
                next_chat=next_chat,
                where=f"{here} (token {pos})",
            )
        except KilnError as exc:
            _classify(codec, invocation, exc, ids, pos, end, text, content, next_chat, here)
            raise
        check_forced(codec, ids[pos:end], sources, budget, thinking=thinking, where=here)
        recorded = list(ids[end : end + len(env)])
        if recorded != env:
            at = end + first_difference(recorded, env)
            raise TokenStreamEnvironmentMismatch(
                f"{here}: token {at} differs from the environment tokens the template renders "
                f"after the action ({len(env)} tokens from position {end})"
            )
        marked = next((i for i in range(end, end + len(env)) if i in actions), None)
        if marked is not None:
            raise TokenStreamEnvironmentMarkedAction(
                f"{here}: token {marked} is an environment token after the action but is "
                "marked as an action token"
            )
        pos = end + len(env)
    raise AssertionError("unreachable: the loop returns at the last action")  # pragma: no cover


def _classify(
    codec: TokenCodec,
    invocation: Mapping[str, Any],
    exc: KilnError,
    ids: Sequence[int],
    pos: int,
    end: int,
    text: str,
    content: str,
    next_chat: Sequence[Mapping[str, Any]],
    where: str,
) -> None:
    """When the recorded run does not spell the segment, find the extent that would (see
    the module docstring) and raise the boundary error it shows; else return."""
    from kiln_verify.errors import TokenStreamActionTextMismatch

    if not isinstance(exc, TokenStreamActionTextMismatch):
        return
    rendered = codec.render(next_chat, invocation, generation_prompt=True)
    horizon = min(len(ids), pos + len(content.encode("utf-8")) + 8)
    for stop in range(pos + 1, horizon + 1):
        if stop == end:
            continue
        closing = action_stop(codec, ids[pos:stop], content, thinking=False)
        head = text + content + (closing or "")
        if closing is None or not rendered.startswith(head):
            continue
        env = codec.encode(rendered[len(head) :])
        if list(ids[stop : stop + len(env)]) != env:
            continue
        if stop < end:
            raise TokenStreamEnvironmentMarkedAction(
                f"{where}: token {stop} is an environment token after the action but is "
                "marked as an action token"
            ) from None
        raise TokenStreamBoundaryMismatch(
            f"{where}: token {end} belongs to the action but is not an action token (the "
            "action boundary is shifted)"
        ) from None
