"""Invalid-action tails are re-derived with the collector's rule (issue 14.2).

Property: for any model reply (final content, reasoning) and either ``thinking`` value, the
verifier's :class:`TailRules` accepts exactly the two segments the collector's
:func:`judge_model_reply` writes, and refuses every other harness code or message, and any
tail whose text is a valid action. The mutation corpus (tests/hostile) checks the same
classes through whole bundles.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.openenv.protocol.action_schema import ActionSchema
from kiln_verify.openenv.records.prompt import (
    HARNESS_CODES,
    NO_OUTPUT_MESSAGE,
    THINK_CLOSE,
    harness_error_content,
    judge_model_reply,
)
from kiln_verify.openenv.verify.tails import TailRules

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"arm": {"type": "integer", "minimum": 0}, "note": {"type": "string"}},
    "required": ["arm"],
    "additionalProperties": False,
}

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
_objects = st.dictionaries(st.sampled_from(["arm", "note", "x"]), _json_values, max_size=3)
_fragments = st.sampled_from(
    ["", " ", "\n", "```", "```json\n", "\n```", "{", "}", "[1]", "pull", THINK_CLOSE, '"']
)


@st.composite
def _contents(draw: st.DrawFn) -> str:
    """Model final content: JSON objects (valid or not for the schema) with noise around."""
    body = json.dumps(draw(_objects), ensure_ascii=draw(st.booleans()))
    parts = draw(st.lists(st.one_of(_fragments, st.just(body), st.text(max_size=6)), max_size=4))
    return "".join(parts)


_replies = st.tuples(_contents(), st.none() | st.text(max_size=12), st.booleans())


def _rules() -> TailRules:
    return TailRules(SCHEMA)


@settings(max_examples=300, deadline=None)
@given(reply=_replies, code=st.sampled_from(HARNESS_CODES), message=st.text(max_size=20))
def test_only_the_collectors_tail_verifies(
    reply: tuple[str, str | None, bool], code: str, message: str
) -> None:
    content, reasoning, thinking = reply
    rules = _rules()
    written = judge_model_reply(content, reasoning, thinking=thinking, rules=rules)
    if written.action is not None:
        # a valid action is sent, never filed as a tail: any tail with this text is refused
        assert rules.refusal(written.text, harness_error_content(code, message), thinking=thinking)
        return
    assert written.code is not None
    assert written.message is not None
    if reasoning is None or THINK_CLOSE not in reasoning:  # the documented edge (docs)
        collector = harness_error_content(written.code, written.message)
        assert rules.refusal(written.text, collector, thinking=thinking) is None
    other = harness_error_content(code, message)
    if (code, message) != (written.code, written.message):
        assert rules.refusal(written.text, other, thinking=thinking) is not None


@settings(max_examples=150, deadline=None)
@given(content=_contents(), thinking=st.booleans())
def test_no_output_never_carries_an_answer(content: str, thinking: bool) -> None:
    """A ``MODEL_ACTION_NO_OUTPUT`` tail verifies only for a reply with blank content."""
    rules = _rules()
    harness = harness_error_content("MODEL_ACTION_NO_OUTPUT", NO_OUTPUT_MESSAGE)
    segment = ("r" + THINK_CLOSE + content) if thinking else content
    verdict = rules.refusal(segment, harness, thinking=thinking)
    assert (verdict is None) == (not thinking and not content.strip())


def test_schema_message_is_the_collectors() -> None:
    rules = _rules()
    text = 'r</think>{"arm": -1, "x": 1}'
    expected = ActionSchema(SCHEMA).violation({"arm": -1, "x": 1})
    assert expected.startswith("the action violates the action schema: ")
    harness = harness_error_content("ACTION_SCHEMA_VALIDATION_FAILED", expected)
    assert rules.refusal(text, harness, thinking=True) is None
    assert rules.refusal(text, harness, thinking=False) is not None  # then it is not JSON


def test_an_uncompilable_recorded_schema_refuses_the_tail() -> None:
    rules = TailRules({"type": 12})
    harness = harness_error_content("ACTION_SCHEMA_VALIDATION_FAILED", "x")
    refusal = rules.refusal('{"arm": 1}', harness, thinking=False)
    assert refusal is not None
    assert "action_schema_invalid" in refusal
    # a tail that needs no schema (not JSON) is still judged
    invalid = judge_model_reply("nope", None, thinking=False, rules=rules)
    assert invalid.code == "INVALID_MODEL_ACTION"
    assert invalid.message is not None
    harness = harness_error_content("INVALID_MODEL_ACTION", invalid.message)
    assert rules.refusal("nope", harness, thinking=False) is None
