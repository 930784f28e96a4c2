"""The collector's shortcuts give exactly what the long way gives.

The remembered action-schema verdicts (bounded) and the serialization-free group-integrity
comparison are checked against the computations they replace.
"""

from __future__ import annotations

from typing import Any

import pytest

from kiln_verify.limits import (
    MAX_ACTION_CHECK_CACHE_ENTRIES,
    MAX_ACTION_CHECK_CACHE_KEY_CHARS,
    MAX_ACTION_ISSUES,
)
from kiln_verify.openenv.collect.engine import same_start
from kiln_verify.openenv.collect.episode import EnvironmentContext
from kiln_verify.openenv.protocol.action_schema import ActionIssue, ActionSchema
from kiln_verify.openenv.protocol.wire import Reward
from kiln_verify.openenv.records.observation import ObservationRecord
from kiln_verify.openenv.records.prompt import initial_messages, parse_model_action
from kiln_verify.openenv.records.serialize import messages_sha256, reset_observation_sha256
from oracle.runner import ServerHandle
from tests.openenv.collect.contexts import environment_context


def _expected(schema: ActionSchema, parsed: Any) -> str:
    issues = schema.issues(parsed)
    if not issues:
        return ""
    return "the action violates the action schema: " + "; ".join(
        issue.describe() for issue in issues[:MAX_ACTION_ISSUES]
    )


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every action ``ActionSchema.issues`` really validates, in order."""
    seen: list[Any] = []
    original = ActionSchema.issues

    def issues(self: ActionSchema, action: Any) -> list[ActionIssue]:
        seen.append(action)
        return original(self, action)

    monkeypatch.setattr(ActionSchema, "issues", issues)
    return seen


def _verdict(env: EnvironmentContext, output: str) -> str:
    parsed = parse_model_action(output)
    assert isinstance(parsed, dict)
    return env.schema_violation(output, parsed)


def test_verdicts_are_remembered_per_output(
    servers: dict[str, ServerHandle], counted: list[Any]
) -> None:
    env = environment_context(servers["bandit"].base_url)
    for output in ('{"arm": 3}', '{"arm": "x"}', '{"arm": 1.5, "extra": true}', "{}"):
        parsed = parse_model_action(output)
        expected = _expected(env.action_schema, parsed)
        counted.clear()
        assert _verdict(env, output) == expected
        assert _verdict(env, output) == expected
        assert counted == [parsed]  # validated once, answered from memory after
    assert _verdict(env, '{"arm": 3}') == ""
    assert _verdict(env, '{"arm": "x"}') == (
        "the action violates the action schema: type at $/arm (schema $/properties/arm/type)"
    )
    # The same action spelled differently is its own entry, with the same verdict.
    counted.clear()
    assert _verdict(env, '{ "arm" : "x" }') == _verdict(env, '{"arm": "x"}')
    assert counted == [{"arm": "x"}]
    # Equal in Python, different JSON: never confused.
    assert _verdict(env, '{"arm": 2}') == ""
    assert _verdict(env, '{"arm": 2.5}') != ""
    assert _verdict(env, '{"arm": true}') != ""


def test_verdict_memory_is_bounded(servers: dict[str, ServerHandle], counted: list[Any]) -> None:
    env = environment_context(servers["bandit"].base_url)
    long_output = '{"arm": 1' + " " * MAX_ACTION_CHECK_CACHE_KEY_CHARS + "}"
    assert _verdict(env, long_output) == _verdict(env, long_output) == ""
    assert len(counted) == 2  # too long to remember: validated every time
    counted.clear()
    for arm in range(MAX_ACTION_CHECK_CACHE_ENTRIES + 5):
        output = f'{{"arm": {arm}}}'
        assert _verdict(env, output) == _expected(env.action_schema, {"arm": arm})
    assert len(env._verdicts) == MAX_ACTION_CHECK_CACHE_ENTRIES
    counted.clear()
    past_the_bound = '{"arm": "past the bound"}'
    assert _verdict(env, past_the_bound) == _verdict(env, past_the_bound) != ""
    assert len(counted) == 2  # not remembered once the memory is full
    counted.clear()
    assert _verdict(env, '{"arm": 0}') == ""
    assert counted == []  # remembered before the memory filled up


def _record(observation: Any, metadata: Any = None) -> ObservationRecord:
    return ObservationRecord(
        observation=observation, reward=Reward.from_json(0.5), done=False, metadata=metadata
    )


OBSERVATIONS: list[tuple[Any, Any]] = [
    ({"x": 1}, None),
    ({"x": 1.0}, None),
    ({"x": True}, None),
    ({"x": -0.0}, None),
    ({"x": 0.0}, None),
    ({"x": 1, "y": [1, 2]}, None),
    ({"y": [1, 2], "x": 1}, None),
    ({"x": 1}, {"m": 1}),
    ({"x": 1}, {"m": 2}),
    ({"input_text": "same prompt", "x": 1}, None),
    ({"input_text": "same prompt", "x": 2}, None),
    ({"input_text": "same prompt", "x": 2}, {"m": 1}),
    ({"input_text": "other prompt", "x": 2}, None),
    ({"input_text": "  ", "x": 2}, None),
    ({"input_text": 7, "x": 2}, None),
    ("a string observation", None),
    ([1, "two"], None),
]


def test_same_start_agrees_with_the_two_digests(servers: dict[str, ServerHandle]) -> None:
    env = environment_context(servers["bandit"].base_url)
    records = [_record(observation, metadata) for observation, metadata in OBSERVATIONS]
    prompts = [initial_messages(env.inspection, record) for record in records]
    agreeing = 0
    for left, left_messages in zip(records, prompts, strict=True):
        for right, right_messages in zip(records, prompts, strict=True):
            expected = messages_sha256(left_messages) == messages_sha256(right_messages) and (
                reset_observation_sha256(left) == reset_observation_sha256(right)
            )
            assert same_start(left_messages, left, right_messages, right) is expected
            agreeing += expected
    # each record matches itself, and the two spellings of one object match each other
    assert agreeing == len(records) + 2
