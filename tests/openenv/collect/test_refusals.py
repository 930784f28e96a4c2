"""`openenv rollout` against the oracle's three ways of not reproducing a group's game.

Over real sockets, through the CLI (`--json`), so the codes, rules and hints are the ones
a user reads, with the contract fields shown as flags. Each refusal names the conformance
case that tests its rule, offers `--no-state-check` only where the observation agreed,
and leaves nothing behind:

- `ignore-seed` (maze: another maze for the same seed): `reset_nondeterministic`, another
  observation, with or without the state check;
- `unseeded-hidden-state`: `reset_nondeterministic`, a hidden state, collected knowingly
  with `--no-state-check`;
- `ignore-episode-id`: `episode_id_ignored` when the reset names an episode id (its own
  code and hint: leave the id out of the reset options), and a clean collection when it
  does not (each session's own id is then volatile identity).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.openenv.verify import verify_bundle
from tests.openenv.collect.conftest import Start, files_in, outputs

FRESH = "(conformance case determinism.fresh-session-same-seed)"
ECHO = "(conformance case ws.episode-id-echo)"


def _rollout(url: str, directory: Path, *flags: str) -> tuple[int, Any]:
    args = ["openenv", "rollout", "--environment", url, "--json", "--groups", "2",
            "--group-size", "3", "--max-steps", "2",
            *(f"--{key.replace('_', '-')}={value}" for key, value in outputs(directory).items()),
            *flags]  # fmt: skip
    result = CliRunner().invoke(app, args)
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None


def _named_episode(directory: Path) -> str:
    options = directory.parent / f"{directory.name}-reset.json"
    options.write_text('{"episode_id": "run-7"}', encoding="utf-8")
    return str(options)


def test_a_server_that_ignores_the_seed_is_refused_with_or_without_the_state_check(
    start: Start, tmp_path: Path
) -> None:
    url = start("maze", faults=["ignore-seed"]).base_url
    for flags in ((), ("--no-state-check",)):
        code, document = _rollout(url, tmp_path, *flags)
        assert code == 1, document
        error = document["error"]
        assert error["code"] == "reset_nondeterministic"
        assert error["rule"] == (
            f"group 0 (environment 0, {url}, seed 0): candidate 1 got a different reset "
            f"observation than candidate 0; reset(seed) must be deterministic {FRESH}"
        )
        assert error["hint"] == (
            "reset(seed) must be deterministic: derive every random choice of reset from the "
            "seed"
        )
        assert files_in(tmp_path) == []


def test_an_unseeded_hidden_state_is_refused_and_collected_knowingly(
    start: Start, tmp_path: Path
) -> None:
    url = start("bandit", faults=["unseeded-hidden-state"]).base_url
    code, document = _rollout(url, tmp_path)
    assert code == 1, document
    error = document["error"]
    assert error["code"] == "reset_nondeterministic"
    assert error["rule"] == (
        f"group 0 (environment 0, {url}, seed 0): candidate 1 got the same reset observation "
        "as candidate 0 but a different hidden state (the state read right after reset differs "
        f"first at 'state.hidden_draw'); reset(seed) must be deterministic {FRESH}"
    )
    assert error["hint"].endswith(
        "(live replay reports their final states as drift), turn --state-check off "
        "(--no-state-check)"
    )
    assert files_in(tmp_path) == []
    code, document = _rollout(url, tmp_path, "--no-state-check")
    assert code == 0, document
    report = verify_bundle(tmp_path / "openenv.rollout-summary.json")
    assert (report.groups, report.rollouts) == (2, 6)


def test_an_ignored_episode_id_has_its_own_code_and_hint(start: Start, tmp_path: Path) -> None:
    url = start("bandit", faults=["ignore-episode-id"]).base_url
    out = tmp_path / "named"
    out.mkdir()
    code, document = _rollout(url, out, "--reset-options", _named_episode(out))
    assert code == 1, document
    error = document["error"]
    assert error["code"] == "episode_id_ignored"
    assert error["rule"] == (
        f"group 0 (environment 0, {url}, seed 0): candidate 0: the reset payload named "
        "episode_id 'run-7' but the state read right after reset reports another; the server "
        f"ignores a requested episode_id {ECHO}"
    )
    assert error["hint"] == (
        "the server does not keep the episode_id a reset names (OpenEnv's reset(seed, "
        "episode_id) should store it in State.episode_id): fix the environment, or leave "
        "episode_id out of --reset-options/--environment-reset-options, so that each "
        "session's own id is session identity, compared by presence and JSON type only"
    )
    assert error["drift"] == {
        "stage": "state", "environment_index": 0, "group_index": 0, "candidate_index": 0,
        "field": "state.episode_id",
    }  # fmt: skip
    assert "derive every random choice" not in json.dumps(error)
    assert files_in(out) == []
    # without a requested id, each session's fresh id is identity: the group collects
    plain = tmp_path / "plain"
    plain.mkdir()
    code, document = _rollout(url, plain)
    assert code == 0, document
    assert verify_bundle(plain / "openenv.rollout-summary.json").rollouts == 6
