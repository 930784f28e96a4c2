"""MCP (JSON-RPC 2.0) answers of an OpenEnv server whose environment has no MCP tools.

None of the oracle environments is an MCP environment, but every OpenEnv server still has
`POST /mcp` and the WebSocket `mcp` message type; a client probing them must see what a
real non-MCP OpenEnv 0.10.0 server says, including pydantic's `ValidationError` text for a
malformed request. The one extension not reproduced is `openenv/session/create` over HTTP
(HTTP MCP sessions): it answers "Method not found", so no WebSocket can attach to such a
session either (see `oracle/README.md`). Over a WebSocket it names the socket's own
session, as OpenEnv does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from oracle.validation import PYDANTIC_ERRORS_URL

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


def answer_http(body: bytes, factory: Callable[[], object]) -> dict[str, Any]:
    """`POST /mcp`: always HTTP 200; errors travel in the JSON-RPC body.

    `factory` builds the throwaway environment OpenEnv builds before answering a tool
    method; when it raises (the `factory-error` fault) the exception propagates (a 500).
    """
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return response(PARSE_ERROR, "Parse error")
    if not isinstance(request, dict):
        return response(PARSE_ERROR, "Parse error")
    return answer(request, session_id=None, factory=factory)


def answer(request: dict[str, Any], *, session_id: str | None,
           factory: Callable[[], object] | None = None) -> dict[str, Any]:
    """The response to one request object; `session_id` is the WebSocket's own session."""
    errors, request_id = _validate(request)
    if errors:
        return response(INVALID_REQUEST, "Invalid request: " + _format(errors))
    method: str = request["method"]
    params: dict[str, Any] = request.get("params", {})
    if method == "openenv/session/create" and session_id is not None:
        return {"jsonrpc": "2.0", "id": request_id, "result": {"session_id": session_id}}
    if method == "openenv/session/close":
        target = params.get("session_id")
        if not target:
            return response(INVALID_PARAMS, "Invalid params - 'session_id' is required",
                            request_id)
        if session_id is not None and target == session_id:
            return response(INVALID_REQUEST,
                            "Cannot close active WebSocket-managed session via MCP method",
                            request_id)
        return response(INVALID_PARAMS, f"Unknown session_id: {target}", request_id)
    if session_id is None and params.get("session_id"):
        return response(INVALID_PARAMS, f"Unknown session_id: {params['session_id']}",
                        request_id)
    if factory is not None:
        factory()
    if method == "tools/list":
        return response(INTERNAL_ERROR, "Environment does not support MCP", request_id)
    if method == "tools/call":
        if not params.get("name"):
            return response(INVALID_PARAMS, "Missing 'name' in params", request_id)
        return response(INTERNAL_ERROR, "Environment does not support MCP", request_id)
    return response(METHOD_NOT_FOUND, f"Method not found: {method}", request_id)


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
    count = len(errors)
    lines = [f"{count} validation error{'s' if count != 1 else ''} for JsonRpcRequest"]
    for loc, kind, msg, value in errors:
        lines.append(loc)
        lines.append(f"  {msg} [type={kind}, input_value={_short_repr(value)}, "
                     f"input_type={type(value).__name__}]")
        lines.append(f"    For further information visit {PYDANTIC_ERRORS_URL}{kind}")
    return "\n".join(lines)


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except RecursionError:
        text = "..."
    raw = text.encode("utf-8", errors="surrogatepass")
    if len(raw) <= 50:
        return text
    # pydantic-core cuts bytes, keeping whole characters on both sides of the ellipsis
    head = raw[:25].decode("utf-8", errors="ignore")
    tail = raw[-24:].decode("utf-8", errors="ignore")
    return f"{head}...{tail}"
