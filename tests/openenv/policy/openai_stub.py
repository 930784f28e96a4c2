"""A small OpenAI-compatible HTTP stub on 127.0.0.1 for the error paths a real server
rarely produces on demand (429s, 5xx, slow answers, bad bodies). The first path segment
picks the behaviour; every request is logged with its path, body and Authorization.

Beside it, what the tests of the openai policy against their own loopback servers share:
``serve`` (any handler on 127.0.0.1), ``act_once`` (one step's ``act`` through a fresh
policy) and ``openai_rollout_args`` (``kiln-verify openenv rollout --policy openai``)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from kiln_verify.openenv.policy.base import ZERO_CLOCK, PolicyRequest
from kiln_verify.openenv.policy.openai_compat import OpenAICompatPolicy


def completion(message: dict[str, Any], finish: str = "stop") -> bytes:
    body = {
        "id": "stub",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", **message},
                     "finish_reason": finish}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }  # fmt: skip
    return json.dumps(body).encode()


class StubHandler(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []
    counts: ClassVar[dict[str, int]] = {}
    lock: ClassVar[threading.Lock] = threading.Lock()

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first (the timeout cases)

    def _later(self, seconds: float, body: bytes) -> None:
        time.sleep(seconds)
        self._send(200, body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        mode = self.path.split("/")[1]
        with self.lock:
            self.counts[mode] = self.counts.get(mode, 0) + 1
            attempt = self.counts[mode]
            self.seen.append(
                {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
            )
        answer = self.answers().get(mode)
        if answer is None:
            self._send(404, b"")
            return
        answer(self, attempt)

    @classmethod
    def answers(cls) -> dict[str, Any]:
        ok = completion({"content": '{"arm":1}', "reasoning_content": "hmm"})

        def chunked(handler: StubHandler, body: bytes) -> None:
            handler.send_response(200)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            for start in range(0, len(body), 1000):
                piece = body[start : start + 1000]
                handler.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            handler.wfile.write(b"0\r\n\r\n")

        return {
            "ok": lambda h, n: h._send(200, ok),
            "action": lambda h, n: h._send(200, completion({"content": '{"arm": 2}'})),
            "slow-action": lambda h, n: h._later(0.3, completion({"content": '{"arm": 2}'})),
            "redirect": lambda h, n: h._send(
                307, b"", {"Location": "http://127.0.0.1:1/v1/chat/completions"}
            ),
            "big": lambda h, n: h._send(200, b'{"pad":"' + b"x" * 5000 + b'"}'),
            "big-chunked": lambda h, n: chunked(h, b'{"pad":"' + b"x" * 5000 + b'"}'),
            "nonjson": lambda h, n: h._send(200, b"<html>not json</html>"),
            "nochoices": lambda h, n: h._send(200, b'{"choices":[]}'),
            "dupkey": lambda h, n: h._send(200, b'{"choices":[],"choices":[]}'),
            "echo": lambda h, n: h._send(
                200, json.dumps({"error": str(h.headers.get("Authorization"))}).encode()
            ),
            "status": lambda h, n: h._send(500, f"boom {h.headers.get('Authorization')}".encode()),
            "unauthorized": lambda h, n: h._send(401, b"{}"),
            "limited": lambda h, n: h._send(429, b"{}", {"Retry-After": "0"}),
            "limited-long": lambda h, n: h._send(429, b"{}", {"Retry-After": "3600"}),
            "limited-twice": lambda h, n: h._send(429, b"{}") if n <= 2 else h._send(200, ok),
            "unavailable-once": lambda h, n: h._send(503, b"") if n == 1 else h._send(200, ok),
            "slow": lambda h, n: h._later(1.5, ok),
            "reasoning": lambda h, n: h._send(
                200, completion({"content": '{"arm":1}', "reasoning": "alias"})
            ),
            "reasoning-both": lambda h, n: h._send(
                200, completion({"content": "x", "reasoning": "a", "reasoning_content": "a"})
            ),
            "reasoning-conflict": lambda h, n: h._send(
                200, completion({"content": "x", "reasoning": "a", "reasoning_content": "b"})
            ),
            "inline": lambda h, n: h._send(
                200, completion({"content": '<think>\nweigh arms</think>{"arm":3}'})
            ),
            "inline-open": lambda h, n: h._send(
                200, completion({"content": "<think>still thinking"}, finish="length")
            ),
        }  # fmt: skip


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` on 127.0.0.1 in a daemon thread (and daemon threads per request, so a
    stalled answer never holds up the exit); its origin (``http://127.0.0.1:PORT``)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def stub_server() -> Iterator[str]:
    """The stub's origin (``http://127.0.0.1:PORT``); the first path segment picks a mode."""
    with serve(StubHandler) as origin:
        yield origin


def act_once(base_url: str, **policy: Any) -> Any:
    """One step's ``act`` through a fresh ``OpenAICompatPolicy`` (model ``tiny``, no
    retries, ``policy`` added), closed after it."""
    request = PolicyRequest.for_step(
        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        action_schema={}, seed=9, candidate_index=0, step_index=0, temperature=0.5,
        max_action_tokens=32, thinking=False,
    )  # fmt: skip

    async def go() -> Any:
        client = OpenAICompatPolicy(
            base_url=base_url, model="tiny", clock=ZERO_CLOCK, max_retries=0, **policy
        )
        try:
            return await client.act(request)
        finally:
            await client.aclose()

    return asyncio.run(go())


def openai_rollout_args(environment: str, base_url: str, key_variable: str, out: Path) -> list[str]:
    """``openenv rollout --json`` of one group of two two-step candidates from
    ``environment`` with the openai policy at ``base_url`` (model ``tiny``, its key in
    ``key_variable``, no retries, no thinking), writing its three files into ``out``."""
    return ["openenv", "rollout", "--environment", environment, "--json",
            "--policy", "openai", "--policy-option", f"base_url={base_url}",
            "--policy-option", "model=tiny", "--policy-option", f"api_key_env={key_variable}",
            "--policy-option", "max_retries=0",
            "--groups", "1", "--group-size", "2", "--max-steps", "2", "--no-thinking",
            "--output", str(out / "openenv.rollouts.jsonl"),
            "--replay-output", str(out / "openenv.replay.json"),
            "--summary-output", str(out / "openenv.rollout-summary.json")]  # fmt: skip
