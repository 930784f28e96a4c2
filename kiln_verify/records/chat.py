"""The chat transcript records both contracts embed: prompt messages and trajectory segments.

An OpenEnv rollout (``openenv.rollouts.jsonl``) and an HF/TRL GRPO row carry the same shared
prompt ``messages`` and the same trajectory ``segments`` (the model's actions, the
environment's observations and the harness's warnings), so both are defined once, here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import StrictStr

from kiln_verify.records.base import Record
from kiln_verify.records.fields import U64, FreeJson

__all__ = ["ChatMessage", "SegmentKind", "TurnSegment"]

SegmentKind = Literal["context", "action", "observation"]


class ChatMessage(Record):
    """One chat message of the shared prompt; optional keys omitted when absent."""

    _omit_when_none = frozenset({"tool_calls", "name", "tool_call_id"})

    role: StrictStr
    content: StrictStr
    tool_calls: FreeJson = None
    name: StrictStr | None = None
    tool_call_id: StrictStr | None = None


class TurnSegment(Record):
    """One trajectory segment. ``kind`` defaults to ``context`` on read and is always written.

    ``warning_prefix_len`` (bytes of ``content`` that are a harness warning) is present
    exactly on protocol-error and harness-error segments, where it equals the UTF-8 length
    of the whole content; :meth:`full_warning` builds such a segment.
    """

    _omit_when_none = frozenset({"tool_call_id", "warning_prefix_len"})

    role: StrictStr
    content: StrictStr
    kind: SegmentKind = "context"
    tool_call_id: StrictStr | None = None
    warning_prefix_len: U64 | None = None

    @classmethod
    def action(cls, content: str) -> TurnSegment:
        return cls(role="assistant", content=content, kind="action")

    @classmethod
    def observation(cls, content: str) -> TurnSegment:
        return cls(role="tool", content=content, kind="observation")

    @classmethod
    def full_warning(cls, content: str) -> TurnSegment:
        """A tool observation whose whole content is a warning (error segments)."""
        return cls(
            role="tool",
            content=content,
            kind="observation",
            warning_prefix_len=len(content.encode("utf-8")),
        )
