"""GRPO token replay (kiln-hf-trl-contract §4.7) through the exported tokenizer and template.

Identity checks prove a completion *names* the exported tokenizer and inference template;
replay proves its tokens *came from* them. For every completion of a group:

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
3. a completion with a ``trajectory`` cannot be replayed by this verifier (rendering a
   multi-turn trajectory back to Kiln's production token stream is not specified well
   enough to reproduce), so it fails closed with ``hf_grpo_completion_replay_mismatch``
   rather than passing unreplayed.

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
from typing import Any, Final

from kiln_verify.core.jsonio import dumps_canonical
from kiln_verify.errors import (
    HfGrpoCompletionReplayMismatch,
    HfGrpoPromptReplayMismatch,
    HfTokenReplayUnavailable,
)
from kiln_verify.hf.manifest import GrpoCompletion, GrpoGroup

__all__ = ["THINK_CLOSE", "TokenReplay"]

THINK_CLOSE: Final = "</think>"
_RESERVED: Final = frozenset(
    {
        "messages",
        "add_generation_prompt",
        "tools",
        "tool_choice",
        "conversations",
        "documents",
        "chat_template",
        "continue_final_message",
        "return_assistant_tokens_mask",
    }
)
"""Template variables and renderer arguments the replay call itself sets."""


class TokenReplay:
    """Replays groups through one tokenizer (``tokenizer.json`` bytes) and template."""

    def __init__(self, tokenizer_json: bytes, chat_template: bytes) -> None:
        try:
            from tokenizers import Tokenizer
            from transformers.utils.chat_template_utils import render_jinja_template
        except ImportError:
            raise HfTokenReplayUnavailable(
                "GRPO token replay needs transformers (with jinja2) and tokenizers; refusing "
                "to verify the corpus without replaying it"
            ) from None
        self._render: Any = render_jinja_template
        try:
            self._tokenizer: Any = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
            self._template = chat_template.decode("utf-8")
        except Exception as exc:
            raise HfGrpoPromptReplayMismatch(
                f"the exported tokenizer or chat template does not load: {str(exc)[:120]}"
            ) from None
        self._special: frozenset[int] = frozenset(
            int(index)
            for index, token in self._tokenizer.get_added_tokens_decoder().items()
            if token.special
        )

    def prompt_ids(self, messages: list[Any], invocation: Mapping[str, Any]) -> list[int]:
        """The prompt the exported tokenizer and template give for this invocation."""
        kwargs: dict[str, Any] = dict(invocation.get("template_kwargs") or {})
        clash = sorted(_RESERVED & kwargs.keys())
        if clash:
            raise HfGrpoPromptReplayMismatch(
                f"template_kwargs sets {clash[0]!r}, which the chat template call owns"
            )
        if invocation.get("tool_choice") is not None:
            kwargs["tool_choice"] = invocation["tool_choice"]
        try:
            rendered, _ = self._render(
                conversations=[messages],
                tools=invocation.get("tools"),
                chat_template=self._template,
                add_generation_prompt=True,
                **kwargs,
            )
            text = rendered[0]
        except ImportError:
            raise HfTokenReplayUnavailable("chat templates need jinja2 >= 3.1.6") from None
        except Exception as exc:  # jinja2 template and sandbox errors, bad arguments
            raise HfGrpoPromptReplayMismatch(
                "the group messages do not render through chat_template.jinja: "
                f"{type(exc).__name__}: {str(exc)[:160]}"
            ) from None
        if not isinstance(text, str):
            raise HfGrpoPromptReplayMismatch("chat_template.jinja did not render text")
        return [int(i) for i in self._tokenizer.encode(text, add_special_tokens=False).ids]

    def check_group(self, group: GrpoGroup) -> None:
        """Raise the first replay failure, naming the completion (0-based)."""
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
            self._check_completion(index, completion, invocation)

    def _check_completion(
        self, index: int, completion: GrpoCompletion, invocation: Mapping[str, Any]
    ) -> None:
        if completion.trajectory:
            raise HfGrpoCompletionReplayMismatch(
                f"completion {index} has a trajectory; trajectory token replay is not "
                "supported, so the corpus cannot be verified"
            )
        provenance = completion.provenance
        ids = list(provenance.input_token_ids[provenance.prompt_token_count :])
        candidates = [self._tokenizer.decode(ids, skip_special_tokens=False)]
        if ids and ids[-1] in self._special:
            candidates.append(self._tokenizer.decode(ids[:-1], skip_special_tokens=False))
        thinking = (invocation.get("template_kwargs") or {}).get("enable_thinking") is True
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
