"""Reading one OpenAI-compatible chat-completions response into a :class:`PolicyResponse`.

Servers disagree on where a reasoning model's thinking goes, so the rule is written once
here (docs/policies.md, "openai"):

- separated: ``choices[0].message.reasoning_content`` (vLLM before 0.10, SGLang,
  ``transformers serve``) or ``message.reasoning`` (newer vLLM, OpenRouter). A server that
  sends both must send the same text (vLLM's compatibility mode does); two different
  texts are ambiguous and refused.
- inline: with no separated reasoning, content that holds ``</think>`` is split at the
  first one: the part before it (without a leading ``<think>``) is the reasoning, the part
  after it the final content. Content that opens with ``<think>`` and never closes it is
  all reasoning with empty final content, exactly as the ``transformers`` policy splits a
  completion that exhausted its tokens while thinking.

Only the final content reaches the environment; the collector records the reasoning in
the trainable trajectory when thinking is on (``action_content``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kiln_verify.core.jsonio import loads_object
from kiln_verify.errors import KilnError, PolicyResponseInvalid

__all__ = [
    "THINK_CLOSE",
    "THINK_OPEN",
    "ChatCompletion",
    "parse_chat_completion",
    "read_completion",
    "read_document",
    "split_inline",
]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


@dataclass(frozen=True, slots=True)
class ChatCompletion:
    """What the collector keeps of one response: texts, usage counts and why it stopped."""

    text: str
    reasoning: str | None
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None


def _count(value: Any) -> int:
    """A usage count: a non-negative integer, anything else (absent, null, junk) is 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def split_inline(content: str) -> tuple[str | None, str]:
    """``(reasoning, final content)`` of content that may inline ``<think>...</think>``."""
    head, close, tail = content.partition(THINK_CLOSE)
    if close:
        stripped = head.lstrip()
        if stripped.startswith(THINK_OPEN):
            head = stripped[len(THINK_OPEN) :]
        return head, tail
    if content.lstrip().startswith(THINK_OPEN):
        return content.lstrip()[len(THINK_OPEN) :], ""
    return None, content


def _optional_text(message: dict[str, Any], key: str, where: str) -> str | None:
    value = message.get(key)
    if value is not None and not isinstance(value, str):
        raise PolicyResponseInvalid(f"choices[0].message.{key} from {where} is not a string")
    return value


def parse_chat_completion(data: bytes, *, max_bytes: int, where: str) -> ChatCompletion:
    """The strict-JSON response body ``data`` from ``where`` (the endpoint URL, for errors)."""
    return read_completion(read_document(data, max_bytes=max_bytes, where=where), where=where)


def read_document(data: bytes | str, *, max_bytes: int, where: str) -> dict[str, Any]:
    """The response body as one strict JSON object, not yet read (the first half of
    :func:`parse_chat_completion`: a policy holding an API key searches it in between)."""
    try:
        return loads_object(data, max_bytes=max_bytes)
    except KilnError as exc:
        raise PolicyResponseInvalid(
            f"the response from {where} is not one strict JSON object ({exc.code})"
        ) from None


def read_completion(document: dict[str, Any], *, where: str) -> ChatCompletion:
    """What the collector keeps of a parsed response (the second half)."""
    choices = document.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise PolicyResponseInvalid(f"the response from {where} has no choices[0] object")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise PolicyResponseInvalid(f"choices[0].message from {where} is not an object")
    content = _optional_text(message, "content", where) or ""
    separated = _optional_text(message, "reasoning_content", where)
    alias = _optional_text(message, "reasoning", where)
    if separated is not None and alias is not None and separated != alias:
        raise PolicyResponseInvalid(
            f"choices[0].message from {where} carries two different reasoning texts "
            "(reasoning_content and reasoning)",
            hint="configure the server's reasoning parser to emit one reasoning field",
        )
    reasoning = separated if separated is not None else alias
    if reasoning is None:
        reasoning, content = split_inline(content)
    finish = choices[0].get("finish_reason")
    usage = document.get("usage")
    counts = usage if isinstance(usage, dict) else {}
    return ChatCompletion(
        text=content,
        reasoning=reasoning,
        prompt_tokens=_count(counts.get("prompt_tokens")),
        completion_tokens=_count(counts.get("completion_tokens")),
        finish_reason=finish if isinstance(finish, str) else None,
    )
