"""Live replay of freshly collected bundles succeeds and counts what it re-ran."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.protocol.access import EnvironmentAccess
from kiln_verify.openenv.records.replay import ProtocolErrorResult
from kiln_verify.openenv.records.reports import REPLAY_RUN_SCHEMA
from kiln_verify.openenv.replay import replay_bundle
from oracle.base import Outcome
from oracle.envs.counter import CounterEnvironment
from tests.openenv.replay.conftest import Start, collect_bundle, manifest_of


def test_several_environments_replay_exactly(start: Start, tmp_path: Path) -> None:
    counter, bandit, measure = start("counter"), start("bandit"), start("measure")
    summary = collect_bundle(
        tmp_path,
        [counter.base_url, bandit.base_url, measure.base_url],
        groups=3,
        group_size=2,
        max_steps=3,
        seed_start=5,
    )
    manifest = manifest_of(summary)
    report = replay_bundle(summary).report
    assert report.schema_ == REPLAY_RUN_SCHEMA
    assert report.environments == 3
    assert report.groups == 3
    assert report.rollouts == 6
    assert report.environment_exchanges == manifest.exchange_count() > 0
    assert report.capacity_retries == 0
    assert report.environment_prefix_only_rollouts == 0
    # the counter's rewards are floats; they were compared with their tag
    counter_group = manifest.groups[0]
    first = counter_group.candidates[0].exchanges[0].result
    assert first.kind == "observation"
    assert first.observation.reward.kind == "float"


def test_recoverable_error_replays_as_the_identical_error(start: Start, tmp_path: Path) -> None:
    bandit = start("bandit")
    policy = ScriptedPolicy(['{"arm": 99}', '{"arm": 0}'])
    summary = collect_bundle(tmp_path, [bandit.base_url], policy, group_size=2, max_steps=2)
    manifest = manifest_of(summary)
    first = manifest.groups[0].candidates[0].exchanges[0].result
    assert isinstance(first, ProtocolErrorResult)
    assert first.continued
    report = replay_bundle(summary, access=EnvironmentAccess(concurrency=1)).report
    assert report.environment_exchanges == 4
    assert report.rollouts == 2


class SurrogateCounter(CounterEnvironment):
    """Amount 7 yields a lone surrogate the server cannot encode: SESSION_ERROR, then close."""

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        outcome = super()._step(action)
        if action.get("amount") == 7:
            return Outcome({**outcome.observation, "bad": "\ud800"}, 0.0, False)
        return outcome


def test_terminal_code_error_replays_without_final_state(start: Start, tmp_path: Path) -> None:
    handle = start("counter", environment=SurrogateCounter)
    policy = ScriptedPolicy(['{"amount": 1}', '{"amount": 7}', '{"amount": 1}'])
    summary = collect_bundle(tmp_path, [handle.base_url], policy, group_size=1, max_steps=3)
    candidate = manifest_of(summary).groups[0].candidates[0]
    assert candidate.ended_by_terminal_code
    assert not candidate.has_final_state
    report = replay_bundle(summary).report
    assert report.environment_exchanges == 2


def test_prefix_only_candidates_replay_their_environment_prefix(
    start: Start, tmp_path: Path
) -> None:
    counter = start("counter")
    policy = ScriptedPolicy(
        {"*/0": ['{"amount": 1}', "not an action"], "*/1": ['{"amount": 1}'] * 2}
    )
    summary = collect_bundle(tmp_path, [counter.base_url], policy, group_size=2, max_steps=2)
    candidates = manifest_of(summary).groups[0].candidates
    assert [c.termination for c in candidates] == ["invalid_model_action", "max_steps"]
    report = replay_bundle(summary).report
    assert report.environment_prefix_only_rollouts == 1
    assert report.environment_exchanges == 1 + 2


def test_capacity_retries_are_counted(start: Start, tmp_path: Path) -> None:
    handle = start("bandit", max_sessions=1, faults=["delay-step=0.02"])
    summary = collect_bundle(tmp_path, [handle.base_url], group_size=2, concurrency=1, max_steps=3)
    assert all(c.capacity_retries == 0 for c in manifest_of(summary).groups[0].candidates)
    report = replay_bundle(
        summary,
        access=EnvironmentAccess(capacity_wait_seconds=30, concurrency=2),
    ).report
    assert report.capacity_retries >= 1
    assert report.rollouts == 2
