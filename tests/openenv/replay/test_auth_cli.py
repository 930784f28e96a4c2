"""Authenticated replay (token rotation, missing token) and the `openenv replay` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import EnvironmentHttpStatus, UsageError
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.protocol.access import EnvironmentAccess
from kiln_verify.openenv.replay import replay_bundle
from oracle.runner import ServerHandle
from tests.openenv.replay.conftest import Restart, Start, collect_bundle

ONE_STEP = ScriptedPolicy(['{"amount": 1}', '{"amount": 2}'])
OLD_TOKEN = "old-secret-token-0123456789"
NEW_TOKEN = "rotated-secret-token-9876543210"
VAR = "KILN_REPLAY_TEST_TOKEN"


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["openenv", "replay", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def rotated(
    start: Start, restart: Restart, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, ServerHandle]:
    """A bundle collected with one token, and the server restarted with a rotated token."""
    monkeypatch.setenv(VAR, OLD_TOKEN)
    handle = start("counter", faults=[f"require-bearer={VAR}"])
    summary = collect_bundle(
        tmp_path, [handle.base_url], ONE_STEP, group_size=2, max_steps=2, credential_envs=[VAR]
    )
    monkeypatch.setenv(VAR, NEW_TOKEN)
    return summary, restart(handle, faults=[f"require-bearer={VAR}"])


def test_rotated_token_replays(rotated: tuple[Path, ServerHandle]) -> None:
    summary, _ = rotated
    report = replay_bundle(summary, access=EnvironmentAccess(credential_envs=[VAR])).report
    assert report.rollouts == 2
    code, out, err = _cli("--summary", str(summary), "--credential-env", VAR, "--json")
    assert code == 0, err
    assert json.loads(out)["report"]["rollouts"] == 2
    assert NEW_TOKEN not in out + err
    assert OLD_TOKEN not in out + err


def test_missing_token_fails_cleanly(rotated: tuple[Path, ServerHandle]) -> None:
    summary, _ = rotated
    with pytest.raises(EnvironmentHttpStatus) as caught:
        replay_bundle(summary)
    assert caught.value.exit_code == 1
    assert NEW_TOKEN not in str(caught.value)
    code, out, err = _cli("--summary", str(summary), "--json")
    assert code == 1
    assert json.loads(out)["error"]["code"] == "environment_http_status"
    code, out, err = _cli("--summary", str(summary))
    assert code == 1
    assert "environment_http_status" in err
    for text in (out, err):
        assert NEW_TOKEN not in text
        assert OLD_TOKEN not in text


def test_wrong_credential_slot_count_is_usage(start: Start, tmp_path: Path) -> None:
    handle = start("counter")
    summary = collect_bundle(tmp_path, [handle.base_url], ONE_STEP, group_size=1, max_steps=2)
    with pytest.raises(UsageError):
        replay_bundle(summary, access=EnvironmentAccess(credential_envs=[None, None]))
    code, _, err = _cli("--summary", str(summary), "--credential-env", "-", "--credential-env", "-")
    assert code == 2
    assert "2 --credential-env slots for 1 captured environments" in err
    # one public slot per environment is fine
    code, _, err = _cli("--summary", str(summary), "--credential-env", "-", "--json")
    assert code == 0, err
    code, _, err = _cli("--summary", str(summary), "--concurrency", "0")
    assert code == 2


def test_cli_success_and_drift_reports(start: Start, restart: Restart, tmp_path: Path) -> None:
    handle = start("counter")
    summary = collect_bundle(tmp_path, [handle.base_url], ONE_STEP, group_size=2, max_steps=2)
    code, out, err = _cli("--summary", str(summary), "--json")
    assert code == 0, err
    printed = json.loads(out)
    assert list(printed) == ["report", "kiln_verify"]
    report = printed["report"]
    assert report["schema"] == "kiln.openenv-replay-run.v1"
    assert report["environment_exchanges"] == 4
    assert set(report) == {  # exactly Kiln's closed record, nothing of ours inside
        "schema",
        "replay_sha256",
        "environments",
        "groups",
        "rollouts",
        "environment_exchanges",
        "capacity_retries",
        "environment_prefix_only_rollouts",
    }
    # the oracle's state carries `episode_id` ("episode-<seed>"): compared by presence and type
    assert printed["kiln_verify"] == {
        "schema": "kiln-verify.replay-run-notes.v1",
        "volatile": ["final_state.episode_id"],
        "environment_remaps": [],
    }
    code, out, err = _cli("--summary", str(summary))
    assert code == 0, err
    assert "no drift" in out

    restart(handle, faults=["nondeterministic-reset"])
    code, out, _ = _cli("--summary", str(summary), "--json", "--concurrency", "1")
    assert code == 1
    error = json.loads(out)["error"]
    assert error["code"] == "replay_drift"
    assert error["drift"]["stage"] == "reset"
    assert error["drift"]["group_index"] == 0
    assert error["drift"]["field"] == "reset_observation.observation.reset_nonce"
    code, _, err = _cli("--summary", str(summary))
    assert code == 1
    assert "replay_drift" in err
    assert "field: reset_observation.observation.reset_nonce" in err


def test_offline_verification_runs_first(start: Start, tmp_path: Path) -> None:
    handle = start("counter")
    summary = collect_bundle(tmp_path, [handle.base_url], ONE_STEP, group_size=1, max_steps=2)
    handle.stop()  # no network is needed to refuse a tampered bundle
    replay = tmp_path / "openenv.replay.json"
    replay.write_bytes(replay.read_bytes().replace(b'"seed": 0', b'"seed": 1', 1))
    code, out, _ = _cli("--summary", str(summary), "--json")
    assert code == 1
    assert json.loads(out)["error"]["code"].startswith("bundle_")
