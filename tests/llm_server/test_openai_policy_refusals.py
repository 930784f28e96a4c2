"""What ``transformers serve`` itself answers when it refuses, and what the user then reads.

The extra pins the transformers release the suite runs (``transformers[serving]==5.24.0``),
so these are that release's own answers, over loopback sockets:

- an unknown model name: a server started on one model is pinned to it, and answers
  HTTP 400 ``{"detail": "Server is pinned to '<dir>'; requested '<name>'."}``;
- an over-long prompt: 5.24.0 does not refuse it. It answers 200 and generates past the
  model's ``max_position_embeddings`` (512 for the tiny model), logging only a warning;
  5.25.0 answers HTTP 400 ``{"detail": "The prompt has N tokens, but the model takes at
  most M, prompt and answer (`--max-model-len`)."}`` (its exact body is replayed by the
  hostile server in ``tests/openenv/policy/test_hostile_status.py``). The test asserts
  whichever the installed release does, so raising the pin makes it check the refusal.
"""

from __future__ import annotations

import asyncio
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import PolicyHttpStatus
from kiln_verify.openenv.policy.base import ZERO_CLOCK, PolicyRequest, PolicyResponse
from kiln_verify.openenv.policy.openai_compat import OpenAICompatPolicy

from .conftest import LlmServer

pytestmark = pytest.mark.slow

KEY = "sk-served-0123456789abcdef"
CONTEXT = 512  # kiln_verify.testing.tiny_model: max_position_embeddings


def _act(server: LlmServer, model: str, content: str) -> PolicyResponse:
    request = PolicyRequest.for_step(
        messages=[{"role": "user", "content": content}], action_schema={}, seed=3,
        candidate_index=0, step_index=0, temperature=1.0, max_action_tokens=4, thinking=False,
    )  # fmt: skip

    async def go() -> PolicyResponse:
        policy = OpenAICompatPolicy(
            base_url=server.base_url, model=model, api_key_env="KEY", environ={"KEY": KEY},
            clock=ZERO_CLOCK, max_retries=0,
        )  # fmt: skip
        try:
            return await policy.act(request)
        finally:
            await policy.aclose()

    return asyncio.run(go())


def test_an_unknown_model_shows_the_server_s_reason(llm_server: LlmServer) -> None:
    with pytest.raises(PolicyHttpStatus) as info:
        _act(llm_server, "no-such-model", "hello")
    said = f"Server is pinned to '{llm_server.model}'; requested 'no-such-model'."
    assert info.value.rule == (
        f"{llm_server.base_url}/chat/completions answered HTTP 400: the server says {said!r}"
    )
    assert "check model=NAME" in str(info.value.hint)
    assert KEY not in json.dumps(info.value.to_dict())


def test_an_over_long_prompt_gets_what_this_release_answers(llm_server: LlmServer) -> None:
    words = "observation " * 1200  # about 2400 tokens of the tiny BPE, far above 512
    release = tuple(int(part) for part in version("transformers").split(".")[:2])
    if release < (5, 25):
        response = _act(llm_server, llm_server.model, words)
        assert response.prompt_tokens > CONTEXT
        assert response.finish_reason == "length"
        return
    with pytest.raises(PolicyHttpStatus) as info:  # pragma: no cover - a raised pin
        _act(llm_server, llm_server.model, words)
    assert "answered HTTP 400: the server says 'The prompt has " in info.value.rule
    assert f"but the model takes at most {CONTEXT}" in info.value.rule
    assert "no longer fits the model's context" in str(info.value.hint)


def test_rollout_with_an_unknown_model_says_why_and_writes_nothing(
    llm_server: LlmServer, bandit_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    args = ["openenv", "rollout", "--environment", bandit_url, "--json",
            "--policy", "openai", "--policy-option", f"base_url={llm_server.base_url}",
            "--policy-option", "model=no-such-model", "--policy-option", "api_key_env=KEY",
            "--groups", "1", "--group-size", "2", "--max-steps", "1", "--no-thinking",
            "--output", str(out / "d.jsonl"), "--replay-output", str(out / "r.json"),
            "--summary-output", str(out / "s.json")]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"KEY": KEY})
    assert result.exit_code == 1, result.output
    error: dict[str, Any] = json.loads(result.stdout)["error"]
    assert error["code"] == "policy_http_status"
    assert "answered HTTP 400: the server says \"Server is pinned to '" in error["rule"]
    assert "requested 'no-such-model'." in error["rule"]
    assert sorted(out.iterdir()) == []
    assert KEY not in result.stdout + result.stderr
