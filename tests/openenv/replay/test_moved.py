"""Replay where the environment moved: ``--environment-url OLD=NEW`` against an oracle
restarted on another port, and ``--oracle [NAME]`` (the README's main job, end to end)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import EnvironmentTransport, ReplayDrift, UsageError
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.records.reports import EnvironmentRemap
from kiln_verify.openenv.replay import parse_environment_url, replay_bundle
from oracle.envs.counter import CounterEnvironment
from tests.openenv.replay.conftest import Start, collect_bundle

ONE_STEP = ScriptedPolicy(['{"amount": 1}', '{"amount": 2}'])


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["openenv", *args])
    return result.exit_code, result.stdout, result.stderr


# --- --environment-url OLD=NEW ---------------------------------------------------------------


def test_a_moved_deployment_replays_with_the_remap_recorded(start: Start, tmp_path: Path) -> None:
    old = start("counter")
    summary = collect_bundle(tmp_path, [old.base_url], ONE_STEP, groups=2, max_steps=2)
    old.stop()
    new = start("counter")  # the same build, now on another port
    assert new.port != old.port
    with pytest.raises(EnvironmentTransport):  # the recorded address is gone
        replay_bundle(summary)
    result = replay_bundle(
        summary, environment_urls=[parse_environment_url(f"{old.base_url}={new.base_url}")]
    )
    assert result.report.rollouts == 4
    assert result.notes.environment_remaps == [
        EnvironmentRemap(
            environment_index=0,
            recorded_base_url=old.base_url,
            base_url=new.base_url,
            source="environment_url",
        )
    ]
    # spelled without a scheme and with a trailing slash: normalized like the client does
    host = new.base_url.removeprefix("http://")
    code, out, err = _cli("replay", "--summary", str(summary), "--json",
                          "--environment-url", f"{old.base_url}/={host}/")  # fmt: skip
    assert code == 0, err
    document = json.loads(out)["kiln_verify"]
    assert document["environment_remaps"] == [
        {
            "environment_index": 0,
            "recorded_base_url": old.base_url,
            "base_url": new.base_url,
            "source": "environment_url",
        }
    ]
    assert document["volatile"] == ["final_state.episode_id"]
    code, out, err = _cli("replay", "--summary", str(summary),
                          "--environment-url", f"{old.base_url}={new.base_url}")  # fmt: skip
    assert code == 0, err
    assert "no drift" in out
    assert "(--environment-url)" in out


def test_only_the_named_environment_moves(start: Start, tmp_path: Path) -> None:
    counter, bandit = start("counter"), start("bandit")
    summary = collect_bundle(tmp_path, [counter.base_url, bandit.base_url], groups=2)
    bandit.stop()
    moved = start("bandit")
    result = replay_bundle(
        summary, environment_urls=[parse_environment_url(f"{bandit.base_url}={moved.base_url}")]
    )
    assert result.report.environments == 2
    assert [(r.environment_index, r.base_url) for r in result.notes.environment_remaps] == [
        (1, moved.base_url)
    ]


class RenamedCounter(CounterEnvironment):
    description = "A redeployed counter with another description."


def test_every_other_identity_field_is_still_compared(start: Start, tmp_path: Path) -> None:
    old = start("counter")
    summary = collect_bundle(tmp_path, [old.base_url], ONE_STEP, max_steps=2)
    other = start("counter", environment=RenamedCounter)
    with pytest.raises(ReplayDrift) as caught:
        replay_bundle(
            summary, environment_urls=[parse_environment_url(f"{old.base_url}={other.base_url}")]
        )
    drift = caught.value.drift
    assert (drift["stage"], drift["when"]) == ("identity", "before replay")
    changed = drift["field"].split(", ")
    assert "metadata" in changed
    assert "base_url" not in changed
    assert "websocket_url" not in changed
    assert "another description" in drift["actual"]
    assert caught.value.totals is None  # nothing is replayed against a different build
    assert caught.value.hint is not None
    assert "a different build of the environment is deployed" in caught.value.hint
    # a server of another environment altogether: the hint says so and names the mapping
    bandit = start("bandit")
    with pytest.raises(ReplayDrift) as caught:
        replay_bundle(
            summary, environment_urls=[parse_environment_url(f"{old.base_url}={bandit.base_url}")]
        )
    assert caught.value.hint is not None
    assert "hosts a different environment" in caught.value.hint
    assert f"check --environment-url: it points at {bandit.base_url}" in caught.value.hint


def test_remap_usage_errors(start: Start, tmp_path: Path) -> None:
    handle = start("counter")
    summary = collect_bundle(tmp_path, [handle.base_url], ONE_STEP, max_steps=2)
    with pytest.raises(UsageError) as caught:
        replay_bundle(summary, environment_urls=[parse_environment_url("http://10.9.9.9:1=x:2")])
    assert (
        caught.value.hint
        == f"OLD must be a recorded base URL; the bundle recorded: {handle.base_url}"
    )
    twice = parse_environment_url(f"{handle.base_url}={handle.base_url}")
    with pytest.raises(UsageError, match="twice"):
        replay_bundle(summary, environment_urls=[twice, twice])
    for text in ("no-equals-sign", "=http://x:1", "http://x:1=", "ftp://x:1=http://y:1"):
        with pytest.raises(UsageError):
            parse_environment_url(text)
    code, out, _ = _cli("replay", "--summary", str(summary), "--json",
                        "--environment-url", "nonsense")  # fmt: skip
    assert code == 2
    assert json.loads(out)["error"]["code"] == "usage"
    code, out, _ = _cli("replay", "--summary", str(summary), "--json", "--oracle",
                        "--environment-url", f"{handle.base_url}={handle.base_url}")  # fmt: skip
    assert code == 2
    assert "exclude each other" in json.loads(out)["error"]["rule"]


# --- --oracle [NAME] ------------------------------------------------------------------------


def test_the_readme_main_job_rollout_verify_replay(tmp_path: Path) -> None:
    """`rollout` (embedded bandit), `verify`, `replay --oracle`, as the README runs them."""
    paths = {
        "--output": str(tmp_path / "openenv.rollouts.jsonl"),
        "--replay-output": str(tmp_path / "openenv.replay.json"),
        "--summary-output": str(tmp_path / "openenv.rollout-summary.json"),
    }
    flags = [item for pair in paths.items() for item in pair]
    code, out, err = _cli("rollout", *flags, "--groups", "2", "--group-size", "2",
                          "--max-steps", "3", "--json")  # fmt: skip
    assert code == 0, err
    summary = paths["--summary-output"]
    code, out, err = _cli("verify", "--summary", summary, "--json")
    assert code == 0, err
    replay = json.loads(Path(paths["--replay-output"]).read_text(encoding="utf-8"))
    recorded = replay["environments"][0]["identity"]["base_url"]
    # the oracle the bundle was collected from is gone; replay starts a fresh one
    code, out, err = _cli("replay", "--summary", summary, "--oracle", "--json")
    assert code == 0, err
    printed = json.loads(out)
    report = printed["report"]
    assert report["rollouts"] == 4
    assert (
        report["environment_exchanges"]
        == json.loads(Path(summary).read_text(encoding="utf-8"))["stats"]["total_environment_steps"]
    )
    (remap,) = printed["kiln_verify"]["environment_remaps"]
    assert remap["recorded_base_url"] == recorded
    assert remap["base_url"] != recorded
    assert remap["base_url"].startswith("http://127.0.0.1:")
    assert (remap["source"], remap["oracle"]) == ("oracle", "bandit")
    code, out, err = _cli("replay", "--summary", summary, "--oracle", "bandit")
    assert code == 0, err
    assert "no drift" in out
    assert "(oracle bandit)" in out
    # the wrong oracle is another environment: drift, with the way out in the hint
    code, out, err = _cli("replay", "--summary", summary, "--json", "--oracle", "counter")
    assert code == 1
    error = json.loads(out)["error"]
    assert (error["code"], error["drift"]["stage"]) == ("replay_drift", "identity")
    assert "--oracle counter serves another environment" in error["hint"]
    code, out, err = _cli("replay", "--summary", summary, "--json", "--oracle", "no-such")
    assert code == 2
    assert "cannot start the embedded oracle" in json.loads(out)["error"]["rule"]


class StrangerCounter(CounterEnvironment):
    class_name = "StrangerEnvironment"


def test_oracle_needs_a_matching_server(start: Start, tmp_path: Path) -> None:
    handle = start("counter", environment=StrangerCounter)
    summary = collect_bundle(tmp_path, [handle.base_url], ONE_STEP, max_steps=2)
    code, out, _ = _cli("replay", "--summary", str(summary), "--json", "--oracle")
    assert code == 2
    error = json.loads(out)["error"]
    assert "no embedded oracle server matches" in error["rule"]
    assert "'StrangerEnvironment'" in error["rule"]
    counter, bandit = start("counter"), start("bandit")
    (tmp_path / "both").mkdir()
    both = collect_bundle(tmp_path / "both", [counter.base_url, bandit.base_url], groups=2)
    code, out, _ = _cli("replay", "--summary", str(both), "--json", "--oracle", "counter")
    assert code == 2
    assert "serves one environment" in json.loads(out)["error"]["rule"]
    # without a name every captured environment gets the oracle server that matches it
    code, out, err = _cli("replay", "--summary", str(both), "--json", "--oracle")
    assert code == 0, err
    remaps = json.loads(out)["kiln_verify"]["environment_remaps"]
    assert [(r["environment_index"], r["oracle"]) for r in remaps] == [
        (0, "counter"),
        (1, "bandit"),
    ]
