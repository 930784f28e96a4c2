"""MCP tool environments, as an OpenEnv 0.10.0 `MCPEnvironment` with FastMCP tools shows them.

Such a server is built with `create_app(env, CallToolAction, CallToolObservation)`: its
action schema is OpenEnv's `CallToolAction`, `step` also takes `{"type": "list_tools"}`,
and tools are listed and called over every MCP surface (`step`, the `mcp` message, `WS
/mcp`, `POST /mcp` with or without an HTTP MCP session). What the wire shows was captured
from such a server (openenv 0.10.0, FastMCP 3.4, mcp 1.30, pydantic 2.14) and is asserted
against one by `tests/interop/test_differential_mcp.py`:

- a tool's input schema is FastMCP's rendering of its signature; `tools/list` over JSON-RPC
  adds MCP's `outputSchema` (a primitive result wrapped as `{"result": ...}`) and FastMCP's
  metadata, while the `list_tools` step shows OpenEnv's `Tool` model (`input_schema`);
- arguments are validated as pydantic's `validate_call` does in lax mode (`"5"` and `true`
  are integers, `5` is not a string) and a failure is pydantic's multi-line text;
- a result is FastMCP's `CallToolResult` as OpenEnv serialises it (`content`,
  `structured_content`, `meta`, `data`, `is_error`);
- on the `step` path an error becomes the observation's `error`, typed by OpenEnv's keyword
  rule on the message (`not found`/`unknown tool`, then `invalid`/`argument`); on the
  JSON-RPC paths it is a -32603 error carrying the same message.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib.resources
import json
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from oracle.base import Environment, ExecutionError, JsonObject, Outcome
from oracle.validation import ErrorItem, lax_int, pydantic_text

ParamType = Literal["string", "integer"]


@dataclasses.dataclass(frozen=True)
class ToolParam:
    name: str
    type: ParamType


@dataclasses.dataclass(frozen=True)
class Tool:
    """One tool: every parameter is required; the result is a string or an integer."""

    name: str
    description: str
    params: tuple[ToolParam, ...]
    returns: ParamType

    def input_schema(self) -> JsonObject:
        return {
            "additionalProperties": False,
            "properties": {param.name: {"type": param.type} for param in self.params},
            "required": [param.name for param in self.params],
            "type": "object",
        }

    def step_listing(self) -> JsonObject:
        """OpenEnv's `Tool` model, as the `list_tools` step observation holds it."""
        return {"name": self.name, "description": self.description,
                "input_schema": self.input_schema()}

    def mcp_listing(self) -> JsonObject:
        """MCP's `Tool` as FastMCP lists it (JSON-RPC `tools/list`)."""
        return {
            "name": self.name,
            "title": None,
            "description": self.description,
            "inputSchema": self.input_schema(),
            "outputSchema": {"properties": {"result": {"type": self.returns}},
                             "required": ["result"], "type": "object",
                             "x-fastmcp-wrap-result": True},
            "icons": None,
            "annotations": None,
            "meta": {"fastmcp": {"tags": []}},
            "execution": None,
        }


class ToolCallError(Exception):
    """A call FastMCP refuses; `str(exc)` is its message (what the wire carries)."""


def check_arguments(tool: Tool, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Lax `validate_call`: declared parameters in order, then unexpected keywords."""
    errors: list[tuple[str, str, str, Any]] = []
    values: dict[str, Any] = {}
    for param in tool.params:
        if param.name not in arguments:
            errors.append((param.name, "missing_argument", "Missing required argument",
                           dict(arguments)))
            continue
        value = arguments[param.name]
        if param.type == "string":
            if isinstance(value, str):
                values[param.name] = value
            else:
                errors.append((param.name, "string_type", "Input should be a valid string",
                               value))
            continue
        found: list[ErrorItem] = []
        number = lax_int(value, (param.name,), found)
        if found:
            errors.append((param.name, found[0]["type"], found[0]["msg"], value))
        else:
            values[param.name] = number
    names = {param.name for param in tool.params}
    for key, value in arguments.items():
        if key not in names:
            errors.append((key, "unexpected_keyword_argument", "Unexpected keyword argument",
                           value))
    if errors:
        raise ToolCallError(pydantic_text(f"call[{tool.name}]", errors))
    return values


def result_payload(value: str | int) -> JsonObject:
    """FastMCP's `CallToolResult` for a wrapped primitive, as OpenEnv serialises it."""
    return {
        "content": [{"type": "text", "text": str(value), "annotations": None, "meta": None}],
        "structured_content": {"result": value},
        "meta": {"fastmcp": {"wrap_result": True}},
        "data": value,
        "is_error": False,
    }


def error_type(message: str) -> str:
    """OpenEnv's `MCPEnvironment` classification of a failed call, by keywords."""
    lowered = message.lower()
    if "not found" in lowered or "unknown tool" in lowered:
        return "tool_not_found"
    if "invalid" in lowered or "argument" in lowered:
        return "invalid_args"
    return "execution_error"


def tool_schema_document() -> Mapping[str, Any]:
    """OpenEnv's `CallToolAction` and `CallToolObservation` schemas (captured data)."""
    raw = importlib.resources.files("oracle").joinpath("data/tool_schema.json").read_bytes()
    document: Mapping[str, Any] = json.loads(raw)
    return document


class ToolEnvironment(Environment):
    """An environment whose actions are MCP tool calls.

    Subclasses declare `tools` and implement `_invoke` (the tool bodies, given validated
    arguments) and `_reset`. Listing and calling are the same on every surface; only the
    `step` path counts steps.
    """

    tools: ClassVar[tuple[Tool, ...]]
    fixed_schemas = tool_schema_document()
    action_title = "CallToolAction"
    observation_title = "CallToolObservation"
    action_fields = ()
    observation_fields = ()

    @classmethod
    def tool(cls, name: str) -> Tool:
        for tool in cls.tools:
            if tool.name == name:
                return tool
        raise ToolCallError(f"Unknown tool: {name!r}")

    def call(self, name: str, arguments: Mapping[str, Any]) -> str | int:
        """Validate and run one call; `ToolCallError` carries FastMCP's message."""
        tool = self.tool(name)
        return self._invoke(name, check_arguments(tool, arguments))

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if action.get("type") == "list_tools":
            return Outcome({"tools": [tool.step_listing() for tool in self.tools]}, None, False)
        name = action.get("tool_name")
        if not isinstance(name, str):
            raise ExecutionError("tool_name must be a string")
        arguments = action.get("arguments", {})
        try:
            value = self.call(name, arguments)
        except ToolCallError as exc:
            message = str(exc)
            return Outcome({"tool_name": name, "result": None,
                            "error": {"error_type": error_type(message), "message": message}},
                           None, False)
        return Outcome({"tool_name": name, "result": result_payload(value), "error": None},
                       None, False)

    @abc.abstractmethod
    def _invoke(self, name: str, arguments: Mapping[str, Any]) -> str | int: ...
