"""Live replay against a server that does not keep a requested episode id: `episode_id_ignored`.

The same cause as rollout's refusal gets the same code in replay, with replay's totals,
drifted locations and detail (it is a `ReplayDrift`), a rule that says what was asked
and a hint that points at the reset payload, never at the game's seeding:

- a bundle collected from a well-behaved oracle with `{"episode_id": "run-7"}`, replayed
  against the same game redeployed with `ignore-episode-id` (the server no longer keeps it);
- the contrast: a hidden state the seed does not fix (`unseeded-hidden-state`, collected
  knowingly with the state check off) stays `replay_drift`, with its own hint.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import EpisodeIdIgnored, ReplayDrift
from kiln_verify.openenv.replay import replay_bundle
from kiln_verify.report import engine
from tests.openenv.replay.conftest import Restart, Start, collect_bundle, manifest_of

HINT = (
    "the live server does not keep the episode_id a reset names (OpenEnv's reset(seed, "
    "episode_id) should store it in State.episode_id; conformance case ws.episode-id-echo): "
    "fix the environment, or re-collect with episode_id left out of the reset options "
    "(--reset-options), so that each session's own id is session identity, compared by "
    "presence and JSON type only"
)


def _replay_json(summary: Path) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(app, ["openenv", "replay", "--summary", str(summary), "--json"])
    error: dict[str, object] = json.loads(result.stdout)["error"]
    return result.exit_code, error


def test_a_server_that_no_longer_keeps_the_episode_id(
    start: Start, restart: Restart, tmp_path: Path
) -> None:
    handle = start("bandit")
    summary = collect_bundle(tmp_path, [handle.base_url], groups=2, group_size=2, max_steps=2,
                             reset_templates=[{"episode_id": "run-7"}])  # fmt: skip
    states = [c.final_state for g in manifest_of(summary).groups for c in g.candidates]
    assert {state["episode_id"] for state in states} == {"run-7"}
    restart(handle, faults=["ignore-episode-id"])
    for strict in (False, True):  # a payload-named id is compared exactly either way
        with pytest.raises(EpisodeIdIgnored) as caught:
            replay_bundle(summary, strict_state=strict)
        error = caught.value
        assert error.code == "episode_id_ignored"
        assert isinstance(error, ReplayDrift)
        assert error.rule.startswith(
            "the reset payload named episode_id 'run-7' but the live state does not keep it "
            "(conformance case ws.episode-id-echo): replay drift at environment 0 "
            "('BanditEnvironment') group 0 candidate 0 (state): final_state.episode_id differs at "
            """character 0: recorded '"run-7"', live '"oracle-episode-"""
        )
        assert error.rule.endswith(
            "; in all 4 of 4 candidates and 0 of 8 step exchanges drifted"
        )
        assert error.hint == HINT
        assert (error.drift["stage"], error.drift["field"]) == ("state", "final_state.episode_id")
        assert error.totals is not None
        assert error.totals["drifted_final_states"] == 4
        assert error.detail is not None
    code, document = _replay_json(summary)
    assert code == 1
    assert document["code"] == "episode_id_ignored"
    assert document["hint"] == HINT
    assert "derive every random choice" not in json.dumps(document)
    # the saved result renders as a replay report that names the cause
    saved = tmp_path / "replay.json"
    saved.write_text(json.dumps({"error": document}), encoding="utf-8")
    page = engine.replay_report(saved).data.decode()
    assert "does not keep the episode id the reset payload names (episode_id_ignored)" in page


def test_a_hidden_state_stays_replay_drift(start: Start, tmp_path: Path) -> None:
    handle = start("bandit", faults=["unseeded-hidden-state"])
    summary = collect_bundle(tmp_path, [handle.base_url], groups=1, group_size=2, max_steps=2,
                             state_check=False)  # fmt: skip
    with pytest.raises(ReplayDrift) as caught:
        replay_bundle(summary)
    error = caught.value
    assert type(error) is ReplayDrift
    assert error.drift["field"] == "final_state.hidden_draw"
    assert error.hint is not None
    assert error.hint.startswith("the hidden state differs although every observation matched")
