"""The openai policy refuses a chat completion that echoes its API key in any spelling.

A small hostile server on 127.0.0.1 answers every ``POST .../chat/completions`` with a
realistic completion (separated or inline reasoning, the ``reasoning`` alias, an error
object in a 200 body, a tool call) into which hypothesis puts the key, JSON-escaped, at
any position (:mod:`tests.openenv.protocol.hostile_peer`). Every case must raise exactly
``credential_reflected`` without any spelling of the key in the error; through
``kiln-verify openenv rollout`` it must also leave no file and nothing in stdout, stderr
or the log. The policy never streams (``stream: false``); the reason it quotes from a
non-2xx body is scrubbed, which ``test_hostile_status.py`` checks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import CredentialReflected
from oracle.runner import ServerHandle, start_server
from tests.openenv.policy.openai_stub import act_once, openai_rollout_args, serve
from tests.openenv.protocol.hostile_peer import (
    decodes_to_token,
    every_log_record,
    inject,
    injections,
    secret_tokens,
)

VARIABLE = "KILN_HOSTILE_API_KEY"
tokens = secret_tokens(Path(__file__).read_text(encoding="utf-8"))


def _message(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", **fields}


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "tiny",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }  # fmt: skip


TEMPLATES: dict[str, dict[str, Any]] = {
    "separated": _completion(_message(content='{"amount":1}', reasoning_content="weigh it")),
    "alias": _completion(_message(content='{"amount":1}', reasoning="weigh it")),
    "inline": _completion(_message(content='<think>weigh it</think>{"amount":1}')),
    "tool_call": _completion(_message(content=None, tool_calls=[{
        "id": "call_1", "type": "function",
        "function": {"name": "act", "arguments": '{"amount":1}'}}])),
    "error_object": {"error": {"message": "model overloaded", "type": "server_error",
                               "param": None, "code": "overloaded"}},
}  # fmt: skip


class _Hostile(BaseHTTPRequestHandler):
    body: ClassVar[bytes] = b"{}"
    served: ClassVar[int] = 0
    location: ClassVar[str | None] = None

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.location is not None:
            self.send_response(307)
            self.send_header("Location", self.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        type(self).served += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


@contextmanager
def _serving(body: str) -> Iterator[None]:
    _Hostile.body, _Hostile.served = body.encode("utf-8"), 0
    yield
    assert _Hostile.served >= 1, "the hostile completion was never asked for"


@pytest.fixture(scope="module")
def chat() -> Iterator[str]:
    with serve(_Hostile) as origin:
        yield f"{origin}/v1"


@pytest.fixture(scope="module")
def counter() -> Iterator[ServerHandle]:
    handle = start_server("counter")
    yield handle
    handle.stop()


def _act(base_url: str, token: str) -> Any:
    return act_once(base_url, api_key_env=VARIABLE, environ={VARIABLE: token})


def _body(data: st.DataObject, token: str) -> str:
    template = data.draw(st.sampled_from(sorted(TEMPLATES)), label="template")
    return inject(json.loads(json.dumps(TEMPLATES[template])), data.draw(injections(token)))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(data=st.data())
def test_act_refuses_an_escaped_key_anywhere_in_the_completion(
    chat: str, data: st.DataObject
) -> None:
    token = data.draw(tokens, label="token")
    with _serving(_body(data, token)), pytest.raises(CredentialReflected) as caught:
        _act(chat, token)
    assert caught.value.code == "credential_reflected"
    assert not decodes_to_token(token, json.dumps(caught.value.to_dict(), ensure_ascii=False))


@pytest.mark.parametrize(
    "spelled", ["sk-hostile-0123456789", "%73k-hostile-0123456789", "sk-hostile%252D0123456789"]
)
def test_a_redirect_naming_the_key_is_a_reflection(chat: str, spelled: str) -> None:
    """Raw, percent-encoded and doubly percent-encoded in the ``Location`` it would quote."""
    token = "sk-hostile-0123456789"
    _Hostile.location = f"http://127.0.0.1:1/v1?key={spelled}"
    try:
        with pytest.raises(CredentialReflected) as caught:
            _act(chat, token)
    finally:
        _Hostile.location = None
    assert not decodes_to_token(token, json.dumps(caught.value.to_dict()))


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_rollout_with_the_openai_policy_writes_nothing(
    chat: str, counter: ServerHandle, tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
) -> None:  # fmt: skip
    token = data.draw(tokens, label="token")
    out = tmp_path_factory.mktemp("rollout")
    args = openai_rollout_args(counter.base_url, chat, VARIABLE, out)
    with every_log_record() as logs, _serving(_body(data, token)):
        result = CliRunner().invoke(app, args, env={VARIABLE: token})
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["error"]["code"] == "credential_reflected"
    assert sorted(out.iterdir()) == []
    for text in (result.stdout, result.stderr, *logs):
        assert not decodes_to_token(token, text)


def test_the_same_rollout_succeeds_without_the_key_in_the_answer(
    chat: str, counter: ServerHandle, tmp_path: Path
) -> None:
    """The control: the same command and server, an honest completion."""
    args = openai_rollout_args(counter.base_url, chat, VARIABLE, tmp_path)
    with _serving(json.dumps(TEMPLATES["separated"])):
        result = CliRunner().invoke(app, args, env={VARIABLE: "sk-honest-0123456789"})
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "openenv.replay.json", "openenv.rollout-summary.json", "openenv.rollouts.jsonl",
    ]  # fmt: skip
