"""End-to-end collections against live oracle servers: plans, outcomes, failures."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import (
    EnvironmentIdentityChanged,
    EnvironmentTransport,
    ResetNondeterministic,
)
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.records.prompt import initial_messages
from kiln_verify.openenv.records.replay import ObservationResult, ProtocolErrorResult
from kiln_verify.openenv.records.rollout import TURN_BREAK
from kiln_verify.openenv.records.serialize import reset_plan_sha256, reset_sha256
from oracle.base import Outcome
from oracle.envs.counter import CounterEnvironment
from oracle.runner import ServerHandle
from tests.openenv.collect.conftest import Start, collect, files_in
from tests.openenv.collect.options import make_controls


def _harness(content: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(content)
    return value


def test_several_environments_rotate_with_their_reset_templates(
    servers: dict[str, ServerHandle], tmp_path: Path
) -> None:
    bandit, counter = servers["bandit"], servers["counter"]
    templates: list[Mapping[str, Any]] = [{"difficulty": 2, "seed": 999}, {}]
    result = collect(
        tmp_path,
        [bandit.base_url, counter.base_url],
        reset_templates=templates,
        groups=4,
        group_size=2,
        seed_start=10,
    )
    replay, summary = result.replay, result.summary
    assert [g.environment_index for g in replay.groups] == [0, 1, 0, 1]
    assert [g.seed for g in replay.groups] == [10, 11, 12, 13]
    assert replay.groups[0].reset_payload == {"difficulty": 2, "seed": 10}
    assert replay.groups[1].reset_payload == {"seed": 11}
    assert summary.reset_plan_sha256 == str(reset_plan_sha256([{"difficulty": 2}, {}]))
    assert summary.rollout_count == 8 == len(summary.rollouts)
    assert summary.environments == replay.environments
    for line, group in zip(result.groups, replay.groups, strict=True):
        env = replay.environments[group.environment_index]
        assert line.messages == initial_messages(env, group.reset_observation)
        for completion, candidate in zip(line.completions, group.candidates, strict=True):
            provenance = completion.openenv
            assert provenance.reset_sha256 == str(reset_sha256(group.reset_payload))
            assert provenance.seed == group.seed
            assert provenance.steps == len(candidate.exchanges)
            assert completion.reward == candidate.episode_return
            assert len(completion.trajectory) == 2 * len(candidate.exchanges)
            assert completion.text == TURN_BREAK.join(completion.action_contents())
            assert candidate.has_final_state
    assert summary.behavior_policy is not None
    assert summary.behavior_policy.implementation == "kiln-verify/random"
    assert summary.stats.total_environment_steps == sum(r.steps for r in summary.rollouts)


def test_recoverable_error_then_correction(
    servers: dict[str, ServerHandle], tmp_path: Path
) -> None:
    policy = ScriptedPolicy(['{"arm": 99}', '{"arm": 1}'])
    result = collect(tmp_path, [servers["bandit"].base_url], policy, group_size=1, max_steps=2)
    candidate = result.replay.groups[0].candidates[0]
    first, second = (exchange.result for exchange in candidate.exchanges)
    assert isinstance(first, ProtocolErrorResult)
    assert first.continued
    assert isinstance(second, ObservationResult)
    assert candidate.recoverable_protocol_errors == 1
    assert candidate.termination == "max_steps"
    assert candidate.episode_return == -1.0 + second.observation.reward.training_value
    segment = result.groups[0].completions[0].trajectory[1]
    assert segment.warning_prefix_len == len(segment.content.encode("utf-8"))
    assert _harness(segment.content)["recoverable"] is True


def test_recoverable_budget_exhaustion(servers: dict[str, ServerHandle], tmp_path: Path) -> None:
    policy = ScriptedPolicy(['{"arm": 99}'] * 3)
    result = collect(
        tmp_path,
        [servers["bandit"].base_url],
        policy,
        group_size=1,
        max_steps=3,
        max_recoverable_errors=1,
        protocol_error_reward=-0.5,
    )
    candidate = result.replay.groups[0].candidates[0]
    assert [e.result.continued for e in candidate.exchanges] == [True, False]  # type: ignore[union-attr]
    assert candidate.termination == "protocol_error"
    assert candidate.recoverable_protocol_errors == 2  # max + 1
    assert candidate.episode_return == -1.0
    assert candidate.has_final_state  # a budget-exhausting error is not terminal-code
    record = result.summary.rollouts[0]
    assert record.protocol_error_code == result.groups[0].completions[0].openenv.protocol_error_code
    assert record.protocol_error_code is not None


class SurrogateCounter(CounterEnvironment):
    """Amount 7 yields a lone surrogate the server cannot encode: SESSION_ERROR, then close."""

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        outcome = super()._step(action)
        if action.get("amount") == 7:
            return Outcome({**outcome.observation, "bad": "\ud800"}, 0.0, False)
        return outcome


def test_terminal_code_error_ends_the_candidate_without_state(start: Start, tmp_path: Path) -> None:
    handle = start("counter", environment=SurrogateCounter)
    policy = ScriptedPolicy(['{"amount": 1}', '{"amount": 7}', '{"amount": 1}'])
    result = collect(tmp_path, [handle.base_url], policy, group_size=1, max_steps=3)
    candidate = result.replay.groups[0].candidates[0]
    assert len(candidate.exchanges) == 2
    last = candidate.exchanges[-1].result
    assert isinstance(last, ProtocolErrorResult)
    assert not last.continued
    assert last.error.code == "SESSION_ERROR"
    assert candidate.termination == "protocol_error"
    assert not candidate.has_final_state
    assert candidate.ended_by_terminal_code
    assert "final_state" not in result.replay.to_json()["groups"][0]["candidates"][0]
    assert candidate.episode_return == 1.0 + -1.0


def test_capacity_retries_are_counted(start: Start, tmp_path: Path) -> None:
    handle = start("bandit", max_sessions=1, faults=["delay-step=0.02"])
    result = collect(
        tmp_path,
        [handle.base_url],
        group_size=2,
        concurrency=2,
        max_steps=3,
        capacity_wait_seconds=30,
    )
    assert result.summary.stats.capacity_retry_count > 0
    assert sum(c.capacity_retries for c in result.replay.groups[0].candidates) > 0


def test_invalid_model_actions(servers: dict[str, ServerHandle], tmp_path: Path) -> None:
    script = {
        "*/0": ["   "],
        "*/1": ["pull arm 3 please"],
        "*/2": ['{"arm": "three"}'],
        "*/3": ['```json\n{"arm": 1}\n```', '{"arm": 2} trailing'],
    }
    result = collect(
        tmp_path,
        [servers["bandit"].base_url],
        ScriptedPolicy(script),
        group_size=4,
        max_steps=3,
        protocol_error_reward=-2.0,
        thinking=False,
    )
    candidates = result.replay.groups[0].candidates
    completions = result.groups[0].completions
    codes = [
        _harness(c.trajectory[-1].content)["openenv_harness_error"]["code"] for c in completions
    ]
    assert codes == [
        "MODEL_ACTION_NO_OUTPUT",
        "INVALID_MODEL_ACTION",
        "ACTION_SCHEMA_VALIDATION_FAILED",
        "INVALID_MODEL_ACTION",
    ]
    for candidate, completion in zip(candidates, completions, strict=True):
        assert candidate.termination == "invalid_model_action"
        assert candidate.prefix_only
        assert len(completion.trajectory) == 2 * (len(candidate.exchanges) + 1)
        tail = completion.trajectory[-1]
        assert tail.warning_prefix_len == len(tail.content.encode("utf-8"))
    assert [len(c.exchanges) for c in candidates] == [0, 0, 0, 1]
    assert [c.episode_return for c in candidates[:3]] == [-2.0, -2.0, -2.0]
    assert completions[0].trajectory[0].content == "   "  # no output, thinking off: the raw content
    assert completions[1].trajectory[0].content == "pull arm 3 please"
    assert candidates[3].exchanges[0].action == {"arm": 1}  # fences stripped
    assert result.summary.stats.invalid_model_action_count == 4
    assert [r.steps for r in result.summary.rollouts] == [0, 0, 0, 1]


def test_thinking_joins_reasoning_in_the_action_segment(
    servers: dict[str, ServerHandle], tmp_path: Path
) -> None:
    result = collect(tmp_path, [servers["bandit"].base_url], group_size=1, max_steps=1)
    segment = result.groups[0].completions[0].trajectory[0]
    assert segment.content.startswith("</think>{")  # thinking on, no reasoning text


def test_max_steps_termination(servers: dict[str, ServerHandle], tmp_path: Path) -> None:
    result = collect(tmp_path, [servers["bandit"].base_url], group_size=2, max_steps=3)
    for candidate in result.replay.groups[0].candidates:
        assert candidate.termination == "max_steps"
        assert not candidate.terminal_done
        assert len(candidate.exchanges) == 3
    assert result.summary.stats.max_steps_count == 2


def test_done_termination(servers: dict[str, ServerHandle], tmp_path: Path) -> None:
    policy = ScriptedPolicy(['{"amount": 10}'] * 8)
    result = collect(tmp_path, [servers["counter"].base_url], policy, group_size=1, max_steps=8)
    candidate = result.replay.groups[0].candidates[0]
    assert candidate.termination == "done"
    assert candidate.terminal_done
    assert result.groups[0].completions[0].openenv.terminal_done


def test_identity_drift_publishes_nothing(start: Start, tmp_path: Path) -> None:
    handle = start("bandit", faults=["identity-drift=2"])
    with pytest.raises(EnvironmentIdentityChanged) as caught:
        collect(tmp_path, [handle.base_url], groups=2, group_size=2, max_steps=1)
    assert "metadata" in caught.value.rule
    assert handle.base_url in caught.value.rule
    assert files_in(tmp_path) == []


def test_nondeterministic_reset_publishes_nothing(start: Start, tmp_path: Path) -> None:
    handle = start("bandit", faults=["nondeterministic-reset"])
    with pytest.raises(ResetNondeterministic, match="reset\\(seed\\) must be deterministic"):
        collect(tmp_path, [handle.base_url], group_size=3, max_steps=1)
    assert files_in(tmp_path) == []


def test_transport_failure_aborts_with_nothing_published(start: Start, tmp_path: Path) -> None:
    handle = start("bandit", faults=["drop-after-steps=1"])
    with pytest.raises(EnvironmentTransport):
        collect(tmp_path, [handle.base_url], group_size=2, max_steps=3)
    assert files_in(tmp_path) == []


def test_same_controls_same_bytes(servers: dict[str, ServerHandle], tmp_path: Path) -> None:
    urls = [servers["bandit"].base_url, servers["counter"].base_url]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = collect(tmp_path / "a", urls, RandomPolicy(), groups=4, group_size=3, max_steps=4)
    second = collect(tmp_path / "b", urls, RandomPolicy(), groups=4, group_size=3, max_steps=4)
    assert first.bundle.dataset == second.bundle.dataset
    assert first.bundle.replay == second.bundle.replay
    summary_a = first.summary.to_json()
    summary_b = second.summary.to_json()
    for key in ("output_path", "replay_output_path", "summary_output_path"):
        summary_a.pop(key), summary_b.pop(key)
    assert summary_a == summary_b


def test_retained_budget_exhaustion_aborts(servers: dict[str, ServerHandle]) -> None:
    import asyncio

    from kiln_verify.errors import LimitExceeded
    from kiln_verify.openenv.collect import RetainedBudget
    from kiln_verify.openenv.collect import collect as collect_only

    controls = make_controls([servers["bandit"].base_url], groups=2, group_size=2)
    with pytest.raises(LimitExceeded, match="MAX_RETAINED_BYTES"):
        asyncio.run(collect_only(controls, RandomPolicy(), budget=RetainedBudget(bound=4000)))
