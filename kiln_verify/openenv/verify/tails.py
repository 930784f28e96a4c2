"""The invalid-action tail, re-derived as the collector would have written it (§3.1, §6.9).

A candidate that ends ``invalid_model_action`` closes its trajectory with the model's
unsent output and a harness error. Kiln's verifier only checks that the error *looks* like
one; a bundle could then file a valid action as invalid, relabel one harness code as
another, or carry any message, and a trainer would learn the penalty on a transcript the
collector never wrote (issue 14).

Here the tail is re-derived instead. The recorded action segment is read back into the
model's reply (:func:`~kiln_verify.openenv.records.prompt.recorded_reply`, with the
summary's ``thinking``), the collector's own rule
(:func:`~kiln_verify.openenv.records.prompt.judge_model_reply`, with the recorded action
schema compiled by :class:`~kiln_verify.openenv.protocol.action_schema.ActionSchema`) says what the
collector makes of that reply, and both segments must be exactly its output: the reply must
not be a valid action, the action segment must be the text the collector writes for it,
and the harness segment must be the compact JSON of that code and message, byte for byte.

Only tails pay for this, and verdicts are remembered per environment and segment text
(bounded like the collector's), so a corpus of repeated refusals costs one parse each.
"""

from __future__ import annotations

from typing import Any, Final

from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_ACTION_CHECK_CACHE_ENTRIES, MAX_ACTION_CHECK_CACHE_KEY_CHARS
from kiln_verify.openenv.protocol.action_schema import ActionSchema, compile_action_schema
from kiln_verify.openenv.records.prompt import (
    harness_error_content,
    judge_model_reply,
    parse_model_action,
    recorded_reply,
)

__all__ = ["TailRules"]

_VALID: Final = "the invalid-action tail holds a valid action, which the collector would have sent"
_TEXT: Final = "the invalid-action tail's action segment is not what the collector writes"
_HARNESS: Final = (
    "the invalid-action tail's harness error is not the code and message the collector "
    "derives from its action text"
)


class TailRules:
    """One recorded environment's action rules, for re-deriving invalid-action tails.

    Implements :class:`~kiln_verify.openenv.records.prompt.ActionRules`; the action schema
    is compiled on first use (most bundles never need it), through the process-wide cache of
    compiled schemas: the bundles of one run, a verifier checking many bundles of one
    environment, share one compilation (the metaschema check costs milliseconds a bundle).
    """

    def __init__(self, action_schema: Any) -> None:
        self._schema_doc = action_schema
        self._schema: ActionSchema | None = None
        # (thinking, action segment) -> (expected harness content or None, refusal rule)
        self._verdicts: dict[tuple[bool, str], tuple[str | None, str]] = {}

    def parse_action(self, output: str) -> dict[str, Any] | str:
        return parse_model_action(output)

    def schema_violation(self, output: str, parsed: dict[str, Any]) -> str:
        if self._schema is None:
            self._schema = compile_action_schema(self._schema_doc)
        return self._schema.violation(parsed)

    def refusal(self, segment: str, harness: str, *, thinking: bool) -> str | None:
        """Why the tail (action segment text, harness segment text) is not what the
        collector writes, or ``None`` when it is exactly that."""
        key = (thinking, segment)
        known = self._verdicts.get(key)
        if known is None:
            known = self._derive(segment, thinking)
            if (
                len(segment) <= MAX_ACTION_CHECK_CACHE_KEY_CHARS
                and len(self._verdicts) < MAX_ACTION_CHECK_CACHE_ENTRIES
            ):
                self._verdicts[key] = known
        expected, rule = known
        if expected is None:
            return rule
        return None if harness == expected else _HARNESS

    def _derive(self, segment: str, thinking: bool) -> tuple[str | None, str]:
        content, reasoning = recorded_reply(segment, thinking=thinking)
        try:
            reply = judge_model_reply(content, reasoning, thinking=thinking, rules=self)
        except KilnError as exc:  # the recorded schema does not compile or resolve
            return None, f"the recorded action schema cannot check the tail ({exc.code})"
        if reply.action is not None:
            return None, _VALID
        if reply.text != segment:
            return None, _TEXT
        assert reply.code is not None
        assert reply.message is not None
        return harness_error_content(reply.code, reply.message), ""
