"""MCP checks: JSON-RPC error shapes everywhere, tool listing and calls where advertised."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from pytest_kiln.cases.acquire import backoff
from pytest_kiln.cases.context import CaseContext
from pytest_kiln.cases.frames import exchange, recv_object
from pytest_kiln.cases.mcp import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNKNOWN_TOOL,
    advertised_tools,
    call,
    callable_tool,
    error_of,
    expect_error,
    has_tool_actions,
    mcp_socket,
    post,
    request,
    response_shape,
    tool_specs,
)
from pytest_kiln.cases.model import SESSION_WAIT_S, CheckFailed, NotApplicable

SERVER_ERROR = -32000


async def check_http_response_shape(ctx: CaseContext) -> str | None:
    """``POST /mcp {}``: HTTP 200 and a JSON-RPC -32600 error (what ``openenv validate``
    probes)."""
    reply = response_shape(await post(ctx, b"{}"), "the reply to {}")
    expect_error(reply, INVALID_REQUEST, "POST /mcp {}")
    return None


async def check_parse_error(ctx: CaseContext) -> str | None:
    reply = response_shape(await post(ctx, b"{not json"), "the reply to a non-JSON body")
    expect_error(reply, PARSE_ERROR, "POST /mcp with a body that is not JSON")
    return None


async def check_method_not_found(ctx: CaseContext) -> str | None:
    reply = await call(ctx, request("kiln/conformance-unknown", {}, 7), "an unknown method")
    expect_error(reply, METHOD_NOT_FOUND, "an unknown method")
    if reply.get("id") != 7:
        raise CheckFailed("the error response does not carry the request's id")
    return None


async def check_tools_list(ctx: CaseContext) -> str | None:
    tools = await advertised_tools(ctx)
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise CheckFailed("tools/list names a tool twice")
    return f"{len(tools)} tools: {', '.join(name[:32] for name in names[:6])}"


def _tool_result(reply: dict[str, Any], what: str) -> Any:
    if "error" in reply:
        raise CheckFailed(f"{what} answered JSON-RPC error {error_of(reply)}")
    result = reply["result"]
    if isinstance(result, dict) and (result.get("is_error") is True
                                     or result.get("isError") is True):
        raise CheckFailed(f"{what} returned a result flagged as an error")
    return result


async def check_tools_call(ctx: CaseContext) -> str | None:
    tool, arguments = callable_tool(await advertised_tools(ctx))
    reply = await call(ctx, request("tools/call", {"name": tool.name, "arguments": arguments}, 2),
                       f"tools/call {tool.name[:40]}")
    _tool_result(reply, f"tools/call {tool.name[:40]!r}")
    if reply.get("id") != 2:
        raise CheckFailed("the tools/call response does not carry the request's id")
    return f"called {tool.name[:40]} with {sorted(arguments)}"


async def check_tools_call_without_name(ctx: CaseContext) -> str | None:
    await advertised_tools(ctx)
    reply = await call(ctx, request("tools/call", {"arguments": {}}, 3), "tools/call without name")
    expect_error(reply, INVALID_PARAMS, "tools/call without a name")
    return None


async def check_unknown_tool(ctx: CaseContext) -> str | None:
    tools = await advertised_tools(ctx)
    if any(tool.name == UNKNOWN_TOOL for tool in tools):
        raise NotApplicable(f"the server has a tool named {UNKNOWN_TOOL}")
    reply = await call(ctx, request("tools/call", {"name": UNKNOWN_TOOL, "arguments": {}}, 4),
                       "tools/call of an unknown tool")
    if "error" in reply:
        return f"JSON-RPC error {error_of(reply)}"
    result = reply["result"]
    if isinstance(result, dict) and (result.get("is_error") is True
                                     or result.get("isError") is True):
        return "a result flagged as an error"
    raise CheckFailed("calling a tool that does not exist answered a successful result")


async def check_ws_route(ctx: CaseContext) -> str | None:
    """``WS /mcp`` answers tools/list like ``POST /mcp`` does."""
    tools = await advertised_tools(ctx)
    async with mcp_socket(ctx) as ws:
        await ws.send(json.dumps(request("tools/list", None, 5)))
        reply = response_shape(await recv_object(ws, "the WS /mcp reply"), "the WS /mcp reply")
    if "error" in reply:
        raise CheckFailed(f"WS /mcp tools/list answered JSON-RPC error {error_of(reply)}")
    names = [tool.name for tool in tool_specs(reply["result"], "the WS /mcp tools/list result")]
    if names != [tool.name for tool in tools]:
        raise CheckFailed("WS /mcp lists other tools than POST /mcp")
    return None


async def check_ws_message(ctx: CaseContext) -> str | None:
    """An ``mcp`` message on ``/ws`` is answered with an ``mcp`` frame holding the response."""
    text = json.dumps({"type": "mcp", "data": request("tools/list", None, 6)})
    async with ctx.raw() as ws:
        frame = await exchange(ws, text)
    if frame.get("type") != "mcp":
        raise CheckFailed(f"an mcp message was answered with a {str(frame.get('type'))[:20]!r} "
                          "frame")
    reply = response_shape(frame.get("data"), "the mcp frame's data")
    if reply.get("id") != 6:
        raise CheckFailed("the mcp frame's response does not carry the request's id")
    return "result" if "result" in reply else f"JSON-RPC error {error_of(reply)}"


async def check_ws_message_invalid(ctx: CaseContext) -> str | None:
    """A malformed JSON-RPC request in an ``mcp`` message is a -32600 ``mcp`` reply."""
    async with ctx.raw() as ws:
        frame = await exchange(ws, '{"type":"mcp","data":{"kiln":"conformance"}}')
        if frame.get("type") != "mcp":
            raise CheckFailed("a malformed JSON-RPC request was answered with a "
                              f"{str(frame.get('type'))[:20]!r} frame, not an mcp frame")
        expect_error(response_shape(frame.get("data"), "the mcp frame's data"), INVALID_REQUEST,
                     "a malformed JSON-RPC request")
        after = await exchange(ws, '{"type":"state"}')
        if after.get("type") != "state":
            raise CheckFailed("after the malformed mcp message the session did not answer state")
    return None


async def _tool_schema(ctx: CaseContext) -> None:
    schema = await ctx.action_schema()
    if not has_tool_actions(schema.schema):
        raise NotApplicable("the action schema has no tool_name (no MCP tool actions)")


async def check_step_list_tools(ctx: CaseContext) -> str | None:
    await _tool_schema(ctx)
    from kiln_verify.errors import KilnError

    async with ctx.session() as (session, _):
        try:
            observation = await session.step({"type": "list_tools"})
        except KilnError as exc:
            raise CheckFailed(f"step list_tools failed ({exc.code}: {exc.rule[:120]})") from None
    tools = tool_specs(observation.observation, "the list_tools observation")
    return f"{len(tools)} tools"


async def check_step_call_tool(ctx: CaseContext) -> str | None:
    await _tool_schema(ctx)
    tool, arguments = callable_tool(await advertised_tools(ctx))
    action = {"type": "call_tool", "tool_name": tool.name, "arguments": arguments}
    from kiln_verify.errors import KilnError

    async with ctx.session() as (session, _):
        try:
            observation = await session.step(action)
        except KilnError as exc:
            raise CheckFailed(f"step call_tool failed ({exc.code}: {exc.rule[:120]})") from None
    body = observation.observation
    if body.get("tool_name") != tool.name:
        raise CheckFailed("the call_tool observation does not name the tool that was called")
    if body.get("error") is not None:
        raise CheckFailed("the call_tool observation carries an error for a valid call")
    return f"called {tool.name[:40]}"


async def check_session_lifecycle(ctx: CaseContext) -> str | None:
    """``openenv/session/create`` then ``openenv/session/close`` (OpenEnv's HTTP sessions)."""
    deadline = time.monotonic() + SESSION_WAIT_S
    retries = 0
    while True:
        created = await call(ctx, request("openenv/session/create", {}, 8), "session/create")
        if error_of(created) != SERVER_ERROR or time.monotonic() >= deadline:
            break
        retries += 1  # -32000 with active/max counts: the capacity answer; retry like /ws
        await asyncio.sleep(backoff(retries, deadline - time.monotonic()))
    ctx.capacity_retries += retries
    if error_of(created) == METHOD_NOT_FOUND:
        raise NotApplicable("openenv/session/create is not offered (no HTTP MCP sessions)")
    if "error" in created:
        raise CheckFailed(f"openenv/session/create answered JSON-RPC error {error_of(created)}")
    result = created["result"]
    session_id = result.get("session_id") if isinstance(result, dict) else None
    if not isinstance(session_id, str) or not session_id:
        raise CheckFailed("openenv/session/create did not return a session_id")
    closed = await call(ctx, request("openenv/session/close", {"session_id": session_id}, 9),
                        "session/close")
    if "error" in closed:
        raise CheckFailed(f"openenv/session/close answered JSON-RPC error {error_of(closed)}")
    if not (isinstance(closed["result"], dict) and closed["result"].get("closed") is True):
        raise CheckFailed("openenv/session/close did not answer closed: true")
    again = await call(ctx, request("openenv/session/close", {"session_id": session_id}, 10),
                       "a second session/close")
    expect_error(again, INVALID_PARAMS, "closing the same session twice")
    return None
