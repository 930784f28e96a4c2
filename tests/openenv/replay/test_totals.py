"""Replay finishes over every candidate, then fails once: first drift in detail, totals,
a window around the first differing character, and a hint that names the likely cause."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import ReplayDrift
from kiln_verify.limits import MAX_ERROR_SNIPPET_CHARS
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.protocol.access import EnvironmentAccess
from kiln_verify.openenv.replay import replay_bundle
from oracle.base import ExecutionError, Outcome
from oracle.envs.counter import CounterEnvironment
from tests.openenv.replay.conftest import Restart, Start, collect_bundle, manifest_of


def _drift(summary: Path, **kwargs: Any) -> ReplayDrift:
    with pytest.raises(ReplayDrift) as caught:
        replay_bundle(summary, **kwargs)
    assert caught.value.code == "replay_drift"
    assert caught.value.exit_code == 1
    return caught.value


def test_a_long_text_drift_shows_where_it_differs(
    start: Start, restart: Restart, tmp_path: Path
) -> None:
    # The README's environment: the bandit's reset text is several hundred characters long.
    handle = start("bandit")
    summary = collect_bundle(tmp_path, [handle.base_url], groups=3, group_size=3, max_steps=2)
    recorded = manifest_of(summary).groups[0].reset_observation.observation["input_text"]
    assert len(recorded) > 200
    restart(handle, faults=["nondeterministic-reset"])  # appends "\n(reset nonce N)"
    error = _drift(summary, access=EnvironmentAccess(concurrency=1))
    drift = error.drift
    assert (drift["stage"], drift["group_index"], drift["candidate_index"]) == ("reset", 0, 0)
    assert drift["field"] == "reset_observation.observation.input_text"
    assert drift["offset"] == len(recorded)
    # the window ends the recorded text and shows what the live one added there
    assert drift["expected"] == repr('…"' + recorded[-24:].replace("\n", "\\n") + '"')
    assert drift["actual"] == repr(
        '…"' + recorded[-24:].replace("\n", "\\n") + '\\n(reset nonce 1)"'
    )
    assert len(drift["expected"]) <= MAX_ERROR_SNIPPET_CHARS + 2
    assert f"input_text differs at character {len(recorded)}" in error.rule
    # every candidate was replayed; each reset drifted, the steps still matched
    assert error.totals == {
        "candidates": 9,
        "drifted_candidates": 9,
        "exchanges": 18,
        "drifted_exchanges": 0,
        "drifted_resets": 9,
        "drifted_final_states": 0,
        "drifted_identities": 0,
    }
    assert error.drifted is not None
    assert [(d["group_index"], d["candidate_index"]) for d in error.drifted] == [
        (g, c) for g in range(3) for c in range(3)
    ]
    assert "9 of 9 candidates and 0 of 18 step exchanges drifted" in error.rule
    # candidates of one group saw different resets for one payload: unseeded randomness
    assert error.hint is not None
    assert "reset(seed) is not reproducible" in error.hint


class IntegerRewardCounter(CounterEnvironment):
    """Same identity, but the reward is now the integer total instead of the float."""

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        outcome = super()._step(action)
        assert isinstance(outcome.reward, float)
        return Outcome(outcome.observation, int(outcome.reward), outcome.done)


def test_every_drifted_exchange_is_counted(start: Start, restart: Restart, tmp_path: Path) -> None:
    handle = start("counter")
    policy = ScriptedPolicy(['{"amount": 1}', '{"amount": 2}'])
    summary = collect_bundle(tmp_path, [handle.base_url], policy, groups=2, group_size=2,
                             max_steps=2)  # fmt: skip
    restart(handle, environment=IntegerRewardCounter)
    error = _drift(summary)
    assert (error.drift["stage"], error.drift["step_index"]) == ("step", 0)
    assert (error.drift["expected_type"], error.drift["actual_type"]) == ("float", "integer")
    assert error.totals is not None
    assert error.totals["drifted_candidates"] == 4
    assert error.totals["drifted_exchanges"] == 8  # every step of every candidate
    assert error.totals["drifted_final_states"] == 0
    assert error.hint is not None
    assert "reward's JSON type changed (float -> integer)" in error.hint
    assert error.drifted is not None
    assert [d["drifted_exchanges"] for d in error.drifted] == [2, 2, 2, 2]


class RefusesTwo(CounterEnvironment):
    """Amount 2 is now refused (a recoverable EXECUTION_ERROR); amount 1 still works."""

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if action.get("amount") == 2:
            raise ExecutionError("two is no longer allowed")
        return super()._step(action)


def test_only_the_candidates_that_drift_are_counted(
    start: Start, restart: Restart, tmp_path: Path
) -> None:
    handle = start("counter")
    policy = ScriptedPolicy(
        {"*/0": ['{"amount": 1}'] * 2, "*/1": ['{"amount": 1}', '{"amount": 2}']}
    )
    summary = collect_bundle(tmp_path, [handle.base_url], policy, groups=2, group_size=2,
                             max_steps=2)  # fmt: skip
    restart(handle, environment=RefusesTwo)
    error = _drift(summary)
    drift = error.drift
    assert (drift["group_index"], drift["candidate_index"], drift["step_index"]) == (0, 1, 1)
    assert drift["field"] == "kind"
    assert error.totals == {
        "candidates": 4,
        "drifted_candidates": 2,
        "exchanges": 8,
        "drifted_exchanges": 2,
        "drifted_resets": 0,
        "drifted_final_states": 2,  # the total stayed at 1 instead of 3
        "drifted_identities": 0,
    }
    assert error.drifted is not None
    assert [(d["group_index"], d["candidate_index"], d["stage"]) for d in error.drifted] == [
        (0, 1, "step"),
        (1, 1, "step"),
    ]
    assert error.hint is not None
    assert "action validation or rules changed" in error.hint


class ClosesOnTwo(CounterEnvironment):
    """Amount 2 now yields a lone surrogate the server cannot encode: SESSION_ERROR, close."""

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        outcome = super()._step(action)
        if action.get("amount") == 2:
            return Outcome({**outcome.observation, "bad": "\ud800"}, 0.0, False)
        return outcome


def test_exchanges_a_closed_live_session_cannot_replay_count_as_drifted(
    start: Start, restart: Restart, tmp_path: Path
) -> None:
    handle = start("counter")
    policy = ScriptedPolicy(['{"amount": 2}', '{"amount": 1}', '{"amount": 1}'])
    summary = collect_bundle(tmp_path, [handle.base_url], policy, group_size=1, max_steps=3)
    restart(handle, environment=ClosesOnTwo)
    error = _drift(summary)
    assert (error.drift["stage"], error.drift["step_index"], error.drift["field"]) == (
        "step", 0, "kind",
    )  # fmt: skip
    assert error.totals is not None
    assert error.totals["drifted_exchanges"] == 3  # the error, then two it could not send
    assert error.totals["drifted_final_states"] == 1


def test_the_cli_prints_the_window_the_totals_and_the_locations(
    start: Start, restart: Restart, tmp_path: Path
) -> None:
    handle = start("bandit")
    summary = collect_bundle(tmp_path, [handle.base_url], groups=2, group_size=2, max_steps=1)
    restart(handle, faults=["nondeterministic-reset"])
    runner = CliRunner()
    result = runner.invoke(app, ["openenv", "replay", "--summary", str(summary), "--json",
                                 "--concurrency", "1"])  # fmt: skip
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "replay_drift"
    assert error["drift"]["offset"] > 200
    assert error["totals"]["drifted_candidates"] == 4
    assert error["totals"]["drifted_resets"] == 4
    assert len(error["drifted"]) == 4
    assert "reset(seed) is not reproducible" in error["hint"]
    result = runner.invoke(app, ["openenv", "replay", "--summary", str(summary)])
    assert result.exit_code == 1
    assert "replay_drift" in result.stderr
    assert "  offset: " in result.stderr
    assert "  totals: candidates 4, drifted_candidates 4" in result.stderr
    assert "  drifted: environment 0 group 1 candidate 1 (reset)" in result.stderr


def test_an_identity_that_changes_during_the_replay_is_counted(
    start: Start, tmp_path: Path
) -> None:
    handle = start("counter", faults=["identity-drift=2"])
    policy = ScriptedPolicy(['{"amount": 1}'])
    summary = collect_bundle(tmp_path, [handle.base_url], policy, group_size=2, max_steps=1)
    error = _drift(summary)
    assert (error.drift["stage"], error.drift["when"]) == ("identity", "after replay")
    assert error.totals is not None
    assert (error.totals["drifted_candidates"], error.totals["drifted_identities"]) == (0, 1)
    assert error.hint is not None
    assert error.hint.startswith("the environment changed while it was being replayed")
    assert "a different build of the environment is deployed" in error.hint


class FloatStateCounter(CounterEnvironment):
    """Same identity and observations; the state reports the total as a float."""

    def _extra_state(self) -> dict[str, Any]:
        return {"total": float(self.total)}


def test_hidden_state_drift_names_state_the_seed_does_not_fix(
    start: Start, restart: Restart, tmp_path: Path
) -> None:
    handle = start("counter")
    policy = ScriptedPolicy(['{"amount": 1}'])
    summary = collect_bundle(tmp_path, [handle.base_url], policy, group_size=2, max_steps=1)
    restart(handle, environment=FloatStateCounter)
    error = _drift(summary)
    assert (error.drift["stage"], error.drift["field"]) == ("state", "final_state.total")
    assert error.totals is not None
    assert (error.totals["drifted_final_states"], error.totals["drifted_exchanges"]) == (2, 0)
    assert error.hint is not None
    assert "hidden state differs although every observation matched" in error.hint
