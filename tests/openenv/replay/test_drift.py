"""Replay against a changed environment fails with a drift report that locates the change."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.errors import ReplayDrift
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.protocol.access import EnvironmentAccess
from kiln_verify.openenv.replay import replay_bundle
from oracle.base import JsonObject, Outcome
from oracle.envs.counter import CounterEnvironment
from tests.openenv.replay.conftest import Restart, Start, collect_bundle

ONE_STEP = ScriptedPolicy(['{"amount": 1}', '{"amount": 2}'])


def _drift(summary: Path, **kwargs: Any) -> ReplayDrift:
    with pytest.raises(ReplayDrift) as caught:
        replay_bundle(summary, **kwargs)
    assert caught.value.code == "replay_drift"
    assert caught.value.exit_code == 1
    return caught.value


def test_identity_drift_during_replay(start: Start, tmp_path: Path) -> None:
    # 2 resets during collection keep the original identity; the replay's resets drift it.
    handle = start("counter", faults=["identity-drift=2"])
    summary = collect_bundle(tmp_path, [handle.base_url], ONE_STEP, group_size=2, max_steps=2)
    error = _drift(summary)
    drift = error.drift
    assert drift["stage"] == "identity"
    assert drift["when"] == "after replay"
    assert drift["environment_index"] == 0
    fields = drift["field"].split(", ")
    assert {"metadata", "schema_sha256", "discovery_sha256", "schema.action"} <= set(fields)
    assert "+drift" in drift["actual"]
    assert "group_index" not in drift


class RenamedCounter(CounterEnvironment):
    description = "A redeployed counter with another description."


def test_identity_drift_before_replay(start: Start, restart: Restart, tmp_path: Path) -> None:
    handle = start("counter")
    summary = collect_bundle(tmp_path, [handle.base_url], ONE_STEP, group_size=1, max_steps=2)
    restart(handle, environment=RenamedCounter)
    drift = _drift(summary).drift
    assert drift["stage"] == "identity"
    assert drift["when"] == "before replay"
    assert "metadata" in drift["field"].split(", ")
    assert "another description" in drift["actual"]


def test_nondeterministic_reset_at_replay_time(
    start: Start, restart: Restart, tmp_path: Path
) -> None:
    handle = start("counter")
    summary = collect_bundle(tmp_path, [handle.base_url], ONE_STEP, group_size=2, max_steps=2)
    restart(handle, faults=["nondeterministic-reset"])
    error = _drift(summary, access=EnvironmentAccess(concurrency=1))
    drift = error.drift
    assert drift["stage"] == "reset"
    assert (drift["group_index"], drift["candidate_index"]) == (0, 0)
    assert "step_index" not in drift
    assert drift["field"] == "reset_observation.observation.reset_nonce"
    assert drift["expected"] == "<absent>"
    assert "group 0 candidate 0" in error.rule


class IntegerRewardCounter(CounterEnvironment):
    """Same identity, but the reward is now the integer total instead of the float."""

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        outcome = super()._step(action)
        assert isinstance(outcome.reward, float)
        return Outcome(outcome.observation, int(outcome.reward), outcome.done)


def test_reward_type_change_is_step_drift(start: Start, restart: Restart, tmp_path: Path) -> None:
    handle = start("counter")
    summary = collect_bundle(
        tmp_path, [handle.base_url], ONE_STEP, groups=2, group_size=2, max_steps=2
    )
    restart(handle, environment=IntegerRewardCounter)
    error = _drift(summary)
    drift = error.drift
    assert drift["stage"] == "step"
    assert (drift["group_index"], drift["candidate_index"], drift["step_index"]) == (0, 0, 0)
    assert drift["field"] == "observation.reward"
    assert (drift["expected"], drift["actual"]) == ("'1.0'", "'1'")
    assert "group 0 candidate 0 step 0" in str(error)


class FloatStateCounter(CounterEnvironment):
    """Same identity and steps; the state reports the total as a float."""

    def _extra_state(self) -> JsonObject:
        return {"total": float(self.total)}


def test_final_state_change_is_state_drift(start: Start, restart: Restart, tmp_path: Path) -> None:
    handle = start("counter")
    summary = collect_bundle(tmp_path, [handle.base_url], ONE_STEP, group_size=1, max_steps=2)
    restart(handle, environment=FloatStateCounter)
    drift = _drift(summary).drift
    assert drift["stage"] == "state"
    assert drift["field"] == "final_state.total"
    assert (drift["expected"], drift["actual"]) == ("'3'", "'3.0'")


class ErrorOnTwoCounter(CounterEnvironment):
    """Amount 2 is now refused: an observation became a protocol error."""

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if action.get("amount") == 2:
            from oracle.base import ExecutionError

            raise ExecutionError("two is no longer allowed")
        return super()._step(action)


def test_observation_replaced_by_error_is_kind_drift(
    start: Start, restart: Restart, tmp_path: Path
) -> None:
    handle = start("counter")
    summary = collect_bundle(tmp_path, [handle.base_url], ONE_STEP, group_size=1, max_steps=2)
    restart(handle, environment=ErrorOnTwoCounter)
    drift = _drift(summary).drift
    assert (drift["stage"], drift["step_index"], drift["field"]) == ("step", 1, "kind")
