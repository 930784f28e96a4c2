"""Test kit for the oracle server-framework tests: throwaway environments and raw clients.

The framework is tested against two tiny environments defined here (one with a Task API,
one without) so that its tests do not depend on any game's rules. The clients are the
plain `websockets` library with stdlib `json`, never kiln-verify's own client, plus a
hand-rolled socket where a test must see what a library hides (pings, a connection
dropped without a close frame).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from oracle.base import (
    ActionField,
    Environment,
    ExecutionError,
    JsonObject,
    ObservationField,
    Outcome,
    ResetRequest,
)
from oracle.runner import ServerHandle

Start = Callable[..., ServerHandle]


class TinyEnvironment(Environment):
    """Adds `amount`; 99 is an `ExecutionError`, 13 a plain bug; rewards vary in type."""

    server_name = "tiny"
    env_name = "tiny_env"
    class_name = "TinyEnvironment"
    description = "A throwaway environment for the server-framework tests."
    readme = "# tiny\n"
    category = "counter"
    action_title = "TinyAction"
    action_fields = (
        ActionField("amount", "integer", "Added to the total."),
        ActionField("note", "string", "Echoed back.", required=False),
    )
    observation_title = "TinyObservation"
    observation_fields = (
        ObservationField("total", {"type": "integer"}, "The running total."),
        ObservationField("input_text", {"type": "string"}, "A prompt."),
        ObservationField("note", {"type": "string", "default": ""}, "The last note."),
    )
    reset_options = frozenset({"start"})

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self.note = ""

    def _observation(self) -> JsonObject:
        return {"total": self.total, "input_text": f"total is {self.total}", "note": self.note}

    def _reset(self, request: ResetRequest) -> Outcome:
        start = request.options.get("start", 0)
        self.total = start if isinstance(start, int) else 0
        self.note = ""
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        amount = action["amount"]
        if amount == 99:
            raise ExecutionError("amount 99 is out of range")
        if amount == 13:
            raise RuntimeError("unlucky thirteen")
        self.total += amount
        self.note = action.get("note") or ""
        reward: Any = {1: True, 2: 2}.get(amount, float(self.total))
        return Outcome(self._observation(), reward, self.total >= 10)

    def _extra_state(self) -> JsonObject:
        return {"total": self.total}


class TaskEnvironment(TinyEnvironment):
    """The same game with a Task API: splits train (5 rows) and test (2 rows)."""

    env_name = "Task_Env"
    class_name = "TaskEnvironment"

    @classmethod
    def task_splits(cls) -> Sequence[Mapping[str, str]] | None:
        return [{"name": "train", "type": "train"}, {"name": "test", "type": "test"}]

    @classmethod
    def task_rows(cls, split: str) -> Sequence[Any]:
        sizes = {"train": 5, "test": 2}
        return [{"split": split, "index": i} for i in range(sizes[split])]


Frame = dict[str, Any] | str | bytes


def open_ws(url: str, **kwargs: Any) -> ClientConnection:
    kwargs.setdefault("max_size", None)
    connection: ClientConnection = connect(url, open_timeout=5, close_timeout=2, **kwargs)
    return connection


def send(ws: ClientConnection, frame: Frame) -> None:
    ws.send(json.dumps(frame) if isinstance(frame, dict) else frame)


def receive(ws: ClientConnection, timeout: float = 5) -> dict[str, Any]:
    raw = ws.recv(timeout=timeout)
    assert isinstance(raw, str), f"expected a text frame, got {type(raw).__name__}"
    value = json.loads(raw)
    assert isinstance(value, dict)
    return value


def ask(ws: ClientConnection, frame: Frame, timeout: float = 5) -> dict[str, Any]:
    send(ws, frame)
    return receive(ws, timeout)


def error_code(reply: dict[str, Any]) -> str:
    assert reply["type"] == "error", reply
    code = reply["data"]["code"]
    assert isinstance(code, str)
    return code


def expect_close(ws: ClientConnection, code: int | None = 1000, timeout: float = 5) -> None:
    """The next event is the end of the connection (no frame first); `None` = no close frame."""
    with pytest.raises(ConnectionClosed) as info:
        ws.recv(timeout=timeout)
    received = info.value.rcvd
    if code is None:
        assert received is None, f"expected no close frame, got {received}"
    else:
        assert received is not None, "expected a close frame"
        assert received.code == code, received


def send_expecting_close(
    ws: ClientConnection, frame: Frame, code: int, timeout: float = 30
) -> None:
    """Send a frame the server refuses by closing; the close may interrupt our send."""
    try:
        send(ws, frame)
    except ConnectionClosed as exc:
        closed: ConnectionClosed | None = exc
    else:
        closed = None
    if closed is None:
        expect_close(ws, code, timeout)
    else:
        assert closed.rcvd is not None, "expected a close frame"
        assert closed.rcvd.code == code, closed


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.005)


class RawSocket:
    """A WebSocket client on a plain socket: no deflate, no automatic pong, no close frame."""

    def __init__(self, port: int, path: str = "/ws", headers: dict[str, str] | None = None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            f"Sec-WebSocket-Version: 13\r\n{extra}\r\n".encode()
        )
        self.buffer = b""
        head = self._read_until(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1])
        self.response_head = head

    def _read_until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed during handshake")
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(marker)
        return head

    def _read_exact(self, size: int) -> bytes:
        while len(self.buffer) < size:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def send_frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        length = len(payload)
        if length < 126:
            header = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
        elif length < 65536:
            header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send_text(self, text: str) -> None:
        self.send_frame(0x1, text.encode("utf-8", errors="surrogatepass"))

    def read_frame(self) -> tuple[int, bytes]:
        first, second = self._read_exact(2)
        length = second & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", self._read_exact(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", self._read_exact(8))
        return first & 0x0F, self._read_exact(length)

    def close(self) -> None:
        self.sock.close()
