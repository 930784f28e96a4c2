"""The openai policy against a small OpenAI-compatible stub on 127.0.0.1 (real sockets).

Every error path a real server can produce but rarely does on demand: redirects, 4xx and
5xx, 429 with and without ``Retry-After``, slow answers, refused connections, TLS to a
plain-HTTP server, malformed and oversized bodies, credential echoes; and the three places
servers put reasoning. Every error names the endpoint URL and never the API key. The real
server (``transformers serve``) is in ``tests/llm_server``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from kiln_verify.errors import (
    CredentialReflected,
    KilnError,
    LimitExceeded,
    PolicyConfigInvalid,
    PolicyHttpStatus,
    PolicyRateLimited,
    PolicyRedirect,
    PolicyResponseInvalid,
    PolicyTimeout,
    PolicyTransport,
)
from kiln_verify.openenv.policy.base import ZERO_CLOCK, PolicyRequest
from kiln_verify.openenv.policy.openai_compat import OpenAICompatPolicy
from kiln_verify.openenv.policy.openai_response import split_inline
from kiln_verify.openenv.policy.registry import build_policy
from tests.openenv.collect.options import make_controls
from tests.openenv.policy.openai_stub import StubHandler, stub_server

SECRET = "sk-test-SECRET-0123456789"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with stub_server() as origin:
        yield origin


def _request() -> PolicyRequest:
    return PolicyRequest.for_step(
        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        action_schema={},
        seed=9,
        candidate_index=1,
        step_index=0,
        temperature=0.5,
        max_action_tokens=32,
        thinking=False,
    )


def _act(server: str, mode: str, **kwargs: Any) -> Any:
    kwargs.setdefault("retry_backoff_s", 0.01)

    async def go() -> Any:
        policy = OpenAICompatPolicy(
            base_url=f"{server}/{mode}/v1", model="tiny", clock=ZERO_CLOCK, **kwargs
        )
        try:
            return await policy.act(_request())
        finally:
            await policy.aclose()

    return asyncio.run(go())


def _attempts(mode: str) -> int:
    return StubHandler.counts.get(mode, 0)


def test_happy_path_sends_the_contract_body(server: str) -> None:
    response = _act(server, "ok", api_key_env="KEY", environ={"KEY": SECRET})
    assert response.text == '{"arm":1}'
    assert response.reasoning == "hmm"
    assert (response.prompt_tokens, response.completion_tokens, response.latency_ms) == (12, 5, 0.0)
    assert response.finish_reason == "stop"
    sent = StubHandler.seen[-1]
    assert sent["path"] == "/ok/v1/chat/completions"
    assert sent["auth"] == f"Bearer {SECRET}"
    body = sent["body"]
    assert body["seed"] == _request().generation_seed
    assert (body["n"], body["stream"], body["max_tokens"], body["temperature"]) == (
        1,
        False,
        32,
        0.5,
    )
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["model"] == "tiny"


def test_template_kwargs_can_be_left_out(server: str) -> None:
    _act(server, "ok", send_template_kwargs=False)
    assert "chat_template_kwargs" not in StubHandler.seen[-1]["body"]


@pytest.mark.parametrize(
    ("mode", "error", "kwargs", "fragment"),
    [
        ("redirect", PolicyRedirect, {}, "answered HTTP 307 redirecting to 'http://127.0.0.1:1/"),
        ("big", LimitExceeded, {"max_response_bytes": 1024}, "MAX_POLICY_RESPONSE_BYTES = 1024"),
        ("big-chunked", LimitExceeded, {"max_response_bytes": 1024}, "(got at least 2"),
        ("nonjson", PolicyResponseInvalid, {}, "is not one strict JSON object"),
        ("nochoices", PolicyResponseInvalid, {}, "has no choices[0] object"),
        ("dupkey", PolicyResponseInvalid, {}, "(json_duplicate_key)"),
        ("status", PolicyHttpStatus, {}, "answered HTTP 500"),
        ("unauthorized", PolicyHttpStatus, {}, "answered HTTP 401"),
        ("echo", CredentialReflected, {}, ""),
        ("reasoning-conflict", PolicyResponseInvalid, {}, "two different reasoning texts"),
        ("limited", PolicyRateLimited, {"max_retries": 2}, "HTTP 429 (too many requests) after 3"),
        ("limited-long", PolicyRateLimited, {}, "after 1 attempt"),
        ("slow", PolicyTimeout, {"timeout_s": 0.3}, "did not answer within 0.3 s"),
    ],
)
def test_bad_responses_are_refused_with_the_url_and_without_the_key(
    server: str, mode: str, error: type[KilnError], kwargs: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(error) as info:
        _act(server, mode, api_key_env="KEY", environ={"KEY": SECRET}, **kwargs)
    text = str(info.value)
    assert fragment in text
    if error is not CredentialReflected:
        assert f"{server}/{mode}/v1/chat/completions" in text
    assert SECRET not in text
    assert SECRET not in json.dumps(info.value.to_dict())


def test_a_401_says_to_check_the_api_key(server: str) -> None:
    with pytest.raises(PolicyHttpStatus) as info:
        _act(server, "unauthorized")
    assert "api_key_env" in str(info.value.hint)


def test_429_and_503_are_retried_and_then_answer(server: str) -> None:
    assert _act(server, "limited-twice").text == '{"arm":1}'
    assert _attempts("limited-twice") == 3
    assert _act(server, "unavailable-once").text == '{"arm":1}'
    assert _attempts("unavailable-once") == 2


def test_other_failures_are_not_retried(server: str) -> None:
    for mode, error in (("status", PolicyHttpStatus), ("slow", PolicyTimeout)):
        before = _attempts(mode)
        with pytest.raises(error):
            _act(server, mode, timeout_s=0.3)
        assert _attempts(mode) == before + 1


def test_retries_can_be_turned_off_and_are_bounded() -> None:
    with pytest.raises(PolicyConfigInvalid):
        OpenAICompatPolicy(base_url="http://127.0.0.1:9/v1", model="m", max_retries=11)
    policy = build_policy("openai", {"base_url": "http://127.0.0.1:9/v1", "model": "m",
                                     "max_retries": "0"})  # fmt: skip
    assert isinstance(policy, OpenAICompatPolicy)
    asyncio.run(policy.aclose())
    with pytest.raises(PolicyConfigInvalid):
        build_policy("openai", {"base_url": "http://x/v1", "model": "m", "max_retries": "-1"})


def test_a_refused_connection_names_the_url_after_its_retries() -> None:
    with pytest.raises(PolicyTransport) as info:
        _act("http://127.0.0.1:9", "ok", connect_timeout_s=2.0, max_retries=1)
    assert "http://127.0.0.1:9/ok/v1/chat/completions" in str(info.value)
    assert "after 2 attempts" in str(info.value)


def test_https_to_a_plain_http_server_says_so(server: str) -> None:
    secure = server.replace("http://", "https://")
    with pytest.raises(PolicyTransport) as info:
        _act(secure, "ok", max_retries=0)
    assert "does not speak https" in str(info.value)
    assert "use http://" in str(info.value)


@pytest.mark.parametrize(
    ("mode", "text", "reasoning", "finish"),
    [
        ("ok", '{"arm":1}', "hmm", "stop"),
        ("reasoning", '{"arm":1}', "alias", "stop"),
        ("reasoning-both", "x", "a", "stop"),
        ("inline", '{"arm":3}', "\nweigh arms", "stop"),
        ("inline-open", "", "still thinking", "length"),
        ("action", '{"arm": 2}', None, "stop"),
    ],
)
def test_reasoning_is_read_wherever_the_server_puts_it(
    server: str, mode: str, text: str, reasoning: str | None, finish: str
) -> None:
    response = _act(server, mode)
    assert (response.text, response.reasoning, response.finish_reason) == (text, reasoning, finish)


def test_inline_split_rule() -> None:
    assert split_inline('{"a":1}') == (None, '{"a":1}')
    assert split_inline('<think>x</think>{"a":1}') == ("x", '{"a":1}')
    assert split_inline('  <think>x</think></think>y') == ("x", "</think>y")
    assert split_inline("plain</think>after") == ("plain", "after")
    assert split_inline("<think>open") == ("open", "")


def test_transport_failure_and_config_errors() -> None:
    with pytest.raises(PolicyConfigInvalid):
        OpenAICompatPolicy(base_url="ftp://x/v1", model="m")
    with pytest.raises(PolicyConfigInvalid):
        OpenAICompatPolicy(base_url="http://u:p@127.0.0.1/v1", model="m")
    with pytest.raises(PolicyConfigInvalid) as info:
        OpenAICompatPolicy(
            base_url="http://example.com/v1", model="m", api_key_env="KEY", environ={"KEY": SECRET}
        )
    assert SECRET not in str(info.value)


def test_identity_never_contains_the_key(server: str) -> None:
    policy = OpenAICompatPolicy(
        base_url=f"{server}/ok/v1", model="tiny", api_key_env="KEY", environ={"KEY": SECRET}
    )
    identity = policy.identity()
    assert SECRET not in json.dumps(identity.to_dict())
    assert "KEY" not in json.dumps(identity.to_dict())
    asyncio.run(policy.aclose())


def test_grpo_output_refusal_says_why(tmp_path: Any) -> None:
    from kiln_verify.errors import PolicyProvenanceMissing
    from kiln_verify.openenv.collect import grpo_tokenizer

    controls = make_controls(
        ["http://127.0.0.1:9"], groups=1, group_size=2, max_steps=1,
        grpo_output=str(tmp_path / "g.jsonl"), output=str(tmp_path / "d"),
        replay_output=str(tmp_path / "r"), summary_output=str(tmp_path / "s"),
    )  # fmt: skip
    policy = OpenAICompatPolicy(base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(PolicyProvenanceMissing) as info:
        grpo_tokenizer(controls, policy)
    asyncio.run(policy.aclose())
    assert "a chat-completions API returns text, not the sampled token ids" in str(info.value)
