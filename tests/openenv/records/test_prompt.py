"""The exact prompt and observation texts (our template, pinned byte for byte)."""

from __future__ import annotations

import pytest

from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.observation import ObservationRecord, ProtocolErrorRecord
from kiln_verify.openenv.records.prompt import (
    action_content,
    harness_error_content,
    harness_error_segment,
    initial_messages,
    observation_content,
    protocol_error_content,
    protocol_error_segment,
    rust_debug_str,
    system_prompt,
)
from tests.openenv.records import fixtures

SYSTEM = (
    'You are the policy acting in the OpenEnv reinforcement-learning environment "Bandit\\"Env".\n'
    "Environment description: A bandit.\n"
    "On every turn reply with exactly one JSON object that validates against this action JSON "
    "Schema:\n"
    '{"properties":{"arm":{"type":"integer"}},"required":["arm"],"type":"object"}\n'
    "Reply with the JSON object only: no Markdown, no commentary, no code fences.\n"
    "When an observation carries a non-empty input_text, that text is pasted verbatim as your "
    "decision prompt; otherwise the full observation follows as JSON."
)


def _inspection(name: str = 'Bandit"Env') -> EnvironmentInspection:
    value = fixtures.inspection()
    value["identity"]["metadata"]["name"] = name
    return EnvironmentInspection.from_json(value)


def test_system_prompt_bytes() -> None:
    assert system_prompt(_inspection()) == SYSTEM


def test_initial_messages_use_input_text_verbatim() -> None:
    reset = ObservationRecord.from_json(
        {"observation": {"input_text": "  Pick.\n", "pulls": 0}, "reward": None, "done": False}
    )
    messages = initial_messages(_inspection(), reset)
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[1].content == "  Pick.\n"


@pytest.mark.parametrize("input_text", [None, "", "  \n", 5])
def test_observation_without_usable_input_text_is_labelled_json(input_text: object) -> None:
    payload: dict[str, object] = {"pulls": 1, "b": [1.5]}
    if input_text is not None:
        payload["input_text"] = input_text
    observation = ObservationRecord.from_json(
        {"observation": payload, "reward": 1.0, "done": True, "metadata": {"z": 1, "a": None}}
    )
    text = observation_content("step result", observation)
    body = '{"b":[1.5],' + (
        f'"input_text":{__import__("json").dumps(input_text)},' if input_text is not None else ""
    )
    assert text == (
        "OpenEnv step result (observation, reward, done, and optional metadata JSON):\n"
        '{"observation":'
        + body
        + '"pulls":1},"reward":1.0,"done":true,"metadata":{"a":null,"z":1}}'
    )
    assert observation_content("reset result", observation).startswith("OpenEnv reset result (")


def test_protocol_and_harness_error_segments() -> None:
    error = ProtocolErrorRecord.from_json({"code": "EXECUTION_ERROR", "message": "bad é"})
    content = protocol_error_content(error, continued=True)
    assert content == (
        '{"openenv_error":{"code":"EXECUTION_ERROR","message":"bad é"},'
        '"recoverable":true,"done":false}'
    )
    segment = protocol_error_segment(error, continued=False)
    assert segment.warning_prefix_len == len(segment.content.encode("utf-8"))
    assert '"recoverable":false,"done":true' in segment.content
    assert (segment.role, segment.kind) == ("tool", "observation")
    assert harness_error_content("INVALID_MODEL_ACTION", "not json") == (
        '{"openenv_harness_error":{"code":"INVALID_MODEL_ACTION","message":"not json"},"done":true}'
    )
    harness = harness_error_segment("MODEL_ACTION_NO_OUTPUT", "")
    assert harness.warning_prefix_len == len(harness.content)
    with pytest.raises(ValueError, match="unknown harness code"):
        harness_error_content("OTHER", "x")


def test_action_content_with_thinking() -> None:
    assert action_content('{"a":1}', thinking=False, reasoning="r") == '{"a":1}'
    assert action_content('{"a":1}', thinking=True, reasoning="hm") == 'hm</think>{"a":1}'
    assert action_content("\n\nanswer", thinking=True) == "</think>\n\nanswer"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", '"plain"'),
        ('q"b\\', '"q\\"b\\\\"'),
        ("a\nb\tc\rd\0", '"a\\nb\\tc\\rd\\0"'),
        ("\x07\x7f", '"\\u{7}\\u{7f}"'),
        ("é'", '"é\'"'),
    ],
)
def test_rust_debug_str(text: str, expected: str) -> None:
    assert rust_debug_str(text) == expected
