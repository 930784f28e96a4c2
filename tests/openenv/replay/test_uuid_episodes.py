"""Replay on an environment that gives every reset a fresh uuid4 episode id (`openenv init`'s
template, served by openenv 0.10.0's own `create_app`): clean by default, drift under
``--strict-state``, exact when the reset payload names the episode id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("openenv")

from kiln_verify.cli import app
from kiln_verify.errors import ReplayDrift
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.replay import replay_bundle
from tests.openenv.replay.conftest import collect_bundle, manifest_of

pytestmark = pytest.mark.interop

ECHO = ScriptedPolicy(['{"message": "hello"}', '{"message": "kiln"}'])


@pytest.fixture
def uuid_bundle(behaviour_urls: dict[str, str], tmp_path: Path) -> Path:
    url = behaviour_urls["uuid-episodes"]
    summary = collect_bundle(tmp_path, [url], ECHO, groups=2, group_size=2, max_steps=2)
    states = [c.final_state for g in manifest_of(summary).groups for c in g.candidates]
    ids = [state["episode_id"] for state in states]
    assert all(isinstance(value, str) and len(value) == 36 for value in ids)
    assert len(set(ids)) == 4  # a fresh uuid per reset: never reproducible by value
    return summary


def test_uuid_episode_ids_replay_clean_by_default(uuid_bundle: Path) -> None:
    replayed = replay_bundle(uuid_bundle)
    assert replayed.report.rollouts == 4
    assert replayed.notes.volatile == ["final_state.episode_id"]
    result = CliRunner().invoke(app, ["openenv", "replay", "--summary", str(uuid_bundle),
                                      "--json"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert "volatile" not in printed["report"]  # Kiln's record stays exactly Kiln's
    assert printed["kiln_verify"]["volatile"] == ["final_state.episode_id"]


def test_strict_state_reports_the_uuid_as_drift(uuid_bundle: Path) -> None:
    with pytest.raises(ReplayDrift) as caught:
        replay_bundle(uuid_bundle, strict_state=True)
    error = caught.value
    assert (error.drift["stage"], error.drift["field"]) == ("state", "final_state.episode_id")
    assert error.drift["group_index"] == 0
    assert error.totals is not None
    assert error.totals["drifted_candidates"] == 4
    assert error.totals["drifted_final_states"] == 4
    assert error.totals["drifted_exchanges"] == 0
    assert error.hint is not None
    assert "final_state.episode_id is session identity" in error.hint
    assert "without --strict-state" in error.hint
    result = CliRunner().invoke(app, ["openenv", "replay", "--summary", str(uuid_bundle),
                                      "--strict-state", "--json"])  # fmt: skip
    assert result.exit_code == 1
    document = json.loads(result.stdout)["error"]
    assert document["code"] == "replay_drift"
    assert document["drift"]["field"] == "final_state.episode_id"
    assert document["totals"]["drifted_candidates"] == 4


def test_an_episode_id_the_payload_sets_is_compared_exactly(
    behaviour_urls: dict[str, str], tmp_path: Path
) -> None:
    url = behaviour_urls["uuid-episodes"]
    summary = collect_bundle(tmp_path, [url], ECHO, group_size=2, max_steps=2,
                             reset_templates=[{"episode_id": "run-7"}])  # fmt: skip
    group = manifest_of(summary).groups[0]
    assert group.reset_payload["episode_id"] == "run-7"
    assert {c.final_state["episode_id"] for c in group.candidates} == {"run-7"}
    # the server keeps the id it is given: exact, even under --strict-state; nothing volatile
    for strict in (False, True):
        assert replay_bundle(summary, strict_state=strict).notes.volatile == []
