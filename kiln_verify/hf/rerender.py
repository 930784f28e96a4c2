"""GRPO token re-rendering (kiln-hf-trl-contract §4.7, "token replay" in the contract's
error codes) through the exported tokenizer and template.

Identity checks prove a completion *names* the exported tokenizer and inference template;
re-rendering proves its tokens *came from* them. (Live *replay* is the OpenEnv half's word:
running a bundle's episodes again against the environments, :mod:`kiln_verify.openenv.replay`;
the error codes keep the contract's ``replay`` spelling.) For every completion of a group:

1. prompt: the group ``messages`` rendered through the exported ``chat_template.jinja``
   with ``add_generation_prompt=True`` and the recorded ``template_invocation`` (``tools``,
   ``tool_choice`` when present, every ``template_kwargs`` entry such as
   ``enable_thinking``), tokenized by the exported ``tokenizer.json`` without added special
   tokens, must equal ``input_token_ids[:prompt_token_count]`` exactly, and its length must
   be ``prompt_token_count`` (``hf_grpo_prompt_replay_mismatch``);
2. completion (no trajectory: every completion position is an action, sampled or a forced
   thinking-budget close token, which the record already enforces): the completion token
   ids decoded with the exported tokenizer (special tokens kept; one trailing special
   token, the end-of-sequence, may be dropped) must reproduce ``text``, either whole or as
   the part after the first ``</think>``; with ``enable_thinking`` true and no ``</think>``
   decoded, the text must be empty (``hf_grpo_completion_replay_mismatch``);
3. a completion with a ``trajectory`` is re-rendered by the token-stream rule
   (:func:`kiln_verify.tokens.rerender_trajectory`, docs/hf-contract.md "The token stream
   of a trajectory"): every action, environment turn and boundary, each mismatch kind its
   own ``token_stream_*`` / ``chat_template_not_prefix_preserving`` code;
4. forced tokens are exactly a thinking budget's close tokens where it ran out
   (:func:`kiln_verify.tokens.check_forced`, ``token_stream_forced_mismatch``).

Rendering is ``transformers``' own ``render_jinja_template`` (the function behind
``apply_chat_template(tokenize=False)``, which the ``transformers`` policy records with),
so sandbox settings, filters, globals and message normalisation are the recorder's, not an
imitation; it imports without torch. Tokenizing and decoding use ``tokenizers`` on the
exported ``tokenizer.json``. Either missing: ``hf_token_replay_unavailable`` (fail closed,
never a silent pass). The tokenizer's special-token strings (``bos_token``, ...), which
``apply_chat_template`` also passes to templates, come from ``tokenizer_config.json``,
which is not exported, so they are not passed: a template that needs them fails closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kiln_verify.core.jsonio import dumps_canonical
from kiln_verify.errors import HfGrpoCompletionReplayMismatch, HfGrpoPromptReplayMismatch
from kiln_verify.hf.manifest import GrpoCompletion, GrpoGroup
from kiln_verify.tokens import (
    THINK_CLOSE,
    ActionBudget,
    TokenCodec,
    check_forced,
    rerender_trajectory,
)

__all__ = ["THINK_CLOSE", "TokenRerender"]


def _budget(completion: GrpoCompletion) -> ActionBudget | None:
    budget = completion.provenance.sampling.thinking_budget
    if budget is None:
        return None
    return ActionBudget(budget.max_tokens, budget.max_time_ms, tuple(budget.close_token_ids))


class TokenRerender:
    """Re-renders groups through one tokenizer (``tokenizer.json`` bytes) and template."""

    def __init__(self, tokenizer_json: bytes, chat_template: bytes) -> None:
        self.codec = TokenCodec.from_files(
            tokenizer_json, chat_template, error=HfGrpoPromptReplayMismatch
        )

    def prompt_ids(self, messages: list[Any], invocation: Mapping[str, Any]) -> list[int]:
        """The prompt the exported tokenizer and template give for this invocation."""
        text = self.codec.render(
            messages, invocation, generation_prompt=True, error=HfGrpoPromptReplayMismatch
        )
        return self.codec.encode(text)

    def check_group(self, group: GrpoGroup) -> None:
        """Raise the first re-rendering failure, naming the completion (0-based)."""
        messages = [message.to_json() for message in group.messages]
        rendered: dict[bytes, list[int]] = {}
        for index, completion in enumerate(group.completions):
            provenance = completion.provenance
            invocation = (
                provenance.template_invocation.to_json()
                if provenance.template_invocation is not None
                else {}
            )
            key = dumps_canonical(invocation)
            if key not in rendered:
                rendered[key] = self.prompt_ids(messages, invocation)
            expected = rendered[key]
            count = provenance.prompt_token_count
            recorded = provenance.input_token_ids[:count]
            if count != len(expected) or recorded != expected:
                first = next(
                    (i for i, (a, b) in enumerate(zip(recorded, expected, strict=False)) if a != b),
                    min(count, len(expected)),
                )
                raise HfGrpoPromptReplayMismatch(
                    f"completion {index}: the recorded prompt ({count} tokens) differs from the "
                    f"re-rendered prompt ({len(expected)} tokens) at token {first}"
                )
            if completion.trajectory:
                rerender_trajectory(
                    self.codec,
                    invocation,
                    messages=messages,
                    segments=completion.trajectory,
                    ids=provenance.input_token_ids,
                    prompt_count=count,
                    actions={t.sequence_index: t.source for t in provenance.action_tokens},
                    budget=_budget(completion),
                    where=f"completion {index}",
                )
            else:
                self._check_completion(index, completion, invocation)

    def _check_completion(
        self, index: int, completion: GrpoCompletion, invocation: Mapping[str, Any]
    ) -> None:
        provenance = completion.provenance
        ids = list(provenance.input_token_ids[provenance.prompt_token_count :])
        thinking = (invocation.get("template_kwargs") or {}).get("enable_thinking") is True
        check_forced(
            self.codec,
            ids,
            [t.source for t in provenance.action_tokens],
            _budget(completion),
            thinking=thinking,
            where=f"completion {index}",
        )
        candidates = [self.codec.decode(ids)]
        if ids and ids[-1] in self.codec.special_ids:
            candidates.append(self.codec.decode(ids[:-1]))
        for decoded in candidates:
            _head, sep, tail = decoded.partition(THINK_CLOSE)
            if completion.text in (decoded, tail if sep else None):
                return
            if thinking and not sep and completion.text == "":
                return
        raise HfGrpoCompletionReplayMismatch(
            f"completion {index}: its {len(ids)} completion tokens do not decode to the "
            "recorded text"
        )
