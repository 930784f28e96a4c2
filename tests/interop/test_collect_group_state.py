"""The collector's hidden-state check against openenv 0.10.0 servers that behave like real ones.

`hidden-state` answers every same-seed reset with the same observation but draws its secret
from an unseeded generator, visible only in the state: by default the group fails before
its candidates act, and `--no-state-check` collects it (live replay would then report the
drift). `uuid-episodes` (openenv init's template) gives every session a fresh episode id,
which is session identity, not a difference. `late-state` cannot answer `state` before its
first step: the check's read fails with the client's own error code and says how to skip it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv")

from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import RecoverableProtocolError, ResetNondeterministic
from kiln_verify.openenv.collect import CollectionControls, run_collection
from kiln_verify.openenv.policy.random_policy import RandomPolicy
from kiln_verify.openenv.verify import verify_bundle
from tests.openenv.collect.options import make_controls

pytestmark = pytest.mark.interop

FILES = ["openenv.replay.json", "openenv.rollout-summary.json", "openenv.rollouts.jsonl"]


@pytest.fixture
def late_state_url(behaviour_urls: dict[str, str]) -> str:
    return behaviour_urls["late-state"]


def _controls(url: str, directory: Path, **options: Any) -> CollectionControls:
    chosen = {"groups": 2, "group_size": 3, "max_steps": 2, **options}
    return make_controls(
        [url], output=str(directory / FILES[2]), replay_output=str(directory / FILES[0]),
        summary_output=str(directory / FILES[1]), **chosen,
    )  # fmt: skip


def _files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


@pytest.mark.parametrize("concurrency", [4, 1])
def test_hidden_state_fails_the_group_by_default(
    behaviour_urls: dict[str, str], tmp_path: Path, concurrency: int
) -> None:
    # concurrency 1: candidate 0 plays its whole episode first, then candidate 1 differs
    # and stops without acting, and candidate 2, the last arrival, raises
    url = behaviour_urls["hidden-state"]
    controls = _controls(url, tmp_path, concurrency=concurrency)
    with pytest.raises(ResetNondeterministic) as caught:
        asyncio.run(run_collection(controls, RandomPolicy()))
    assert caught.value.rule == (
        f"group 0 (environment 0, {url}, seed 0): candidate 1 got the same reset observation "
        "as candidate 0 but a different hidden state (the state read right after reset "
        "differs first at 'state.secret'); reset(seed) must be deterministic "
        "(conformance case determinism.fresh-session-same-seed)"
    )
    assert _files(tmp_path) == []


def test_a_single_session_server_is_checked_without_waiting(
    behaviour_urls: dict[str, str], tmp_path: Path
) -> None:
    """openenv's default of one session: the candidates take the slot one after another,
    in whatever order the server admits them, so none may wait for another's state."""
    controls = _controls(
        behaviour_urls["slow-single"], tmp_path, groups=1, max_steps=1, concurrency=3,
        capacity_wait_seconds=60,
    )  # fmt: skip
    bundle = asyncio.run(run_collection(controls, RandomPolicy()))
    assert bundle.record.rollout_count == 3
    verify_bundle(tmp_path / FILES[1])


def _rollout(url: str, directory: Path, *flags: str) -> Any:
    args = ["openenv", "rollout", "--environment", url, "--json", "--groups", "2",
            "--group-size", "3", "--max-steps", "2", "--output", str(directory / FILES[2]),
            "--replay-output", str(directory / FILES[0]),
            "--summary-output", str(directory / FILES[1]), *flags]  # fmt: skip
    return CliRunner().invoke(app, args)


def test_the_cli_fails_hidden_state_and_collects_it_with_no_state_check(
    behaviour_urls: dict[str, str], tmp_path: Path
) -> None:
    url = behaviour_urls["hidden-state"]
    refused = _rollout(url, tmp_path)
    assert refused.exit_code == 1, refused.output
    assert json.loads(refused.stdout)["error"]["code"] == "reset_nondeterministic"
    assert _files(tmp_path) == []
    collected = _rollout(url, tmp_path, "--no-state-check")
    assert collected.exit_code == 0, collected.output
    report = verify_bundle(tmp_path / FILES[1])
    assert (report.groups, report.rollouts) == (2, 6)


def test_fresh_episode_ids_are_session_identity(
    behaviour_urls: dict[str, str], tmp_path: Path
) -> None:
    result = _rollout(behaviour_urls["uuid-episodes"], tmp_path)
    assert result.exit_code == 0, result.output
    report = verify_bundle(tmp_path / FILES[1])
    assert (report.groups, report.rollouts) == (2, 6)


def test_an_episode_id_named_by_the_reset_is_echoed_and_collects(
    behaviour_urls: dict[str, str], tmp_path: Path
) -> None:
    options = tmp_path / "reset.json"
    options.write_text('{"episode_id": "run-7"}', encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    result = _rollout(behaviour_urls["uuid-episodes"], out, "--reset-options", str(options))
    assert result.exit_code == 0, result.output


def test_a_state_that_fails_after_reset_keeps_the_client_code(
    late_state_url: str, tmp_path: Path
) -> None:
    with pytest.raises(RecoverableProtocolError) as caught:
        asyncio.run(run_collection(_controls(late_state_url, tmp_path), RandomPolicy()))
    error = caught.value
    assert error.code == "environment_error_recoverable"
    assert error.rule.startswith(f"group 0 (environment 0, {late_state_url}, seed 0): candidate ")
    assert (
        ": the state read right after reset (the group's hidden-state check) failed: "
        "environment answered EXECUTION_ERROR" in error.rule
    )
    assert error.hint is not None
    assert error.hint.endswith("turn `state_check` off (--no-state-check)")
    assert _files(tmp_path) == []
    refused = _rollout(late_state_url, tmp_path)
    assert refused.exit_code == 1
    assert (
        "turn --state-check off (--no-state-check)" in json.loads(refused.stdout)["error"]["hint"]
    )
    collected = _rollout(late_state_url, tmp_path, "--no-state-check")
    assert collected.exit_code == 0, collected.output
    verify_bundle(tmp_path / FILES[1])
