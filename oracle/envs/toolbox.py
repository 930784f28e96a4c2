"""The toolbox: an MCP tool environment, the shape of OpenEnv's own `echo_env`.

Three tools, so that listing, calling, argument validation and per-session state are all
visible: `echo_message` (a string in, the same string out), `add` (two integers, their
sum) and `remember` (stores a note in this session and answers how many it holds). The
notes live in the environment instance, so they show which session a call reached: a
WebSocket attached to an HTTP MCP session sees the notes that `POST /mcp` calls with that
`session_id` stored, and a call without a session (a throwaway environment) stores
nothing anyone can see. A reset clears them. There is no reward and no end: tools are
the whole interface, as in echo_env.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.base import JsonObject, Outcome, ResetRequest
from oracle.tools import Tool, ToolEnvironment, ToolParam

#: At most this many notes per session (a bound, like every other size here).
MAX_NOTES = 1024


class ToolboxEnvironment(ToolEnvironment):
    """Echo, add and remember, as MCP tools."""

    server_name = "toolbox"
    env_name = "toolbox_env"
    class_name = "ToolboxEnvironment"
    description = "MCP tools: echo_message, add and remember (notes kept per session)."
    readme = (
        "# toolbox\n\nAn MCP tool environment. List the tools with `tools/list` (or the step "
        '`{"type": "list_tools"}`) and call them with `tools/call` (or the step '
        '`{"type": "call_tool", "tool_name": ..., "arguments": {...}}`): `echo_message'
        '(message: str) -> str`, `add(a: int, b: int) -> int`, `remember(note: str) -> int` '
        "(the number of notes this session holds). A reset clears the notes.\n"
    )
    category = "tools"
    tools = (
        Tool("echo_message", "Echo back the provided message.",
             (ToolParam("message", "string"),), "string"),
        Tool("add", "Add two integers.", (ToolParam("a", "integer"), ToolParam("b", "integer")),
             "integer"),
        Tool("remember", "Store a note in this session and return how many notes it holds.",
             (ToolParam("note", "string"),), "integer"),
    )

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []

    def _reset(self, request: ResetRequest) -> Outcome:
        self.notes = []
        return Outcome({}, None, False)

    def _invoke(self, name: str, arguments: Mapping[str, Any]) -> str | int:
        if name == "echo_message":
            message: str = arguments["message"]
            return message
        if name == "add":
            total: int = arguments["a"] + arguments["b"]
            return total
        if len(self.notes) < MAX_NOTES:
            self.notes.append(arguments["note"])
        return len(self.notes)

    def _extra_state(self) -> JsonObject:
        return {"notes": list(self.notes)}
