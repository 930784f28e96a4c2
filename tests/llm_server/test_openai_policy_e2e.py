"""The ``openai`` policy end to end against ``transformers serve`` (a real OpenAI-compatible
server nobody here wrote) on the warm-started tiny model, over loopback sockets.

``rollout --policy openai`` against a live bandit oracle, then offline ``verify``, live
``replay`` and a live ``evaluate`` with the openai policy on both sides. Before the fix the
first model call crashed inside httpcore's anyio lock: the collector resumed the policy
call in another task than the one that had started it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app

from .conftest import LlmServer

pytestmark = pytest.mark.slow


def _invoke(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == code, result.output[-4000:]
    return json.loads(result.stdout)


def _policy(server: LlmServer, prefix: str = "") -> list[str]:
    flag = f"--{prefix}policy-option"
    return [f"--{prefix}policy", "openai", flag, f"base_url={server.base_url}",
            flag, f"model={server.model}"]  # fmt: skip


def test_rollout_verify_replay_and_evaluate_through_a_real_llm_server(
    llm_server: LlmServer, bandit_url: str, tmp_path: Path
) -> None:
    files = ["--output", str(tmp_path / "d.jsonl"), "--replay-output", str(tmp_path / "r.json"),
             "--summary-output", str(tmp_path / "s.json")]  # fmt: skip
    collected = _invoke(
        "openenv", "rollout", "--environment", bandit_url, *_policy(llm_server),
        "--groups", "4", "--group-size", "2", "--max-steps", "2", "--no-thinking",
        "--max-action-tokens", "16", "--concurrency", "2", *files,
    )  # fmt: skip
    stats = collected["stats"]
    # usage counts and latency come from the server's own response
    assert stats["total_model_tokens"] > 0
    assert stats["mean_model_latency_ms"] > 0
    # the warm-started model plays: some episodes reach the environment
    assert stats["total_environment_steps"] > 0, stats

    verified = _invoke("openenv", "verify", "--summary", str(tmp_path / "s.json"))
    assert verified["rollouts"] == 8
    replayed = _invoke("openenv", "replay", "--summary", str(tmp_path / "s.json"))
    assert replayed["report"]["schema"] == "kiln.openenv-replay-run.v1"

    receipt = _invoke(
        "openenv", "evaluate", "--environment", bandit_url,
        *_policy(llm_server, "baseline-"), *_policy(llm_server, "candidate-"),
        "--groups", "3", "--max-steps", "1", "--no-thinking", "--max-action-tokens", "16",
        "--output-dir", str(tmp_path / "eval"),
    )  # fmt: skip
    assert receipt["evidence"]["paired_groups"] == 3
    assert receipt["evidence"]["decision"] == "diagnostic"
    for side in ("baseline", "candidate"):
        _invoke("openenv", "verify", "--summary",
                str(tmp_path / "eval" / side / "openenv.rollout-summary.json"))  # fmt: skip
