"""The `collectable` verdict and rollout/replay agree on openenv 0.10.0 servers that ignore
what a reset asks for (`seed_peers.py`: the behaviours of OpenEnv's own example servers).

- `ignored-seed` is conforming but not collectable: the suite's
  `determinism.fresh-session-same-seed` is NON-STRICT, and rollout refuses its groups with
  `reset_nondeterministic`, naming that case.
- `ignored-episode-id` is collectable with `requested_episode_id: "ignored"`: rollout
  collects it by default (each session's uuid is volatile identity), refuses a reset that
  names an episode id with `episode_id_ignored` naming `ws.episode-id-echo`, and a bundle
  collected that way with the state check off is refused by replay with the same code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv")

from typer.testing import CliRunner

from kiln_verify.cli import app
from tests.interop.behaviour_kit import run_suite

pytestmark = [pytest.mark.interop, pytest.mark.slow]

FRESH = "determinism.fresh-session-same-seed"
ECHO = "ws.episode-id-echo"


@pytest.fixture
def urls(behaviour_urls: dict[str, str]) -> dict[str, str]:
    """The seed peers, served by the session's peer process."""
    return {name: behaviour_urls[name] for name in ("ignored-seed", "ignored-episode-id")}


def _rollout(url: str, directory: Path, *flags: str) -> tuple[int, Any]:
    directory.mkdir()
    args = ["openenv", "rollout", "--environment", url, "--json", "--groups", "2",
            "--group-size", "2", "--max-steps", "2",
            "--output", str(directory / "openenv.rollouts.jsonl"),
            "--replay-output", str(directory / "openenv.replay.json"),
            "--summary-output", str(directory / "openenv.rollout-summary.json"),
            *flags]  # fmt: skip
    result = CliRunner().invoke(app, args)
    return result.exit_code, json.loads(result.stdout)


def test_the_verdict_and_rollout_and_replay_agree(urls: dict[str, str], tmp_path: Path) -> None:
    process, data = run_suite(list(urls.values()), tmp_path / "report.json")
    output = process.stdout[-6000:] + process.stderr[-2000:]
    assert process.returncode == 0, output
    assert data["conforming"] is True, output
    entries = {entry["endpoint"]: entry for entry in data["collectable"]}
    seed, episode = entries[urls["ignored-seed"]], entries[urls["ignored-episode-id"]]
    assert (seed["collectable"], seed["requested_episode_id"]) == (False, "kept")
    assert {c["case"]: c["verdict"] for c in seed["cases"]} == {FRESH: "NON-STRICT", ECHO: "OK"}
    assert (episode["collectable"], episode["requested_episode_id"]) == (True, "ignored")
    assert {c["case"]: c["verdict"] for c in episode["cases"]} == {
        FRESH: "OK", ECHO: "INFORMATIONAL",
    }  # fmt: skip
    assert f"collectable   {urls['ignored-seed']}: no ({FRESH} NON-STRICT, {ECHO} OK)" in output

    code, document = _rollout(urls["ignored-seed"], tmp_path / "seed")
    assert (code, document["error"]["code"]) == (1, "reset_nondeterministic")
    assert f"(conformance case {FRESH})" in document["error"]["rule"]
    assert list((tmp_path / "seed").iterdir()) == []

    code, document = _rollout(urls["ignored-episode-id"], tmp_path / "default")
    assert code == 0, document
    options = tmp_path / "reset.json"
    options.write_text('{"episode_id": "run-7"}', encoding="utf-8")
    named = ("--reset-options", str(options))
    code, document = _rollout(urls["ignored-episode-id"], tmp_path / "named", *named)
    assert (code, document["error"]["code"]) == (1, "episode_id_ignored")
    assert f"(conformance case {ECHO})" in document["error"]["rule"]
    assert "--reset-options/--environment-reset-options" in document["error"]["hint"]
    assert list((tmp_path / "named").iterdir()) == []

    # collected anyway without the state check, the bundle is refused by replay, same code
    bundle = tmp_path / "unchecked"
    code, document = _rollout(urls["ignored-episode-id"], bundle, *named, "--no-state-check")
    assert code == 0, document
    summary = bundle / "openenv.rollout-summary.json"
    result = CliRunner().invoke(app, ["openenv", "replay", "--summary", str(summary), "--json"])
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "episode_id_ignored"
    assert error["rule"].startswith("the reset payload named episode_id 'run-7' but the live ")
    assert f"conformance case {ECHO}" in error["hint"]
