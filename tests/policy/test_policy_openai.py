"""The openai policy against a fake /v1/chat/completions server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kiln_verify.errors import (
    CredentialReflected,
    KilnError,
    LimitExceeded,
    PolicyConfigInvalid,
    PolicyHttpStatus,
    PolicyRedirect,
    PolicyResponseInvalid,
    PolicyTransport,
)
from kiln_verify.openenv.policy.base import ZERO_CLOCK, PolicyRequest
from kiln_verify.openenv.policy.openai_compat import OpenAICompatPolicy

SECRET = "sk-test-SECRET-0123456789"
OK = {
    "choices": [
        {
            "message": {"role": "assistant", "content": '{"arm":1}', "reasoning_content": "hmm"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
}


class _Handler(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []  # noqa: RUF012 - shared test log

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        _Handler.seen.append(
            {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
        )
        mode = self.path.split("/")[1]
        if mode == "ok":
            self._send(200, json.dumps(OK).encode())
        elif mode == "redirect":
            self._send(307, b"", {"Location": "http://127.0.0.1:1/v1/chat/completions"})
        elif mode == "big":
            self._send(200, b'{"pad":"' + b"x" * 5000 + b'"}')
        elif mode == "nonjson":
            self._send(200, b"<html>not json</html>")
        elif mode == "nochoices":
            self._send(200, b'{"choices":[]}')
        elif mode == "dupkey":
            self._send(200, b'{"choices":[],"choices":[]}')
        elif mode == "echo":
            self._send(200, json.dumps({"error": str(self.headers.get("Authorization"))}).encode())
        elif mode == "status":
            self._send(500, f"boom {self.headers.get('Authorization')}".encode())
        else:
            self._send(404, b"")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


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
    async def go() -> Any:
        policy = OpenAICompatPolicy(
            base_url=f"{server}/{mode}/v1", model="tiny", clock=ZERO_CLOCK, **kwargs
        )
        try:
            return await policy.act(_request())
        finally:
            await policy.aclose()

    return asyncio.run(go())


def test_happy_path_sends_the_contract_body(server: str) -> None:
    response = _act(server, "ok", api_key_env="KEY", environ={"KEY": SECRET})
    assert response.text == '{"arm":1}'
    assert response.reasoning == "hmm"
    assert (response.prompt_tokens, response.completion_tokens, response.latency_ms) == (12, 5, 0.0)
    assert response.finish_reason == "stop"
    sent = _Handler.seen[-1]
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
    assert "chat_template_kwargs" not in _Handler.seen[-1]["body"]


@pytest.mark.parametrize(
    ("mode", "error", "kwargs"),
    [
        ("redirect", PolicyRedirect, {}),
        ("big", LimitExceeded, {"max_response_bytes": 1024}),
        ("nonjson", PolicyResponseInvalid, {}),
        ("nochoices", PolicyResponseInvalid, {}),
        ("dupkey", PolicyResponseInvalid, {}),
        ("status", PolicyHttpStatus, {}),
        ("echo", CredentialReflected, {}),
    ],
)
def test_bad_responses_are_refused_without_leaking_the_key(
    server: str, mode: str, error: type[KilnError], kwargs: dict[str, Any]
) -> None:
    with pytest.raises(error) as info:
        _act(server, mode, api_key_env="KEY", environ={"KEY": SECRET}, **kwargs)
    assert SECRET not in str(info.value)
    assert SECRET not in json.dumps(info.value.to_dict())


def test_transport_failure_and_config_errors() -> None:
    with pytest.raises(PolicyTransport):
        _act("http://127.0.0.1:9", "ok", connect_timeout_s=2.0)
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
