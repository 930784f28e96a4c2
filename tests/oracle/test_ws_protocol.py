"""`WS /ws`: the session protocol of OpenEnv 0.10.0, driven with a raw `websockets` client."""

from __future__ import annotations

import json
import re
import time
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from oracle import jsonrpc
from oracle.runner import ServerHandle
from oracle.validation import action_errors, envelope_errors
from tests.oracle.serverkit import (
    RawSocket,
    Start,
    TaskEnvironment,
    ask,
    error_code,
    expect_close,
    open_ws,
    receive,
    send,
    send_expecting_close,
    wait_until,
)

RESET: dict[str, Any] = {"type": "reset", "data": {"seed": 1, "episode_id": "ep-1"}}
SIXTEEN_MIB = 16 * 1024 * 1024


def step(amount: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "step", "data": {"amount": amount, **extra}}


def test_episode_frames_have_openenv_shapes(tiny: ServerHandle) -> None:
    with open_ws(tiny.ws_url) as ws:
        reset = ask(ws, RESET)
        assert reset == {
            "type": "observation",
            "data": {
                "observation": {"metadata": {}, "total": 0, "input_text": "total is 0", "note": ""},
                "reward": None,
                "done": False,
            },
        }
        # reward keeps its JSON type over WebSocket: bool, int, float
        assert ask(ws, step(1))["data"]["reward"] is True
        assert ask(ws, step(2, note="n"))["data"]["reward"] == 2
        third = ask(ws, step(3, metadata={"trace": [1]}))
        assert isinstance(third["data"]["reward"], float)
        assert third["data"]["reward"] == 6.0
        assert third["data"]["observation"]["note"] == ""
        assert ask(ws, {"type": "state"}) == {
            "type": "state",
            "data": {"episode_id": "ep-1", "step_count": 3, "total": 6},
        }
        done = ask(ws, step(4))
        assert done["data"]["done"] is True
        assert ask(ws, step(5))["data"] == {**done["data"], "reward": None}  # frozen terminal


def test_reset_keys_are_filtered_like_a_signature(tiny: ServerHandle) -> None:
    with open_ws(tiny.ws_url) as ws:
        reply = ask(ws, {"type": "reset", "data": {"start": 5, "split": "x", "level": 3}})
        assert reply["data"]["observation"]["total"] == 5
        assert ask(ws, {"type": "reset"})["data"]["observation"]["total"] == 0


def test_pipelined_requests_get_replies_in_order(tiny: ServerHandle) -> None:
    with open_ws(tiny.ws_url) as ws:
        for frame in (RESET, step(2), {"type": "state"}):
            send(ws, frame)
        replies = [receive(ws) for _ in range(3)]
        assert [r["type"] for r in replies] == ["observation", "observation", "state"]
        assert replies[1]["data"]["observation"]["total"] == 2
        assert replies[2]["data"]["step_count"] == 1


def test_step_before_reset_is_allowed(tiny: ServerHandle) -> None:
    with open_ws(tiny.ws_url) as ws:
        assert ask(ws, step(3))["data"]["observation"]["total"] == 3


def test_many_episodes_on_one_socket(tiny: ServerHandle) -> None:
    with open_ws(tiny.ws_url) as ws:
        for episode in range(25):
            assert ask(ws, {"type": "reset", "data": {"episode_id": f"e{episode}"}})
            for _ in range(3):
                ask(ws, step(3))
            assert ask(ws, {"type": "state"})["data"] == {
                "episode_id": f"e{episode}",
                "step_count": 3,
                "total": 9,
            }


def test_close_gets_no_reply_and_close_1000(tiny: ServerHandle) -> None:
    with open_ws(tiny.ws_url) as ws:
        ask(ws, RESET)
        send(ws, {"type": "close"})
        expect_close(ws, 1000)
    wait_until(lambda: tiny.active_sessions == 0)


RECOVERABLE: list[tuple[str, Any, str, str]] = [
    (
        "invalid json",
        "{bad",
        "INVALID_JSON",
        "Invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
    ),
    ("empty frame", "", "INVALID_JSON", "Invalid JSON: Expecting value: line 1 column 1 (char 0)"),
    ("unknown type", {"type": "Reset"}, "UNKNOWN_TYPE", "Unknown message type: Reset"),
    ("missing type", {"data": {}}, "UNKNOWN_TYPE", "Unknown message type: "),
    ("null type", {"type": None}, "UNKNOWN_TYPE", "Unknown message type: None"),
    (
        "reset data not object",
        {"type": "reset", "data": [1]},
        "VALIDATION_ERROR",
        "Invalid message",
    ),
    ("step without data", {"type": "step"}, "VALIDATION_ERROR", "Invalid message"),
    ("unknown action key", step(1, bogus=2), "VALIDATION_ERROR", "Invalid message"),
    ("missing action field", {"type": "step", "data": {}}, "VALIDATION_ERROR", "Invalid message"),
    ("bool is not an integer", step(True), "VALIDATION_ERROR", "Invalid message"),
    ("float is not an integer", step(2.0), "VALIDATION_ERROR", "Invalid message"),
    ("metadata not an object", step(1, metadata=[]), "VALIDATION_ERROR", "Invalid message"),
    ("state with data", {"type": "state", "data": {}}, "VALIDATION_ERROR", "Invalid message"),
    ("close with data", {"type": "close", "data": {}}, "VALIDATION_ERROR", "Invalid message"),
    ("extra envelope key", {**RESET, "id": 7}, "VALIDATION_ERROR", "Invalid message"),
    ("execution error", step(99), "EXECUTION_ERROR", "amount 99 is out of range"),
    ("environment bug", step(13), "EXECUTION_ERROR", "unlucky thirteen"),
    (
        "bad seed",
        {"type": "reset", "data": {"seed": "abc"}},
        "EXECUTION_ERROR",
        "seed must be a non-negative integer",
    ),
]


@pytest.mark.parametrize(
    ("frame", "code", "message"),
    [case[1:] for case in RECOVERABLE],
    ids=[c[0] for c in RECOVERABLE],
)
def test_recoverable_errors_keep_the_session(
    tiny: ServerHandle, frame: Any, code: str, message: str
) -> None:
    with open_ws(tiny.ws_url) as ws:
        reply = ask(ws, frame)
        assert error_code(reply) == code
        assert reply["data"]["message"] == message
        expected_keys = (
            {"message", "code", "errors"} if code == "VALIDATION_ERROR" else {"message", "code"}
        )
        assert set(reply["data"]) == expected_keys
        assert ask(ws, RESET)["type"] == "observation"  # same socket still serves


def test_validation_error_lists_pydantic_errors(tiny: ServerHandle) -> None:
    with open_ws(tiny.ws_url) as ws:
        reply = ask(ws, {"type": "step", "data": {"note": 7, "x": 1, "metadata": 3}})
    assert reply["data"]["errors"] == [
        _err("dict_type", ["metadata"], "Input should be a valid dictionary", 3),
        _err("missing", ["amount"], "Field required", {"note": 7, "x": 1, "metadata": 3}),
        _err("string_type", ["note"], "Input should be a valid string", 7),
        _err("extra_forbidden", ["x"], "Extra inputs are not permitted", 1),
    ]


def _err(kind: str, loc: list[Any], msg: str, value: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "loc": loc,
        "msg": msg,
        "input": value,
        "url": f"https://errors.pydantic.dev/2.14/v/{kind}",
    }


TERMINAL: list[tuple[str, Any, str]] = [
    ("json array", "[1, 2]", "'list' object has no attribute 'get'"),
    ("json null", "null", "'NoneType' object has no attribute 'get'"),
    ("json number", "42", "'int' object has no attribute 'get'"),
    ("json string", '"reset"', "'str' object has no attribute 'get'"),
    ("NaN", "NaN", "'float' object has no attribute 'get'"),
    ("binary frame", b'{"type":"reset"}', "'text'"),
    ("deep nesting", "[" * 100_000 + "]" * 100_000, "maximum recursion depth exceeded"),
    (
        "unencodable echo",
        '{"type":"step","data":{"amount":"\\ud800"}}',
        "Error serializing to JSON: UnicodeEncodeError: 'utf-8' codec can't encode character "
        "'\\ud800' in position 0: surrogates not allowed",
    ),
]


@pytest.mark.parametrize(
    ("frame", "message"), [c[1:] for c in TERMINAL], ids=[c[0] for c in TERMINAL]
)
def test_session_errors_are_terminal(tiny: ServerHandle, frame: Any, message: str) -> None:
    with open_ws(tiny.ws_url) as ws:
        ask(ws, RESET)
        reply = ask(ws, frame)
        assert error_code(reply) == "SESSION_ERROR"
        assert reply["data"]["message"].startswith(message)
        expect_close(ws, 1000)
    wait_until(lambda: tiny.active_sessions == 0)


def test_unknown_session_id_query_is_a_session_error(tiny: ServerHandle) -> None:
    with open_ws(tiny.ws_url + "?session_id=abc") as ws:
        reply = receive(ws)
        assert reply["data"] == {"message": "Unknown session_id: abc", "code": "SESSION_ERROR"}
        expect_close(ws, 1000)
    assert tiny.active_sessions == 0


def test_mcp_answers_like_a_non_mcp_environment(tiny: ServerHandle) -> None:
    def mcp(data: Any) -> dict[str, Any]:
        reply = ask(ws, {"type": "mcp", "data": data})
        assert reply["type"] == "mcp"
        result: dict[str, Any] = reply["data"]
        return result

    with open_ws(tiny.ws_url) as ws:
        assert mcp({"jsonrpc": "2.0", "method": "tools/list", "id": 1}) == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32603, "message": "Environment does not support MCP", "data": None},
        }
        assert mcp({"jsonrpc": "2.0", "method": "tools/call", "id": "a"})["error"] == {
            "code": -32602,
            "message": "Missing 'name' in params",
            "data": None,
        }
        assert mcp({"jsonrpc": "2.0", "method": "nope"})["error"]["message"] == (
            "Method not found: nope"
        )
        assert mcp({"method": 5})["error"]["code"] == -32600
        assert error_code(ask(ws, {"type": "mcp"})) == "VALIDATION_ERROR"
        created = mcp({"jsonrpc": "2.0", "method": "openenv/session/create", "id": 2})
        own = created["result"]["session_id"]  # the socket's own session, as in OpenEnv
        closed = mcp(
            {
                "jsonrpc": "2.0",
                "method": "openenv/session/close",
                "id": 3,
                "params": {"session_id": own},
            }
        )
        assert closed["error"]["message"] == (
            "Cannot close active WebSocket-managed session via MCP method"
        )


def test_mcp_websocket_route(start: Start) -> None:
    server = start(max_sessions=1)
    url = server.ws_url.replace("/ws", "/mcp")
    with open_ws(url) as ws:
        send(ws, {"jsonrpc": "2.0", "method": "tools/list", "id": 1})
        assert ws.recv(timeout=5) == (
            '{"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, '
            '"message": "Environment does not support MCP", '
            '"data": null}}'
        )
        assert server.active_sessions == 1
        parse = json.loads(ask_text(ws, "{bad"))
        assert parse["error"]["message"].startswith("Parse error: Expecting property name")
        with open_ws(url) as refused:  # the slot is taken: one -32000 error, then close
            assert json.loads(refused.recv(timeout=5))["error"] == {
                "code": -32000,
                "message": "Server at capacity: 1/1 sessions active. "
                "Cannot accept new connections.",
                "data": {"active_sessions": 1, "max_sessions": 1},
            }
            expect_close(refused, 1000)
        assert json.loads(ask_text(ws, "[1]"))["error"]["message"] == (
            "openenv.core.env_server.mcp_types.JsonRpcRequest() argument after ** must be a "
            "mapping, not list"
        )
        expect_close(ws, 1000)
    wait_until(lambda: server.active_sessions == 0)


def ask_text(ws: ClientConnection, frame: str) -> str:
    ws.send(frame)
    reply = ws.recv(timeout=5)
    assert isinstance(reply, str)
    return reply


class JsonRpcRequest(BaseModel):
    """OpenEnv's request model, re-declared so the error text can be compared."""

    model_config = ConfigDict(extra="forbid")
    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] = Field(default_factory=dict)
    id: str | int | None = None


@pytest.mark.parametrize(
    "request_",
    [
        {},
        {"method": "m"},
        {"jsonrpc": "1.0", "method": 5, "id": [1], "zzz": 1},
        {"jsonrpc": "2.0", "method": "m", "id": 1.5},
        {"jsonrpc": 2.0, "method": None},
        {"jsonrpc": "2.0", "method": "m", "params": "s" * 80},
        {"jsonrpc": "2.0", "method": "m", "id": {"a": "é" * 40}},
    ],
)
def test_mcp_invalid_request_text_matches_pydantic(request_: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        JsonRpcRequest.model_validate(request_)
    expected = "Invalid request: " + _unversioned(str(info.value))
    message = jsonrpc.answer(request_, session_id="s")["error"]["message"]
    assert _unversioned(message) == expected


def test_mcp_request_ids_match_pydantic_coercion() -> None:
    for request_id in (True, 3.0, "x", 7, None):
        request = {"jsonrpc": "2.0", "method": "m", "id": request_id}
        expected = JsonRpcRequest.model_validate(request).id
        assert jsonrpc.answer(request, session_id="s")["id"] == expected


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metadata: dict[str, Any] = Field(default_factory=dict)


class TinyAction(_Action):
    amount: StrictInt
    note: StrictStr | None = None


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResetMessage(_Message):
    type: Literal["reset"] = "reset"
    data: dict[str, Any] = Field(default_factory=dict)


class StepMessage(_Message):
    type: Literal["step"] = "step"
    data: dict[str, Any]


class StateMessage(_Message):
    type: Literal["state"] = "state"


ACTIONS: list[dict[str, Any]] = [
    {},
    {"amount": 1},
    {"amount": True},
    {"amount": "5"},
    {"amount": 5.0},
    {"amount": None},
    {"amount": 1, "note": None},
    {"amount": 1, "note": 3},
    {"amount": [1], "note": True},
    {"note": 7, "x": 1, "amount": "a", "metadata": 3, "b": 2},
    {"amount": 1, "metadata": {}},
    {"amount": 10**30},
    {"metadata": None, "zz": {"deep": [1]}},
]


@pytest.mark.parametrize("action", ACTIONS)
def test_action_errors_match_pydantic(action: dict[str, Any]) -> None:
    assert _normalised(action_errors(TaskEnvironment.action_fields, action)) == _pydantic(
        TinyAction, action
    )


@pytest.mark.parametrize(
    ("model", "data", "message"),
    [
        (ResetMessage, "optional", {"type": "reset", "data": [1]}),
        (ResetMessage, "optional", {"type": "reset", "x": 1, "data": None, "y": 2}),
        (StepMessage, "required", {"type": "step"}),
        (StepMessage, "required", {"x": 1, "type": "step"}),
        (StepMessage, "required", {"type": "step", "data": 3, "z": None}),
        (StateMessage, "forbidden", {"type": "state", "data": {}}),
        (StateMessage, "forbidden", {"type": "state"}),
    ],
)
def test_envelope_errors_match_pydantic(
    model: type[BaseModel], data: str, message: dict[str, Any]
) -> None:
    assert _normalised(envelope_errors(message, data=data)) == _pydantic(model, message)


def _pydantic(model: type[BaseModel], value: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        model.model_validate(value)
    except ValidationError as exc:
        return _normalised(json.loads(json.dumps(exc.errors())))
    return []


def _unversioned(text: str) -> str:
    return re.sub(r"errors\.pydantic\.dev/[^/]+/", "errors.pydantic.dev/V/", text)


def _normalised(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "loc": list(e["loc"]), "url": _unversioned(e["url"])} for e in errors]


def test_inbound_frame_limit_is_16_mib(start: Start) -> None:
    # Compressed, the whole frame reaches the server before it refuses it, so the 1009
    # close frame always arrives (see the uncompressed case below).
    server = start(per_message_deflate=True)
    with open_ws(server.ws_url) as ws:
        reply = ask(ws, "x" * SIXTEEN_MIB, timeout=30)  # the last accepted size
        assert error_code(reply) == "INVALID_JSON"
        send_expecting_close(ws, "x" * (SIXTEEN_MIB + 1), 1009)  # the first refused size
    wait_until(lambda: server.active_sessions == 0)


def test_uncompressed_oversized_frame_ends_the_session(tiny: ServerHandle) -> None:
    """Without compression uvicorn closes with 1009 while our bytes are still arriving; the
    kernel may then reset the connection before the close frame is read. Either way the
    session ends, its slot is freed and the server keeps serving."""
    with open_ws(tiny.ws_url) as ws:
        ask(ws, RESET)
        with pytest.raises(ConnectionClosed) as ended:
            ask(ws, "x" * (SIXTEEN_MIB + 1), timeout=30)
        assert ended.value.rcvd is None or ended.value.rcvd.code == 1009
    wait_until(lambda: tiny.active_sessions == 0)
    with open_ws(tiny.ws_url) as ws:
        assert ask(ws, RESET)["type"] == "observation"


def test_server_pings_and_drops_a_silent_peer(start: Start) -> None:
    server = start(ping_interval=0.2, ping_timeout=0.3)
    raw = RawSocket(server.port)
    try:
        assert raw.status == 101
        started = time.monotonic()
        opcode, _ = raw.read_frame()
        assert opcode == 0x9
        assert time.monotonic() - started < 2
        wait_until(lambda: server.active_sessions == 1)
        opcode, payload = raw.read_frame()  # no pong from us: the server gives up
        assert opcode == 0x8
        assert int.from_bytes(payload[:2], "big") == 1011
    finally:
        raw.close()
    wait_until(lambda: server.active_sessions == 0)


def test_pongs_keep_an_idle_session_alive(start: Start) -> None:
    server = start(ping_interval=0.1, ping_timeout=0.5)
    with open_ws(server.ws_url) as ws:
        ask(ws, RESET)
        time.sleep(0.6)
        assert ask(ws, step(1))["type"] == "observation"


def test_capacity_with_one_session(start: Start) -> None:
    server = start(max_sessions=1)
    with open_ws(server.ws_url) as first:
        ask(first, RESET)
        with open_ws(server.ws_url) as second:  # the upgrade itself succeeds
            reply = receive(second)
            assert reply == {
                "type": "error",
                "data": {
                    "message": "Server at capacity: 1/1 sessions active. "
                    "Cannot accept new connections.",
                    "code": "CAPACITY_REACHED",
                    "active_sessions": 1,
                    "max_sessions": 1,
                },
            }
            expect_close(second, 1000)
        assert ask(first, step(1))["type"] == "observation"
    wait_until(lambda: server.active_sessions == 0)
    with open_ws(server.ws_url) as third:
        assert ask(third, RESET)["type"] == "observation"


def test_counter_follows_the_kiln_interop_script(start: Start) -> None:
    from oracle.envs.counter import CounterEnvironment

    server = start(CounterEnvironment)
    with open_ws(server.ws_url) as ws:
        first = ask(ws, {"type": "reset", "data": {"seed": 17, "episode_id": "kiln-interop"}})
        assert first["data"]["observation"]["total"] == 0
        assert first["data"]["reward"] is None
        assert ask(ws, step(2, note="first"))["data"]["reward"] == 2.0
        last = ask(ws, step(2, note="second"))["data"]
        assert (last["observation"]["total"], last["reward"], last["done"]) == (4, 4.0, True)
        assert ask(ws, {"type": "state"})["data"] == {
            "episode_id": "kiln-interop",
            "step_count": 2,
            "total": 4,
        }


def test_bandit_execution_error_is_recoverable(start: Start) -> None:
    from oracle.envs.bandit import BanditEnvironment

    server = start(BanditEnvironment)
    with open_ws(server.ws_url) as ws:
        assert ask(ws, {"type": "reset", "data": {"seed": 41}})["data"]["observation"]["pulls"] == 0
        assert error_code(ask(ws, {"type": "step", "data": {"arm": 99}})) == "EXECUTION_ERROR"
        pulled = ask(ws, {"type": "step", "data": {"arm": 0}})["data"]
        assert pulled["observation"]["pulls"] == 1
        assert pulled["reward"] in (0, 1)


def _close_message(ws: ClientConnection, server: ServerHandle) -> None:
    send(ws, {"type": "close"})
    expect_close(ws)


def _client_close(ws: ClientConnection, server: ServerHandle) -> None:
    ws.close()


def _binary(ws: ClientConnection, server: ServerHandle) -> None:
    ask(ws, b"\x00\x01")
    expect_close(ws)


def _oversized(ws: ClientConnection, server: ServerHandle) -> None:
    send_expecting_close(ws, "x" * (SIXTEEN_MIB + 1), 1009)


@pytest.mark.parametrize("ending", [_close_message, _client_close, _binary, _oversized])
def test_slot_released_after_websocket_endings(start: Start, ending: Any) -> None:
    server = start(per_message_deflate=True, max_sessions=1)
    with open_ws(server.ws_url) as ws:
        ask(ws, RESET)
        assert server.active_sessions == 1
        ending(ws, server)
    wait_until(lambda: server.active_sessions == 0)


def test_slot_released_after_tcp_drop_without_close_frame(tiny: ServerHandle) -> None:
    raw = RawSocket(tiny.port)
    raw.send_text(json.dumps(RESET))
    assert raw.read_frame()[0] == 0x1
    assert tiny.active_sessions == 1
    raw.close()
    wait_until(lambda: tiny.active_sessions == 0)


@pytest.mark.parametrize("deflate", [False, True])
def test_permessage_deflate_is_negotiated_only_when_enabled(start: Start, deflate: bool) -> None:
    server = start(per_message_deflate=deflate)
    with open_ws(server.ws_url) as ws:  # the client offers permessage-deflate
        assert bool(ws.protocol.extensions) is deflate
        assert ask(ws, RESET)["type"] == "observation"
