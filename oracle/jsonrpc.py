"""MCP (JSON-RPC 2.0) answers of an OpenEnv 0.10.0 server, for every oracle environment.

Every OpenEnv server has `POST /mcp`, `WS /mcp` and the WebSocket `mcp` message type. A
non-MCP environment answers `tools/*` with -32603 "Environment does not support MCP"; a
tool environment (`oracle.tools.ToolEnvironment`) lists and calls its tools. A malformed
request gets pydantic's `ValidationError` text for `JsonRpcRequest`, as OpenEnv sends it.

OpenEnv's session extension is reproduced: `openenv/session/create` over HTTP reserves a
slot and an environment until `openenv/session/close`; later calls name it with
`params.session_id`, and a WebSocket attaches to it with `/ws?session_id=`. Over a
WebSocket, `create` names the socket's own session, which `close` refuses to close.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from oracle.tools import ToolCallError, ToolEnvironment, result_payload
from oracle.validation import pydantic_text

if TYPE_CHECKING:
    from oracle.base import Environment
    from oracle.context import ServerContext

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000

_Error = tuple[str, str, str, Any]  # loc, kind, msg, input


def response(code: int, message: str, request_id: Any = None,
             data: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id,
            "error": {"code": code, "message": message, "data": data}}


def success(result: Any, request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def answer_http(body: bytes, factory: Callable[[], object],
                ctx: ServerContext | None = None) -> dict[str, Any]:
    """`POST /mcp`: always HTTP 200; errors travel in the JSON-RPC body.

    `factory` builds the throwaway environment OpenEnv builds for a call that names no
    session; when it raises (the `factory-error` fault) the exception propagates (a 500).
    """
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return response(PARSE_ERROR, "Parse error")
    if not isinstance(request, dict):
        return response(PARSE_ERROR, "Parse error")
    return answer(request, session_id=None, factory=factory, ctx=ctx)


def answer(request: dict[str, Any], *, session_id: str | None,
           factory: Callable[[], object] | None = None, ctx: ServerContext | None = None,
           env: Environment | None = None) -> dict[str, Any]:
    """The response to one request object.

    `session_id` and `env` are a WebSocket's own session and environment; `ctx` gives
    access to the HTTP MCP sessions (without it, `create` over HTTP is "Method not found").
    """
    errors, request_id = _validate(request)
    if errors:
        return response(INVALID_REQUEST, "Invalid request: " + _format(errors))
    method: str = request["method"]
    params: dict[str, Any] = request.get("params", {})
    if method == "openenv/session/create":
        return _create(ctx, session_id, request_id)
    if method == "openenv/session/close":
        return _close(ctx, session_id, params, request_id)
    target = env
    if target is None:
        requested = params.get("session_id")
        if requested:
            held = ctx.http_sessions.get(requested) if ctx is not None else None
            if held is None:
                return response(INVALID_PARAMS, f"Unknown session_id: {requested}", request_id)
            target = held.env
        elif factory is not None:
            made = factory()
            target = made if isinstance(made, ToolEnvironment) else None
    if method == "tools/list":
        if not isinstance(target, ToolEnvironment):
            return response(INTERNAL_ERROR, "Environment does not support MCP", request_id)
        return success({"tools": [tool.mcp_listing() for tool in target.tools]}, request_id)
    if method == "tools/call":
        if not params.get("name"):
            return response(INVALID_PARAMS, "Missing 'name' in params", request_id)
        if not isinstance(target, ToolEnvironment):
            return response(INTERNAL_ERROR, "Environment does not support MCP", request_id)
        return _call(target, params, request_id)
    return response(METHOD_NOT_FOUND, f"Method not found: {method}", request_id)


def _create(ctx: ServerContext | None, session_id: str | None,
            request_id: Any) -> dict[str, Any]:
    from oracle.context import CapacityRefused, FactoryFailed

    if session_id is not None:
        return success({"session_id": session_id}, request_id)
    if ctx is None:
        return response(METHOD_NOT_FOUND, "Method not found: openenv/session/create",
                        request_id)
    try:
        created = ctx.create_http_session()
    except CapacityRefused as exc:
        return response(SERVER_ERROR, str(exc), request_id,
                        {"active_sessions": exc.active, "max_sessions": exc.maximum})
    except FactoryFailed as exc:
        return response(SERVER_ERROR, str(exc), request_id, {"factory_name": exc.factory_name})
    return success({"session_id": created}, request_id)


def _close(ctx: ServerContext | None, session_id: str | None, params: dict[str, Any],
           request_id: Any) -> dict[str, Any]:
    target = params.get("session_id")
    if not target:
        return response(INVALID_PARAMS, "Invalid params - 'session_id' is required", request_id)
    if session_id is not None and target == session_id:
        return response(INVALID_REQUEST,
                        "Cannot close active WebSocket-managed session via MCP method",
                        request_id)
    outcome = ctx.close_http_session(target) if ctx is not None and isinstance(
        target, str) else None
    if outcome == "closing":
        return success({"session_id": target, "closed": False, "closing": True}, request_id)
    if outcome == "closed":
        return success({"session_id": target, "closed": True}, request_id)
    return response(INVALID_PARAMS, f"Unknown session_id: {target}", request_id)


def _call(env: ToolEnvironment, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
    """`tools/call` through FastMCP's client: its request model first, then the tool."""
    name = params["name"]
    arguments = params.get("arguments")
    problems: list[_Error] = []
    if not isinstance(name, str):
        problems.append(("name", "string_type", "Input should be a valid string", name))
    if arguments is not None and not isinstance(arguments, dict):
        problems.append(("arguments", "dict_type", "Input should be a valid dictionary",
                         arguments))
    if problems:
        return response(INTERNAL_ERROR, pydantic_text("CallToolRequestParams", problems),
                        request_id)
    try:
        value = env.call(name, arguments or {})
    except ToolCallError as exc:
        return response(INTERNAL_ERROR, str(exc), request_id)
    return success(result_payload(value), request_id)


def _validate(request: dict[str, Any]) -> tuple[list[_Error], Any]:
    """`JsonRpcRequest(**request)`: jsonrpc, method, params, id, then extra keys."""
    errors: list[_Error] = []
    if "jsonrpc" not in request:
        errors.append(("jsonrpc", "missing", "Field required", request))
    elif request["jsonrpc"] != "2.0":
        errors.append(("jsonrpc", "literal_error", "Input should be '2.0'", request["jsonrpc"]))
    if "method" not in request:
        errors.append(("method", "missing", "Field required", request))
    elif not isinstance(request["method"], str):
        errors.append(("method", "string_type", "Input should be a valid string",
                       request["method"]))
    if "params" in request and not isinstance(request["params"], dict):
        errors.append(("params", "dict_type", "Input should be a valid dictionary",
                       request["params"]))
    request_id = request.get("id")
    if isinstance(request_id, bool | float):
        if isinstance(request_id, bool) or request_id.is_integer():
            request_id = int(request_id)
        else:
            errors.append(("id.str", "string_type", "Input should be a valid string", request_id))
            errors.append(("id.int", "int_from_float", "Input should be a valid integer, got a "
                           "number with a fractional part", request_id))
    elif request_id is not None and not isinstance(request_id, str | int):
        errors.append(("id.str", "string_type", "Input should be a valid string", request_id))
        errors.append(("id.int", "int_type", "Input should be a valid integer", request_id))
    for key, value in request.items():
        if key not in ("jsonrpc", "method", "params", "id"):
            errors.append((key, "extra_forbidden", "Extra inputs are not permitted", value))
    return errors, request_id


def _format(errors: list[_Error]) -> str:
    """`str(ValidationError)` as pydantic 2 writes it."""
    return pydantic_text("JsonRpcRequest", errors)
