"""The openai policy against a hostile server that refuses: real sockets on 127.0.0.1.

A small HTTP server answers every chat-completions call with a status (400, 422, 500, 503)
and a body hypothesis builds: a FastAPI ``detail`` (string or validation list), an OpenAI
``error`` object, plain text, an HTML page, binary bytes or a body far above
``MAX_POLICY_ERROR_BODY_BYTES`` (with and without a length, or never ending), each with the
API key in it (raw, JSON- or Python-escaped, percent-encoded, base64 as in a ``Basic``
header) or not. Every answer must give exactly ``policy_http_status`` naming the status,
a bounded message and no spelling of the key; through ``kiln-verify openenv rollout`` it
must also leave no file and nothing in stdout, stderr or the log. ``transformers serve``'s
own refusals are in ``tests/llm_server/test_openai_policy_refusals.py``.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import PolicyHttpStatus
from kiln_verify.limits import MAX_PEER_REASON_CHARS, MAX_POLICY_ERROR_BODY_BYTES
from oracle.runner import ServerHandle, start_server
from tests.openenv.policy.openai_stub import act_once, openai_rollout_args, serve
from tests.openenv.protocol.hostile_peer import (
    decodes_to_token,
    escaped_spellings,
    every_log_record,
    json_body,
    secret_tokens,
)

VARIABLE = "KILN_REFUSING_API_KEY"
STATUSES = (400, 422, 500, 503)
tokens = secret_tokens(Path(__file__).read_text(encoding="utf-8"))
SLOW_FIXTURE = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
PROMPT_TOO_LONG = (
    "The prompt has 1248 tokens, but the model takes at most 512, prompt and answer "
    "(`--max-model-len`)."
)  # transformers 5.25.0 serve's own words (cli/serving/utils.py `_check_prompt_length`)


class _Refusing(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    status: ClassVar[int] = 400
    body: ClassVar[bytes] = b""
    content_type: ClassVar[str] = "application/json"
    delivery: ClassVar[str] = "length"  # length | chunked | endless | stall
    served: ClassVar[int] = 0

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).served += 1
        self.send_response(self.status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Connection", "close")
        # the policy may read what it needs and hang up: the point of some cases
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._deliver()

    def _deliver(self) -> None:
        if self.delivery in ("length", "stall"):
            extra = 100 if self.delivery == "stall" else 0
            self.send_header("Content-Length", str(len(self.body) + extra))
            self.end_headers()
            self.wfile.write(self.body)
            if extra:
                self.wfile.flush()
                time.sleep(2.0)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        rounds = 4096 if self.delivery == "endless" else 1
        for _ in range(rounds):
            for start in range(0, len(self.body), 8192):
                piece = self.body[start : start + 8192]
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture(scope="module")
def chat() -> Iterator[str]:
    with serve(_Refusing) as origin:
        yield f"{origin}/v1"


@contextmanager
def _answering(status: int, body: bytes, content_type: str, delivery: str) -> Iterator[None]:
    _Refusing.status, _Refusing.body, _Refusing.served = status, body, 0
    _Refusing.content_type, _Refusing.delivery = content_type, delivery
    yield
    assert _Refusing.served >= 1, "the refusing server was never asked"


def _act(base_url: str, token: str | None, **kwargs: Any) -> Any:
    if token:
        kwargs.update(api_key_env=VARIABLE, environ={VARIABLE: token})
    return act_once(base_url, **kwargs)


# --- bodies ---------------------------------------------------------------------------------


def _basic(token: str, user: str) -> str:
    return base64.b64encode(f"{user}:{token}".encode()).decode()


def _python_escaped(token: str, which: int) -> str:
    index = which % len(token)
    return token[:index] + f"\\x{ord(token[index]):02x}" + token[index + 1 :]


@st.composite
def _spelled(draw: st.DrawFn, token: str) -> tuple[str, bool]:
    """``(spelling, is_json_literal)``: a JSON-escaped spelling is only one inside JSON."""
    how = draw(st.sampled_from(["raw", "bearer", "json", "percent", "basic", "python"]))
    if how == "json":
        return draw(escaped_spellings(token)), True
    text = {
        "raw": token,
        "bearer": f"Bearer {token}",
        "percent": quote(token, safe=draw(st.sampled_from(["", "/", "-._~"]))),
        "basic": _basic(token, draw(st.text("abcdefgh", max_size=5))),
        "python": _python_escaped(token, draw(st.integers(0, 63))),
    }[how]
    return text, False


@st.composite
def hostile_answers(draw: st.DrawFn, token: str) -> tuple[int, bytes, str, str]:
    """``(status, body, content type, delivery)`` with the key spelled in it, or not."""
    status = draw(st.sampled_from(STATUSES))
    around = st.text(st.characters(codec="utf-8"), max_size=40)
    before, after = draw(around), draw(around)
    spelled, literal = draw(_spelled(token)) if draw(st.booleans()) else ("", False)
    in_json = json_body(before) + (spelled if literal else json_body(spelled)) + json_body(after)
    as_text = before + spelled + after
    kind = draw(st.sampled_from(["detail", "list", "error", "text", "html", "binary", "huge"]))
    delivery = draw(st.sampled_from(["length", "chunked"]))
    if kind == "detail":
        return status, f'{{"detail":"{in_json}"}}'.encode(), "application/json", delivery
    if kind == "list":
        body = f'{{"detail":[{{"type":"x","loc":["body","model"],"msg":"{in_json}"}}]}}'
        return status, body.encode(), "application/json", delivery
    if kind == "error":
        body = f'{{"error":{{"message":"{in_json}","type":"invalid_request_error"}}}}'
        return status, body.encode(), "application/json", delivery
    if kind == "text":
        return status, as_text.encode("utf-8", "surrogatepass"), "text/plain", delivery
    if kind == "html":
        page = f"<html><head><title>{html.escape(as_text)}</title></head><body>x</body></html>"
        return status, page.encode("utf-8", "surrogatepass"), "text/html", delivery
    if kind == "binary":
        noise = draw(st.binary(max_size=64))
        return status, noise + b"\x00\xff" + token.encode() + noise, "", delivery
    size = draw(st.integers(MAX_POLICY_ERROR_BODY_BYTES - 64, 3 * MAX_POLICY_ERROR_BODY_BYTES))
    at = draw(st.integers(0, size))
    filler = b"x" * size
    huge = filler[:at] + f" {spelled} ".encode() + filler[at:]
    return status, huge, "text/plain", draw(st.sampled_from(["length", "chunked", "endless"]))


def _leaks(token: str, text: str) -> bool:
    """``decodes_to_token``, and base64 of the key at any of its three byte alignments."""
    if decodes_to_token(token, text):
        return True
    for offset in range(3):
        encoded = base64.b64encode(b"\x00" * offset + token.encode()).decode()
        middle = encoded[(8 * offset + 5) // 6 : 8 * (offset + len(token)) // 6]
        if any(m in text for m in (middle, middle.replace("+", "-").replace("/", "_"))):
            return True
    return False


def _check(error: PolicyHttpStatus, status: int, where: str, token: str) -> None:
    assert error.code == "policy_http_status"
    text = str(error)
    assert f"{where} answered HTTP {status}" in text
    # the URL, a sentence, the quoted reason (repr: at most 10 chars per char) and the hint
    assert len(error.rule) <= len(where) + 160 + 10 * MAX_PEER_REASON_CHARS
    for shown in (text, json.dumps(error.to_dict(), ensure_ascii=False)):
        assert not _leaks(token, shown), shown


@settings(max_examples=200, deadline=None, suppress_health_check=SLOW_FIXTURE)  # fmt: skip
@given(data=st.data())
def test_a_refusal_gives_its_status_a_bounded_reason_and_never_the_key(
    chat: str, data: st.DataObject
) -> None:
    token = data.draw(tokens, label="token")
    status, body, content_type, delivery = data.draw(hostile_answers(token), label="answer")
    with _answering(status, body, content_type, delivery), pytest.raises(PolicyHttpStatus) as e:
        _act(chat, token)
    _check(e.value, status, f"{chat}/chat/completions", token)


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (400, {"detail": PROMPT_TOO_LONG}, f": the server says {PROMPT_TOO_LONG!r}"),
        (422, {"detail": [{"type": "missing", "loc": ["body", "messages"],
                           "msg": "Field required", "input": {}}]},
         ": the server says 'body.messages: Field required'"),
        (500, {"error": {"message": "CUDA out of memory", "type": "server_error"}},
         ": the server says 'CUDA out of memory'"),
    ],
)  # fmt: skip
def test_the_server_s_own_words_lead_the_message(
    chat: str, status: int, body: dict[str, Any], said: str
) -> None:
    with (
        _answering(status, json.dumps(body).encode(), "application/json", "length"),
        pytest.raises(PolicyHttpStatus) as info,
    ):
        _act(chat, None)
    assert info.value.rule == f"{chat}/chat/completions answered HTTP {status}{said}"


def test_the_prompt_too_long_refusal_hints_at_the_context_not_the_template(chat: str) -> None:
    body = json.dumps({"detail": PROMPT_TOO_LONG}).encode()
    with (
        _answering(400, body, "application/json", "length"),
        pytest.raises(PolicyHttpStatus) as info,
    ):
        _act(chat, None)
    assert "no longer fits the model's context" in str(info.value.hint)
    assert "template_kwargs" not in str(info.value.hint)


def test_a_body_that_stalls_still_reports_its_status_promptly(chat: str) -> None:
    with _answering(500, b"partial", "text/plain", "stall"):
        started = time.monotonic()
        with pytest.raises(PolicyHttpStatus) as info:
            _act(chat, None, error_body_timeout_s=0.3)
    assert time.monotonic() - started < 1.5
    assert info.value.rule.endswith("answered HTTP 500 and its body did not arrive in time")


def test_an_endless_body_is_read_only_to_its_bound(chat: str) -> None:
    with (
        _answering(500, b"z" * 65536, "text/plain", "endless"),
        pytest.raises(PolicyHttpStatus) as info,
    ):
        _act(chat, None)
    assert f"(a body over more than {MAX_POLICY_ERROR_BODY_BYTES} bytes)" in info.value.rule


@pytest.fixture(scope="module")
def counter() -> Iterator[ServerHandle]:
    handle = start_server("counter")
    yield handle
    handle.stop()


@settings(max_examples=15, deadline=None, suppress_health_check=SLOW_FIXTURE)  # fmt: skip
@given(data=st.data())
def test_rollout_against_a_refusing_server_writes_nothing(
    chat: str, counter: ServerHandle, tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
) -> None:  # fmt: skip
    token = data.draw(tokens, label="token")
    status, body, content_type, delivery = data.draw(hostile_answers(token), label="answer")
    out = tmp_path_factory.mktemp("rollout")
    args = openai_rollout_args(counter.base_url, chat, VARIABLE, out)
    with every_log_record() as logs, _answering(status, body, content_type, delivery):
        result = CliRunner().invoke(app, args, env={VARIABLE: token})
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "policy_http_status"
    assert f"answered HTTP {status}" in error["rule"]
    assert sorted(out.iterdir()) == []
    for text in (result.stdout, result.stderr, *logs):
        assert not _leaks(token, text)
