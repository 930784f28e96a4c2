"""Talking JSON-RPC 2.0 to an OpenEnv server's MCP surfaces, for the ``mcp.*`` cases.

Every OpenEnv server has ``POST /mcp`` (always HTTP 200, errors in the body), ``WS /mcp``
(one JSON-RPC request per text frame) and the ``mcp`` message type on ``/ws``; a server
*advertises MCP* when ``tools/list`` answers a tool list rather than an error (a non-MCP
OpenEnv environment answers -32603 "Environment does not support MCP"). A server has
*tool actions* when its action schema is OpenEnv's ``CallToolAction`` shape (a
``tool_name`` property), so ``step`` also takes ``{"type": "list_tools"}``.

The helpers here only move bytes and check shapes; replies are untrusted, read within the
discovery body cap, and never echoed beyond a bounded snippet.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_kiln.cases.model import FRAME_TIMEOUT_S, CheckFailed, NotApplicable, describe

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

    from pytest_kiln.cases.context import CaseContext

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
#: What the ``mcp.tools-call-unknown`` case calls.
UNKNOWN_TOOL = "kiln_conformance_no_such_tool"


def request(
    method: str, params: dict[str, Any] | None = None, rid: int | str = 1
) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": rid}
    if params is not None:
        body["params"] = params
    return body


def response_shape(value: Any, what: str) -> dict[str, Any]:
    """``value`` must be a JSON-RPC 2.0 response: ``jsonrpc``, ``id`` and exactly one of
    ``result``/``error``, an error with an integer ``code`` and a string ``message``."""
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        raise CheckFailed(f"{what} is not a JSON-RPC 2.0 response (jsonrpc must be \"2.0\")")
    if "id" not in value:
        raise CheckFailed(f"{what} has no id member")
    if ("result" in value) == ("error" in value):
        raise CheckFailed(f"{what} must carry exactly one of result and error")
    error = value.get("error")
    if "error" in value:
        code = error.get("code") if isinstance(error, dict) else None
        if not isinstance(error, dict) or isinstance(code, bool) or not isinstance(code, int):
            raise CheckFailed(f"{what}: the error object lacks an integer code")
        if not isinstance(error.get("message"), str):
            raise CheckFailed(f"{what}: the error object lacks a string message")
    return value


def error_of(value: dict[str, Any]) -> int | None:
    error = value.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def expect_error(value: dict[str, Any], code: int, what: str) -> None:
    got = error_of(value)
    if got != code:
        shown = "a result" if got is None else f"error {got}"
        raise CheckFailed(f"{what} answered {shown}, expected JSON-RPC error {code}")


async def post(ctx: CaseContext, body: bytes) -> Any:
    """``POST /mcp`` with raw bytes: the status must be 200 and the body strict JSON.

    The bytes are sent as they are (a parse-error probe is not JSON at all), through the
    case's raw httpx client (:meth:`CaseContext.raw_http`: the client's rules, no
    redirects), the body read within the discovery cap. 404/405 mean the server has no
    ``/mcp`` route: the case is not applicable there.
    """
    import httpx

    from kiln_verify.core.jsonio import loads
    from kiln_verify.errors import KilnError
    from kiln_verify.limits import MAX_DISCOVERY_BODY_BYTES

    client = await ctx.client()
    http = await ctx.raw_http()
    try:
        async with http.stream("POST", client.url.join("/mcp"), content=body,
                               headers={"content-type": "application/json"}) as response:
            status = response.status_code
            raw = b""
            async for chunk in response.aiter_bytes():
                raw += chunk
                if len(raw) > MAX_DISCOVERY_BODY_BYTES:
                    raise CheckFailed("the POST /mcp body exceeds the discovery body cap")
    except httpx.HTTPError as exc:
        raise CheckFailed(f"POST /mcp failed ({type(exc).__name__})") from None
    if status in (404, 405):
        raise NotApplicable(f"POST /mcp answered HTTP {status} (no MCP route)")
    if status != 200:
        raise CheckFailed(f"POST /mcp answered HTTP {status}; JSON-RPC errors travel in a 200")
    try:
        return loads(raw, max_bytes=MAX_DISCOVERY_BODY_BYTES)
    except KilnError as exc:
        raise CheckFailed(f"the POST /mcp body is not strict JSON ({exc.code})") from None


async def call(ctx: CaseContext, body: dict[str, Any], what: str) -> dict[str, Any]:
    return response_shape(await post(ctx, json.dumps(body).encode("utf-8")), what)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    input_schema: Any


def tool_specs(result: Any, what: str) -> list[ToolSpec]:
    """The tools of a ``tools/list`` result (MCP's ``inputSchema`` or OpenEnv's
    ``input_schema`` spelling)."""
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        raise CheckFailed(f"{what} has no tools array")
    specs: list[ToolSpec] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise CheckFailed(f"{what}: tool {index} has no string name")
        schema = tool.get("inputSchema", tool.get("input_schema"))
        if not isinstance(schema, dict):
            raise CheckFailed(f"{what}: tool {tool['name'][:40]!r} has no input schema object")
        specs.append(ToolSpec(tool["name"], schema))
    return specs


async def advertised_tools(ctx: CaseContext) -> list[ToolSpec]:
    """The tools ``POST /mcp tools/list`` advertises; not applicable without any."""
    reply = await call(ctx, request("tools/list"), "tools/list")
    if "error" in reply:
        raise NotApplicable("the server advertises no MCP tools (tools/list answered error "
                            f"{error_of(reply)})")
    specs = tool_specs(reply["result"], "the tools/list result")
    if not specs:
        raise NotApplicable("tools/list answered an empty tool list")
    return specs


def arguments_for(tool: ToolSpec) -> dict[str, Any] | None:
    """Arguments built from the tool's input schema, checked against it (``None``: none)."""
    from pytest_kiln.cases.actions import ActionBuilder

    try:
        from kiln_verify.openenv.protocol.action_schema import ActionSchema

        compiled = ActionSchema(tool.input_schema)
    except Exception:
        return None
    builder = ActionBuilder(tool.input_schema)
    built = builder.object_value(builder.resolve(builder.root, "$"), "$", 0)
    if built is None or compiled.issues(built):
        return None
    return built


def callable_tool(tools: list[ToolSpec]) -> tuple[ToolSpec, dict[str, Any]]:
    for tool in tools:
        arguments = arguments_for(tool)
        if arguments is not None:
            return tool, arguments
    raise NotApplicable("no advertised tool has an input schema the suite can satisfy")


def has_tool_actions(action_schema: Any) -> bool:
    """OpenEnv's ``CallToolAction`` shape: a ``tool_name`` property in the action."""
    properties = action_schema.get("properties") if isinstance(action_schema, dict) else None
    return isinstance(properties, dict) and "tool_name" in properties


@contextlib.asynccontextmanager
async def mcp_socket(ctx: CaseContext) -> AsyncIterator[ClientConnection]:
    """A raw ``WS /mcp`` connection; a refused upgrade makes the case not applicable."""
    from websockets.asyncio.client import connect

    from kiln_verify.limits import MAX_SERVER_FRAME_BYTES
    from pytest_kiln.cases.acquire import close_raw

    client = await ctx.client()
    await client.health()
    url = client.url.websocket_url.removesuffix("/ws") + "/mcp"
    try:
        connection = await connect(
            url, additional_headers=ctx.headers(), open_timeout=FRAME_TIMEOUT_S,
            close_timeout=2, max_size=MAX_SERVER_FRAME_BYTES, proxy=None, ping_interval=None,
            user_agent_header="kiln-verify-conformance",
        )
    except Exception as exc:
        raise NotApplicable(f"the WS /mcp upgrade failed ({describe(exc)})") from None
    try:
        yield connection
    finally:
        await close_raw(connection)
