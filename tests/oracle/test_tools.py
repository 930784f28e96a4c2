"""The toolbox MCP tool environment and the HTTP MCP sessions, without openenv installed.

`tests/interop/test_differential_mcp.py` proves every byte against an openenv 0.10.0 MCP
server; these tests pin the same behaviour here, so it holds where the interop extra is
missing, and cover the bounds and accounting the differential cannot see.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from oracle.envs.toolbox import MAX_NOTES, ToolboxEnvironment
from oracle.inventory import ALL_SERVERS, SERVERS, TOOLS, environment_class
from oracle.runner import ServerConfig, ServerHandle, start_server
from oracle.tools import ToolCallError, check_arguments, error_type, result_payload
from tests.oracle.serverkit import ask, expect_close, open_ws, receive


@pytest.fixture(scope="module")
def toolbox() -> Iterator[ServerHandle]:
    handle = start_server(ServerConfig("toolbox", max_sessions=2))
    yield handle
    handle.stop()


@pytest.fixture
def http(toolbox: ServerHandle) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=toolbox.base_url, timeout=5.0, trust_env=False) as client:
        yield client


def rpc(method: str, params: Any = None, rid: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": rid}
    if params is not None:
        body["params"] = params
    return body


def post(http: httpx.Client, body: Any) -> Any:
    response = http.post("/mcp", json=body)
    assert response.status_code == 200
    return response.json()


def test_the_toolbox_is_served_by_name_outside_the_matrix() -> None:
    assert TOOLS == ("toolbox",)
    assert "toolbox" not in SERVERS
    assert len(SERVERS) == 23
    assert (*SERVERS, "toolbox") == ALL_SERVERS
    assert environment_class("toolbox") is ToolboxEnvironment


def test_schema_is_openenvs_call_tool_action(http: httpx.Client) -> None:
    schema = http.get("/schema").json()
    assert list(schema) == ["action", "observation", "state", "reset_observation"]
    assert schema["action"]["title"] == "CallToolAction"
    assert schema["action"]["required"] == ["tool_name"]
    assert schema["action"]["properties"]["type"]["const"] == "call_tool"
    assert schema["observation"]["title"] == "CallToolObservation"
    assert schema["reset_observation"] == schema["observation"]


def test_step_lists_and_calls_tools(toolbox: ServerHandle) -> None:
    with open_ws(toolbox.ws_url) as ws:
        ask(ws, '{"type":"reset","data":{"seed":2}}')
        listed = ask(ws, '{"type":"step","data":{"type":"list_tools"}}')
        tools = listed["data"]["observation"]["tools"]
        assert [tool["name"] for tool in tools] == ["echo_message", "add", "remember"]
        assert tools[1]["input_schema"] == {
            "additionalProperties": False,
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"], "type": "object"}
        called = ask(ws, json.dumps({"type": "step", "data": {
            "tool_name": "add", "arguments": {"a": "40", "b": True}}}))
        assert called["data"] == {"observation": {
            "metadata": {}, "tool_name": "add", "result": result_payload(41), "error": None},
            "reward": None, "done": False}
        unknown = ask(ws, '{"type":"step","data":{"tool_name":"nope"}}')
        assert unknown["data"]["observation"]["error"] == {
            "error_type": "tool_not_found", "message": "Unknown tool: 'nope'"}
        bad = ask(ws, '{"type":"step","data":{"type":"call_tool","tool_name":7}}')
        assert bad["data"]["code"] == "VALIDATION_ERROR"
        assert [e["type"] for e in bad["data"]["errors"]] == ["string_type"]
        unhashable = ask(ws, '{"type":"step","data":{"type":[1]}}')
        assert unhashable["data"] == {"message": "unhashable type: 'list'",
                                      "code": "EXECUTION_ERROR"}
        state = ask(ws, '{"type":"state"}')
        assert state["data"] == {"episode_id": "episode-2", "step_count": 3, "notes": []}


def test_argument_validation_texts() -> None:
    tool = ToolboxEnvironment.tool("add")
    assert check_arguments(tool, {"a": " 7 ", "b": 2.0}) == {"a": 7, "b": 2}
    with pytest.raises(ToolCallError) as caught:
        check_arguments(tool, {"a": 2.5, "c": "x" * 60})
    assert str(caught.value) == (
        "3 validation errors for call[add]\n"
        "a\n  Input should be a valid integer, got a number with a fractional part "
        "[type=int_from_float, input_value=2.5, input_type=float]\n"
        "    For further information visit https://errors.pydantic.dev/2.14/v/int_from_float\n"
        "b\n  Missing required argument [type=missing_argument, input_value={'a': 2.5, 'c': "
        "'xxxxxxxx...xxxxxxxxxxxxxxxxxxxxxx'}, input_type=dict]\n"
        "    For further information visit "
        "https://errors.pydantic.dev/2.14/v/missing_argument\n"
        "c\n  Unexpected keyword argument [type=unexpected_keyword_argument, "
        "input_value='xxxxxxxxxxxxxxxxxxxxxxxx...xxxxxxxxxxxxxxxxxxxxxxx', input_type=str]\n"
        "    For further information visit "
        "https://errors.pydantic.dev/2.14/v/unexpected_keyword_argument"
    )
    assert error_type(str(caught.value)) == "invalid_args"
    assert error_type("1 validation error for call[add]\na\n  Input should be a valid "
                      "integer") == "execution_error"
    assert error_type("Unknown tool: 'x'") == "tool_not_found"


def test_post_mcp_without_a_session_uses_a_throwaway_environment(http: httpx.Client) -> None:
    first = post(http, rpc("tools/call", {"name": "remember", "arguments": {"note": "a"}}))
    second = post(http, rpc("tools/call", {"name": "remember", "arguments": {"note": "b"}}))
    assert first["result"]["data"] == second["result"]["data"] == 1
    listed = post(http, rpc("tools/list"))["result"]["tools"]
    assert listed[0]["outputSchema"]["x-fastmcp-wrap-result"] is True
    assert post(http, rpc("tools/call", {}))["error"] == {
        "code": -32602, "message": "Missing 'name' in params", "data": None}
    assert post(http, rpc("tools/call", {"name": "nope"}))["error"]["code"] == -32603


def test_http_sessions_hold_a_slot_until_closed(toolbox: ServerHandle, http: httpx.Client) -> None:
    made = [post(http, rpc("openenv/session/create")) for _ in range(3)]
    assert [("result" in reply) for reply in made] == [True, True, False]
    assert made[2]["error"] == {
        "code": -32000,
        "message": "Server at capacity: 2/2 sessions active. Cannot accept new connections.",
        "data": {"active_sessions": 2, "max_sessions": 2}}
    assert toolbox.active_sessions == 2
    with open_ws(toolbox.ws_url) as ws:  # the WebSocket is refused too
        assert receive(ws)["data"]["code"] == "CAPACITY_REACHED"
    for reply in made[:2]:
        closed = post(http, rpc("openenv/session/close",
                                {"session_id": reply["result"]["session_id"]}))
        assert closed["result"]["closed"] is True
    assert toolbox.active_sessions == 0


def test_an_attached_socket_shares_the_session(toolbox: ServerHandle, http: httpx.Client) -> None:
    session = post(http, rpc("openenv/session/create"))["result"]["session_id"]
    post(http, rpc("tools/call", {"name": "remember", "arguments": {"note": "a"},
                                  "session_id": session}))
    with open_ws(f"{toolbox.ws_url}?session_id={session}") as ws:
        assert ask(ws, '{"type":"state"}')["data"]["notes"] == ["a"]
        with open_ws(f"{toolbox.ws_url}?session_id={session}") as second:
            assert receive(second)["data"] == {
                "message": f"Session {session} already has an attached WebSocket",
                "code": "SESSION_ERROR"}
            expect_close(second)
        own = ask(ws, json.dumps({"type": "mcp", "data": rpc("openenv/session/create")}))
        assert own["data"]["result"] == {"session_id": session}
        closing = post(http, rpc("openenv/session/close", {"session_id": session}))
        assert closing["result"] == {"session_id": session, "closed": False, "closing": True}
        assert toolbox.active_sessions == 1
        ws.send('{"type":"close"}')
        expect_close(ws)
    again = post(http, rpc("openenv/session/close", {"session_id": session}))
    assert again["error"]["message"] == f"Unknown session_id: {session}"
    assert toolbox.active_sessions == 0


def test_a_detached_session_survives_its_socket(toolbox: ServerHandle, http: httpx.Client) -> None:
    session = post(http, rpc("openenv/session/create"))["result"]["session_id"]
    with open_ws(f"{toolbox.ws_url}?session_id={session}") as ws:
        ask(ws, json.dumps({"type": "step", "data": {
            "tool_name": "remember", "arguments": {"note": "kept"}}}))
    listed = post(http, rpc("tools/call", {"name": "remember", "arguments": {"note": "more"},
                                           "session_id": session}))
    assert listed["result"]["data"] == 2
    assert post(http, rpc("openenv/session/close", {"session_id": session}))["result"][
        "closed"] is True


def test_sessions_on_a_non_mcp_server_are_created_and_say_no_mcp() -> None:
    handle = start_server(ServerConfig("counter", max_sessions=1))
    try:
        with httpx.Client(base_url=handle.base_url, timeout=5.0, trust_env=False) as http:
            session = post(http, rpc("openenv/session/create"))["result"]["session_id"]
            listed = post(http, rpc("tools/list", {"session_id": session}))
            assert listed["error"] == {"code": -32603,
                                       "message": "Environment does not support MCP",
                                       "data": None}
            post(http, rpc("openenv/session/close", {"session_id": session}))
    finally:
        handle.stop()


def test_factory_errors_on_session_create() -> None:
    handle = start_server(ServerConfig("toolbox", faults=("factory-error",)))
    try:
        with httpx.Client(base_url=handle.base_url, timeout=5.0, trust_env=False) as http:
            reply = post(http, rpc("openenv/session/create"))
        assert reply["error"] == {
            "code": -32000,
            "message": "Environment factory 'ToolboxEnvironment' failed to create instance.",
            "data": {"factory_name": "ToolboxEnvironment"}}
        assert handle.active_sessions == 0
    finally:
        handle.stop()


def test_notes_are_bounded() -> None:
    env = ToolboxEnvironment()
    env.reset({})
    for index in range(MAX_NOTES + 5):
        count = env.call("remember", {"note": str(index)})
    assert count == MAX_NOTES
    assert len(env.state()["notes"]) == MAX_NOTES
