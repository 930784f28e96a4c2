"""Differential tests for MCP tool environments: the oracle toolbox against openenv 0.10.0.

The openenv side is `behaviour_peers.ToolboxEnvironment`: openenv's `MCPEnvironment` with
FastMCP tools, served by `create_app(..., CallToolAction, CallToolObservation)`. Its tool
bodies are the oracle's, so both compute the same values; everything on the wire (tool
listings, argument validation and its texts, results, errors, sessions) is FastMCP's and
openenv's on one side and `oracle/tools.py` on the other. Every surface is compared byte
for byte: `step` with tool actions, the `mcp` message, `WS /mcp`, `POST /mcp` with and
without an HTTP MCP session, and a WebSocket attached to one. The only values masked are
the fresh uuid4 session ids, checked for their shape first.

The last tests drive both servers with OpenEnv's own `MCPToolClient`, end to end.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("openenv")

from oracle.runner import ServerConfig, ServerHandle, start_server
from tests.interop.wsprobe import Frame, Transcript, exchange, open_session, unsolicited

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def servers(behaviour_urls: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(our toolbox, openenv's toolbox), both with four session slots."""
    handle: ServerHandle = start_server(ServerConfig("toolbox", max_sessions=4))
    try:
        yield handle.base_url, behaviour_urls["toolbox"]
    finally:
        handle.stop()


def _step(data: Any) -> str:
    return json.dumps({"type": "step", "data": data}, separators=(",", ":"))


def _rpc(method: str, params: Any = None, rid: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": rid}
    if params is not None:
        body["params"] = params
    return body


def _mcp(method: str, params: Any = None, rid: Any = 1) -> str:
    return json.dumps({"type": "mcp", "data": _rpc(method, params, rid)})


def _call(tool: str, arguments: Any) -> dict[str, Any]:
    return {"type": "call_tool", "tool_name": tool, "arguments": arguments}


CALLS: tuple[tuple[str, Any], ...] = (
    ("echo_message", {"message": "hi é\u2028"}),
    ("add", {"a": 2, "b": 3}),
    ("add", {"a": "5", "b": True}),        # lax: digit strings and booleans are integers
    ("add", {"a": 2.0, "b": "1_000"}),
    ("add", {"a": 10**30, "b": 1}),
    ("add", {"a": 2.5, "b": None}),        # int_from_float, int_type
    ("add", {"a": [1], "b": {}}),
    ("add", {"a": "x y", "b": 1}),        # int_parsing: classified as execution_error
    ("add", {"a": 1, "b": 2, "c": 3}),     # unexpected_keyword_argument
    ("add", {}),                           # missing_argument twice
    ("echo_message", {"message": 5}),
    ("echo_message", {"message": "x" * 80}),
    ("remember", {"note": "first"}),
    ("remember", {"note": "second"}),
    ("nope", {}),
    ("", {}),
)

STEP_SCRIPT: tuple[Frame, ...] = (
    '{"type":"reset","data":{"seed":3}}',
    _step({"type": "list_tools"}),
    *(_step(_call(tool, arguments)) for tool, arguments in CALLS),
    _step({"tool_name": "add", "arguments": {"a": 1, "b": 1}}),  # type defaults to call_tool
    _step({**_call("add", {"a": 1, "b": 1}), "metadata": {"m": 1}}),
    _step({"type": "call_tool", "tool_name": 5, "arguments": "x"}),
    _step({"type": "other", "tool_name": "add"}),
    _step({"type": 5}),
    _step({"type": "list_tools", "tool_name": "x"}),
    _step({"type": "list_tools", "metadata": 5}),
    _step({"tool_name": "echo_message", "arguments": {}, "extra": None}),
    _step({"type": []}),                   # unhashable: openenv's MCP lookup raises
    _step({"type": {"a": 1}}),
    '{"type":"state"}',
    _mcp("tools/list"),
    _mcp("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, 7),
    _mcp("tools/call", {"name": "remember", "arguments": {"note": "third"}}, 8),
    _mcp("tools/call", {"name": "nope", "arguments": {}}, 9),
    _mcp("tools/call", {"name": "add", "arguments": {"a": "x", "b": 1}}, 10),
    _mcp("tools/call", {"arguments": {}}, 11),
    _mcp("tools/call", {"name": 5, "arguments": [1]}, 12),
    _mcp("tools/call", {"name": "add", "arguments": None}, "s"),
    _mcp("nope/method", {}, 13),
    '{"type":"mcp","data":{"foo":1}}',
    '{"type":"state"}',
    '{"type":"reset","data":{"seed":4,"episode_id":"run-4"}}',
    '{"type":"state"}',
    '{"type":"close"}',
)


def exact(transcript: Transcript) -> list[list[str]]:
    return [
        [event.text if event.kind == "frame" else f"<{event.kind} {event.code}>" for event in reply]
        for reply in transcript.replies
    ]


async def _script(base_url: str, frames: Sequence[Frame], path: str = "/ws") -> list[list[str]]:
    if path == "/ws":
        ws = await open_session(base_url)
    else:
        from websockets.asyncio.client import connect

        ws = await connect(base_url.replace("http://", "ws://", 1) + path, proxy=None,
                           max_size=None)
    try:
        return exact(await exchange(ws, frames))
    finally:
        await ws.close()


def _both(servers: tuple[str, str], frames: Sequence[Frame],
          path: str = "/ws") -> tuple[list[list[str]], list[list[str]]]:
    ours, theirs = servers
    return asyncio.run(_script(ours, frames, path)), asyncio.run(_script(theirs, frames, path))


def test_tool_steps_and_mcp_messages_match(servers: tuple[str, str]) -> None:
    ours, theirs = _both(servers, STEP_SCRIPT)
    replies = [json.loads(reply[0]) for reply in theirs[:-1]]
    listed = replies[1]["data"]["observation"]["tools"]
    assert [tool["name"] for tool in listed] == ["echo_message", "add", "remember"]
    errors = [
        reply["data"]["observation"]["error"]["error_type"]
        for reply in replies[2:2 + len(CALLS)]
        if reply["type"] == "observation" and reply["data"]["observation"]["error"]
    ]
    # openenv types an error by keywords in FastMCP's message: pydantic's type errors say
    # neither "invalid" nor "argument", so only unexpected and missing arguments are
    # invalid_args
    assert errors == ["execution_error", "execution_error", "execution_error", "invalid_args",
                      "invalid_args", "execution_error", "tool_not_found", "tool_not_found"]
    assert theirs[-1] == ["<closed 1000>"]
    assert ours == theirs


MCP_SOCKET_SCRIPT: tuple[Frame, ...] = (
    json.dumps(_rpc("tools/list")),
    json.dumps(_rpc("tools/call", {"name": "remember", "arguments": {"note": "a"}}, 2)),
    json.dumps(_rpc("tools/call", {"name": "remember", "arguments": {"note": "b"}}, 3)),
    json.dumps(_rpc("tools/call", {"name": "add", "arguments": {"a": 1}}, 4)),
    json.dumps(_rpc("tools/call", {"name": "nope"}, 5)),
    json.dumps(_rpc("tools/call", {}, 6)),
    "{bad",
    json.dumps(_rpc("nope", None, 7)),
    json.dumps(_rpc("openenv/session/create", None, 8)),
)


def test_mcp_websocket_route_matches(servers: tuple[str, str]) -> None:
    ours, theirs = _both(servers, MCP_SOCKET_SCRIPT, "/mcp")

    def masked(replies: list[list[str]]) -> list[list[str]]:
        body = json.loads(replies[-1][0])
        assert uuid.UUID(body["result"]["session_id"]).version == 4
        return [*replies[:-1], [replies[-1][0].replace(body["result"]["session_id"], "<id>")]]

    assert json.loads(theirs[2][0])["result"]["data"] == 2  # the socket keeps its notes
    assert masked(ours) == masked(theirs)


HTTP_BODIES: tuple[Any, ...] = (
    _rpc("tools/list"),
    *(_rpc("tools/call", {"name": tool, "arguments": arguments}) for tool, arguments in CALLS),
    _rpc("tools/call", {"name": "add"}),
    _rpc("tools/call", {"name": "add", "arguments": "x"}),
    _rpc("tools/call", {"name": {"a": 1}, "arguments": {}}),
    _rpc("tools/call", {"name": ""}),
    _rpc("tools/list", {"session_id": "zzz"}),
    _rpc("openenv/session/close", {}),
    _rpc("openenv/session/close", {"session_id": "zzz"}),
    {},
    b"{not json",
)


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0, trust_env=False, follow_redirects=False) as client:
        yield client


def _post(http: httpx.Client, base_url: str, body: Any) -> httpx.Response:
    if isinstance(body, bytes):
        return http.post(base_url + "/mcp", content=body)
    return http.post(base_url + "/mcp", json=body)


@pytest.mark.parametrize("body", HTTP_BODIES, ids=range(len(HTTP_BODIES)))
def test_post_mcp_matches(http: httpx.Client, servers: tuple[str, str], body: Any) -> None:
    ours, theirs = (_post(http, url, body) for url in servers)
    assert theirs.status_code == 200
    assert ours.status_code == 200
    assert ours.content == theirs.content


@pytest.mark.parametrize("path", ["/schema", "/metadata", "/list_environments", "/state"])
def test_discovery_documents_match(http: httpx.Client, servers: tuple[str, str],
                                   path: str) -> None:
    ours, theirs = (http.get(url + path) for url in servers)
    assert (ours.status_code, ours.content) == (theirs.status_code, theirs.content)


@pytest.mark.parametrize(
    ("path", "body"),
    [("/reset", {"seed": 1}), ("/step", {"action": {"type": "list_tools"}}),
     ("/step", {"action": _call("add", {"a": 1, "b": 2})}),
     ("/step", {"action": {"type": "call_tool"}})],
)
def test_stateless_http_matches(http: httpx.Client, servers: tuple[str, str], path: str,
                                body: Any) -> None:
    ours, theirs = (http.post(url + path, json=body) for url in servers)
    assert (ours.status_code, ours.content) == (theirs.status_code, theirs.content)


def _session_lifecycle(http: httpx.Client, base_url: str) -> list[str]:
    """Create an HTTP MCP session, use it over HTTP and from an attached WebSocket, close
    it while attached and after; every reply, with the session id replaced by `<id>`."""
    created = _post(http, base_url, _rpc("openenv/session/create")).json()
    session = created["result"]["session_id"]
    assert uuid.UUID(session).version == 4
    texts = [json.dumps(created)]
    for note in ("a", "b"):
        texts.append(_post(http, base_url, _rpc(
            "tools/call", {"name": "remember", "arguments": {"note": note},
                           "session_id": session})).text)
    texts.append(_post(http, base_url, _rpc("tools/list", {"session_id": session})).text)

    async def attached() -> list[list[str]]:
        from websockets.asyncio.client import connect

        url = base_url.replace("http://", "ws://", 1) + f"/ws?session_id={session}"
        async with connect(url, proxy=None) as first, connect(url, proxy=None) as second:
            refused = [[event.text or f"<{event.kind} {event.code}>"
                        for event in await unsolicited(second)]]
            replies = exact(await exchange(first, [
                '{"type":"state"}',
                _step(_call("remember", {"note": "c"})),
                _mcp("openenv/session/create"),
                _mcp("openenv/session/close", {"session_id": session}),
            ]))
            closing = _post(http, base_url, _rpc("openenv/session/close",
                                                 {"session_id": session})).text
            after = exact(await exchange(first, ['{"type":"state"}', '{"type":"close"}']))
            return [*refused, *replies, [closing], *after]

    for reply in asyncio.run(attached()):
        texts.extend(reply)
    texts.append(_post(http, base_url, _rpc("openenv/session/close",
                                            {"session_id": session})).text)
    texts.append(_post(http, base_url, _rpc("tools/list", {"session_id": session})).text)
    return [text.replace(session, "<id>") for text in texts]


def test_http_mcp_sessions_and_attached_sockets_match(http: httpx.Client,
                                                      servers: tuple[str, str]) -> None:
    ours, theirs = (_session_lifecycle(http, url) for url in servers)
    assert json.loads(theirs[1])["result"]["data"] == 1
    assert json.loads(theirs[2])["result"]["data"] == 2
    assert theirs[4:6] == [
        '{"type":"error","data":{"message":"Session <id> already has an attached WebSocket",'
        '"code":"SESSION_ERROR"}}', "<closed 1000>"]
    assert '"notes":["a","b"]' in theirs[6]  # the attached socket sees the session's notes
    assert '"data":3' in theirs[7]
    assert json.loads(theirs[10]) == {"jsonrpc": "2.0", "id": 1, "result": {
        "session_id": "<id>", "closed": False, "closing": True}}
    assert theirs[12] == "<closed 1000>"
    assert json.loads(theirs[13])["error"]["message"] == "Unknown session_id: <id>"
    assert ours == theirs


def test_capacity_counts_http_sessions(http: httpx.Client, servers: tuple[str, str]) -> None:
    def fill(base_url: str) -> list[Any]:
        made = [_post(http, base_url, _rpc("openenv/session/create")).json() for _ in range(5)]
        for reply in made:
            if "result" in reply:
                _post(http, base_url, _rpc("openenv/session/close", {"session_id": reply[
                    "result"]["session_id"]}))
        return [sorted(reply) for reply in made[:4]] + [made[4]]

    ours, theirs = (fill(url) for url in servers)
    assert theirs[4]["error"]["code"] == -32000
    assert theirs[4]["error"]["data"] == {"active_sessions": 4, "max_sessions": 4}
    assert ours == theirs


# -- argument validation against FastMCP itself -------------------------------------------

ARGUMENT = st.one_of(
    st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=False,
                                                                      allow_infinity=False),
    st.text(max_size=70),
    st.sampled_from([" 7 ", "+3", "1_000", "-0", "1e3", "0x10", "٣", "\x1c7", "\xa07",
                     "\u30007", "7_"]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                         max_size=2),
)


@settings(max_examples=120, deadline=None)
@given(tool=st.sampled_from(["echo_message", "add", "remember"]),
       arguments=st.dictionaries(st.sampled_from(["message", "a", "b", "note", "c"]), ARGUMENT,
                                 max_size=4))
def test_property_arguments_validate_as_fastmcp_does(tool: str, arguments: dict[str, Any]) -> None:
    """Whatever the arguments, the oracle accepts what FastMCP accepts (with the same
    value) and refuses with FastMCP's exact text."""
    from oracle.envs.toolbox import ToolboxEnvironment as OracleToolbox
    from oracle.tools import ToolCallError
    from tests.interop.behaviour_peers import ToolboxEnvironment as Peer

    async def theirs() -> tuple[str, Any]:
        from fastmcp import Client

        peer = Peer()
        async with Client(peer.mcp_server) as client:
            try:
                result = await client.call_tool(tool, arguments)
            except Exception as exc:
                return "error", str(exc)
        return "result", result.data

    try:
        ours: tuple[str, Any] = ("result", OracleToolbox().call(tool, arguments))
    except ToolCallError as exc:
        ours = ("error", str(exc))
    assert ours == asyncio.run(theirs())


# -- OpenEnv's own MCP client ---------------------------------------------------------------


async def _drive(base_url: str) -> list[Any]:
    from openenv.core.env_server.mcp_types import CallToolAction
    from openenv.core.mcp_client import MCPToolClient

    seen: list[Any] = []
    async with MCPToolClient(base_url=base_url) as env:
        reset = await env.reset(seed=5)
        seen.append((reset.done, reset.reward))
        tools = await env.list_tools()
        seen.append([(tool.name, tool.description, tool.input_schema) for tool in tools])
        seen.append(await env.call_tool("add", a=2, b=40))
        seen.append(await env.call_tool("echo_message", message="hello"))
        seen.append(await env.call_tool("remember", note="one"))
        stepped = await env.step(CallToolAction(tool_name="remember", arguments={"note": "two"}))
        seen.append(stepped.observation.result["data"])  # the HTTP calls' session: 2 notes
        state = await env.state()
        seen.append((state.episode_id, state.step_count))
        with pytest.raises(RuntimeError) as failed:
            await env.call_tool("nope")
        seen.append(str(failed.value))
        seen.append(await env.has_tool("add"))
    return seen


def test_mcp_tool_client_drives_both_alike(servers: tuple[str, str]) -> None:
    ours, theirs = (asyncio.run(_drive(url)) for url in servers)
    assert theirs[0] == (False, None)
    assert [name for name, _, _ in theirs[1]] == ["echo_message", "add", "remember"]
    assert theirs[2:6] == [42, "hello", 1, 2]
    assert theirs[6] == ("episode-5", 1)
    assert theirs[7] == "Tool 'nope' failed: Unknown tool: 'nope'"
    assert theirs[8] is True
    assert ours == theirs


def test_mcp_tool_client_leaves_no_session_behind(http: httpx.Client,
                                                  servers: tuple[str, str]) -> None:
    ours, _ = servers
    asyncio.run(_drive(ours))
    created = [_post(http, ours, _rpc("openenv/session/create")).json() for _ in range(4)]
    assert all("result" in reply for reply in created)  # all four slots were free again
    for reply in created:
        _post(http, ours, _rpc("openenv/session/close",
                               {"session_id": reply["result"]["session_id"]}))
