"""Every drifted exchange kept for the report, bounded per candidate and per replay, in the
error's JSON only: the one-line message and the existing fields stay as they were."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import ReplayDrift
from kiln_verify.limits import (
    MAX_REPLAY_DRIFT_PATH_CHARS,
    MAX_REPLAY_DRIFTS_KEPT,
    MAX_REPLAY_DRIFTS_PER_CANDIDATE,
)
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.protocol.access import EnvironmentAccess
from kiln_verify.openenv.replay import replay_bundle
from kiln_verify.openenv.replay.candidate import CandidateOutcome, Drift
from kiln_verify.openenv.replay.compare import Difference, first_difference
from kiln_verify.openenv.replay.detail import DriftBudget
from oracle.base import Outcome
from oracle.envs.counter import CounterEnvironment
from tests.openenv.replay.conftest import Restart, Start, collect_bundle

OLD_KEYS = ["code", "rule", "hint", "drift", "totals", "drifted"]


class NoteAndFloatTotal(CounterEnvironment):
    """Every step echoes another note; the state's total turns into a float."""

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        outcome = super()._step(action)
        return Outcome({**outcome.observation, "last_note": "changed"}, outcome.reward, False)

    def _extra_state(self) -> dict[str, Any]:
        return {"total": float(self.total)}


def _drift(summary: Path) -> ReplayDrift:
    with pytest.raises(ReplayDrift) as caught:
        replay_bundle(summary, access=EnvironmentAccess(concurrency=1))
    return caught.value


def _outcome(index: int, drifts: int) -> CandidateOutcome:
    outcome = CandidateOutcome(index, exchanges=drifts, capacity_retries=0, prefix_only=False)
    for step in range(drifts):
        outcome.drifted_steps += 1
        outcome.note(Drift("step", Difference("kind", "'a'", "'b'"), step))
    return outcome


def test_a_candidate_keeps_its_first_drifts_and_counts_the_rest() -> None:
    outcome = _outcome(0, MAX_REPLAY_DRIFTS_PER_CANDIDATE + 3)
    assert [d.step_index for d in outcome.drifts] == list(range(MAX_REPLAY_DRIFTS_PER_CANDIDATE))
    assert outcome.omitted_drifts == 3
    assert outcome.first is outcome.drifts[0]


def test_one_budget_is_spent_in_replay_order() -> None:
    budget = DriftBudget(remaining=5)
    first = [_outcome(0, 3), _outcome(1, 0), _outcome(2, 3)]
    budget.spend(first)
    assert [(len(o.drifts), o.omitted_drifts) for o in first] == [(3, 0), (0, 0), (2, 1)]
    second = [_outcome(0, 2)]
    budget.spend(second)
    assert (len(second[0].drifts), second[0].omitted_drifts) == (0, 2)
    assert second[0].first is not None  # still the error's and the hint's
    assert (budget.remaining, budget.omitted_candidates) == (0, 1)
    assert DriftBudget().remaining == MAX_REPLAY_DRIFTS_KEPT


def test_a_long_path_is_cut() -> None:
    key = "k" * (MAX_REPLAY_DRIFT_PATH_CHARS * 2)
    found = first_difference({key: 1}, {key: 2}, "observation")
    assert found is not None
    assert len(found.path) == MAX_REPLAY_DRIFT_PATH_CHARS
    assert found.path.endswith("…")
    short = first_difference({"total": 1}, {"total": 2}, "final_state")
    assert short is not None
    assert short.path == "final_state.total"


def test_every_drifted_exchange_is_in_the_detail(
    start: Start, restart: Restart, tmp_path: Path
) -> None:
    handle = start("counter")
    steps = MAX_REPLAY_DRIFTS_PER_CANDIDATE + 2
    policy = ScriptedPolicy(['{"amount": 0, "note": "kept"}'] * steps)
    summary = collect_bundle(tmp_path, [handle.base_url], policy, groups=2, group_size=2,
                             max_steps=steps)  # fmt: skip
    restart(handle, environment=NoteAndFloatTotal)
    error = _drift(summary)
    out = error.to_dict()
    assert list(out) == [*OLD_KEYS, "detail"]
    detail = out["detail"]
    assert str(error).count("\n") == 0
    assert "omitted" not in str(error)
    assert detail["replay_sha256"].startswith("sha256:")
    assert (detail["environments"], detail["groups"]) == (1, 2)
    assert detail["volatile"] == ["final_state.episode_id"]
    assert "environment_remaps" not in detail
    assert (detail["omitted_candidates"], detail["identities"]) == (0, [])
    assert [(c["group_index"], c["candidate_index"]) for c in detail["candidates"]] == [
        (0, 0), (0, 1), (1, 0), (1, 1),
    ]  # fmt: skip
    for candidate in detail["candidates"]:
        assert candidate["exchanges"] == candidate["drifted_exchanges"] == steps
        assert (candidate["reset_drifted"], candidate["state_drifted"]) == (False, True)
        assert [d["step_index"] for d in candidate["drifts"]] == list(
            range(MAX_REPLAY_DRIFTS_PER_CANDIDATE)
        )
        assert candidate["omitted_drifts"] == steps + 1 - MAX_REPLAY_DRIFTS_PER_CANDIDATE
        assert candidate["environment_name"] == "'CounterEnvironment'"
    first = detail["candidates"][0]["drifts"][0]
    assert first == {
        "stage": "step",
        "step_index": 0,
        "field": "observation.observation.last_note",
        "expected": repr('"kept"'),
        "actual": repr('"changed"'),
        "offset": 0,
    }
    # the first kept drift is the error's own drift, field for field
    assert {key: out["drift"][key] for key in first} == first
    assert out["totals"]["drifted_exchanges"] == 4 * steps


def test_the_detail_is_in_json_only(start: Start, restart: Restart, tmp_path: Path) -> None:
    handle = start("counter")
    policy = ScriptedPolicy(['{"amount": 0, "note": "kept"}'])
    summary = collect_bundle(tmp_path, [handle.base_url], policy, group_size=1, max_steps=1)
    restart(handle, environment=NoteAndFloatTotal)
    runner = CliRunner()
    args = ["openenv", "replay", "--summary", str(summary)]
    printed = runner.invoke(app, [*args, "--json"])
    assert printed.exit_code == 1
    error = json.loads(printed.stdout)["error"]
    assert [c["candidate_index"] for c in error["detail"]["candidates"]] == [0]
    human = runner.invoke(app, args)
    assert human.exit_code == 1
    assert "detail" not in human.stderr
    assert "omitted" not in human.stderr
    assert human.stderr.count("\n") == len(error["drift"]) + 3  # message, totals, 1 location


def test_identity_drift_before_the_replay_has_a_detail_without_totals(
    start: Start, restart: Restart, tmp_path: Path
) -> None:
    handle = start("counter")
    policy = ScriptedPolicy(['{"amount": 1}'])
    summary = collect_bundle(tmp_path, [handle.base_url], policy, group_size=1, max_steps=1)
    restart(handle, "bandit")
    out = _drift(summary).to_dict()
    assert "totals" not in out
    assert "drifted" not in out
    assert (out["drift"]["stage"], out["drift"]["when"]) == ("identity", "before replay")
    detail = out["detail"]
    assert (detail["candidates"], detail["omitted_candidates"]) == ([], 0)
    assert detail["identities"] == [out["drift"]]
