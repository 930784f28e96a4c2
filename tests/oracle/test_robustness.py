"""A thousand malformed frames against one server leave it serving, with no leaked slot."""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from oracle.runner import ServerHandle
from tests.oracle.serverkit import RawSocket, Start, ask, expect_close, open_ws, wait_until

FRAMES = 1000
RECOVERABLE = {"INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR", "EXECUTION_ERROR"}
Frame = str | bytes


def _junk_text(rng: random.Random) -> str:
    alphabet = '{}[]":,0123456789abcdefnulltrue \\\t\n\u00e9\u4e2d\U0001f600'
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 2**70, 1.5, -0.0, 1e300])
    if kind == 3:
        return _junk_text(rng)
    if kind == 4:
        return rng.choice(["reset", "step", "state", "close", "mcp", "Reset", ""])
    if kind == 5:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {_junk_text(rng)[:8]: _value(rng, depth + 1) for _ in range(rng.randrange(4))}


def malformed_frames(seed: int = 20260501) -> Iterator[Frame]:
    """Every kind of bad frame, deterministic, occasionally interleaved with a good one."""
    rng = random.Random(seed)
    dumps = json.dumps
    makers: list[Callable[[], Frame]] = [
        lambda: _junk_text(rng),  # invalid JSON (mostly)
        lambda: dumps(rng.choice([[1, 2], None, 42, "reset", 1.5, True, []])),  # not an object
        lambda: rng.randbytes(rng.randrange(0, 64)),  # binary frame of random bytes
        lambda: dumps({"type": _value(rng), "data": _value(rng)}),  # unknown or odd types
        lambda: dumps(
            {
                "type": rng.choice(["reset", "step", "state", "mcp"]),
                _junk_text(rng)[:6] or "x": _value(rng),
            }
        ),  # bad envelopes
        lambda: dumps({"type": "step", "data": {"amount": _value(rng), "note": _value(rng)}}),
        lambda: dumps({"type": "step", "data": _value(rng)}),
        lambda: dumps({"type": "reset", "data": _value(rng)}),
        lambda: dumps(
            {
                "type": "mcp",
                "data": {"jsonrpc": _value(rng), "method": _value(rng), "id": _value(rng)},
            }
        ),
        lambda: "[" * rng.randrange(2000, 50_000),  # deep nesting
        lambda: dumps({"type": "step", "data": {"amount": 1, "note": "\ud800"}}),
        lambda: dumps({"type": "step", "data": {"amount": 1}}),  # a good one
    ]
    for index in range(FRAMES):
        if index % 250 == 0:  # huge strings, echoed back in the validation error
            yield dumps({"type": "step", "data": {"amount": "x" * 3_000_000}})
        elif index % 97 == 0:
            yield dumps({"type": "close"})
        else:
            yield rng.choice(makers)()


class Driver:
    """Sends frames on one connection, reconnecting whenever a frame ended the session."""

    def __init__(self, server: ServerHandle) -> None:
        self.server = server
        self.ws: ClientConnection | None = None
        self.stack = contextlib.ExitStack()
        self.reconnects = 0
        self.codes: dict[str, int] = {}

    def connection(self) -> ClientConnection:
        if self.ws is None:
            wait_until(lambda: self.server.active_sessions == 0)
            self.ws = self.stack.enter_context(open_ws(self.server.ws_url))
            self.reconnects += 1
        return self.ws

    def send(self, frame: Frame) -> None:
        ws = self.connection()
        ws.send(frame)
        if frame == '{"type": "close"}':
            expect_close(ws, 1000)
            self._drop()
            return
        reply = json.loads(ws.recv(timeout=10))
        kind = reply["type"] if reply["type"] != "error" else reply["data"]["code"]
        self.codes[kind] = self.codes.get(kind, 0) + 1
        if kind == "SESSION_ERROR":
            expect_close(ws, 1000)
            self._drop()
        else:
            assert kind in RECOVERABLE | {"observation", "state", "mcp"}, reply

    def _drop(self) -> None:
        assert self.ws is not None
        self.stack.close()
        self.ws = None

    def finish(self) -> None:
        if self.ws is not None:
            self._drop()


def test_a_thousand_malformed_frames(start: Start) -> None:
    server = start(max_sessions=1)
    driver = Driver(server)
    for frame in malformed_frames():
        try:
            driver.send(frame)
        except ConnectionClosed as exc:  # only a refused oversized echo may end like this
            raise AssertionError(f"connection ended unexpectedly after {frame[:80]!r}") from exc
    driver.finish()
    assert driver.reconnects > 20
    assert {
        "INVALID_JSON",
        "UNKNOWN_TYPE",
        "VALIDATION_ERROR",
        "SESSION_ERROR",
        "observation",
    } <= set(driver.codes)

    for _ in range(5):  # invalid UTF-8 in a text frame: uvicorn closes with 1007
        raw = RawSocket(server.port)
        raw.send_frame(0x1, b'{"type": "\xff\xfe"}')
        opcode, payload = raw.read_frame()
        assert opcode == 0x8
        assert int.from_bytes(payload[:2], "big") == 1007
        raw.close()

    wait_until(lambda: server.active_sessions == 0)
    assert httpx.get(server.base_url + "/health").json() == {"status": "healthy"}
    with open_ws(server.ws_url) as ws:  # capacity accounting is intact: max_sessions=1 admits
        assert ask(ws, {"type": "reset", "data": {"seed": 5}})["type"] == "observation"
        assert ask(ws, {"type": "step", "data": {"amount": 3}})["data"]["observation"]["total"] == 3
        ws.send(json.dumps({"type": "close"}))
        expect_close(ws, 1000)
    wait_until(lambda: server.active_sessions == 0)
