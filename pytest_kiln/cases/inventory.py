"""The case inventory: every conformance case with its stable id, level and clause.

Ids are stable and never reused for another requirement; new cases get new ids. The order
here is the order of the suite (discovery, sessions, errors, capacity, determinism, MCP).
"""

from __future__ import annotations

from pytest_kiln.cases import mcp_checks as mcp
from pytest_kiln.cases.capacity_checks import check_capacity, check_slot_release
from pytest_kiln.cases.case import Case
from pytest_kiln.cases.determinism import check_determinism, check_fresh_session_determinism
from pytest_kiln.cases.discovery import (
    check_action_schema,
    check_health,
    check_identity,
    check_list_environments,
    check_metadata,
    check_openapi,
    check_schema_shape,
)
from pytest_kiln.cases.error_checks import (
    check_binary_frame,
    check_envelope_extra_key,
    check_error_frame_shape,
    check_invalid_json,
    check_missing_type,
    check_session_error,
    check_step_without_data,
    check_unknown_type,
    check_validation_error,
)
from pytest_kiln.cases.model import PROTOCOL_DOC, Level
from pytest_kiln.cases.protocol_checks import (
    check_episode_id_echo,
    check_pipelining,
    check_reset_again,
    check_schema_state,
    check_state_shape,
    check_step_before_reset,
)
from pytest_kiln.cases.session_checks import (
    check_close,
    check_ping,
    check_post_done,
    check_reset,
    check_reward,
    check_state,
    check_step,
)
from pytest_kiln.cases.tasks import check_task_api

MUST, SHOULD, MAY = Level.MUST, Level.SHOULD, Level.MAY


def _clause(section: str) -> str:
    return f"{PROTOCOL_DOC} §{section}"


CASES: tuple[Case, ...] = (
    Case("health.status-200", MUST, _clause("1"),
         "GET /health answers 200.", check_health),
    Case("discovery.metadata-shape", MUST, _clause("3"),
         "GET /metadata answers a JSON object with string name and description.",
         check_metadata),
    Case("discovery.schema-shape", MUST, _clause("3"),
         "GET /schema answers an object with action, observation and state.",
         check_schema_shape),
    Case("discovery.schema-state", SHOULD, _clause("3"),
         "/schema.state describes episode_id and step_count (OpenEnv's base State).",
         check_schema_state),
    Case("discovery.list-environments", SHOULD, _clause("3"),
         "GET /list_environments answers a non-empty array of names.",
         check_list_environments),
    Case("discovery.openapi", SHOULD, _clause("1"),
         "GET /openapi.json answers an OpenAPI document with info.version.", check_openapi),
    Case("discovery.identity", SHOULD, _clause("8"),
         "Kiln's inspection (health, four documents, identity digests) succeeds.",
         check_identity),
    Case("schema.action-valid-json-schema", MUST, _clause("3"),
         "The action schema is a valid JSON Schema with no remote references.",
         check_action_schema),
    Case("ws.reset-observation", MUST, _clause("2.3"),
         "reset is answered by exactly one well-formed observation frame.", check_reset),
    Case("ws.step-observation", MUST, _clause("2.3"),
         "step with a schema-valid action is answered by one observation text frame.",
         check_step),
    Case("ws.state", MUST, _clause("2.2"),
         "state is answered by one state frame.", check_state),
    Case("ws.state-shape", SHOULD, _clause("2.3"),
         "The state carries episode_id (a string or null) and a non-negative integer "
         "step_count.", check_state_shape),
    Case("ws.close-no-reply", MUST, _clause("2.1"),
         "close has no reply frame; the server closes the connection.", check_close),
    Case("ws.ping", MUST, _clause("2.5"),
         "A client ping is answered with a pong.", check_ping),
    Case("ws.pipelining", MUST, _clause("2.1"),
         "Requests sent back to back are answered in order, one frame each.", check_pipelining),
    Case("ws.reset-again", SHOULD, _clause("2.1"),
         "A second reset on the same socket after a step starts a new episode.",
         check_reset_again),
    Case("ws.step-before-reset", MAY, _clause("2.1"),
         "A step before any reset is answered (an observation or a recoverable error).",
         check_step_before_reset),
    Case("ws.episode-id-echo", MAY, _clause("6"),
         "A reset that names an episode_id is reflected in State.episode_id.",
         check_episode_id_echo),
    Case("error.invalid-json", MUST, _clause("2.4"),
         "A frame that is not JSON gets INVALID_JSON and the session stays open.",
         check_invalid_json),
    Case("error.frame-shape", MUST, _clause("2.4"),
         "An error frame is {type: error, data: {message, code}} with string message and code.",
         check_error_frame_shape),
    Case("error.unknown-type", MUST, _clause("2.4"),
         "An unknown message type gets UNKNOWN_TYPE and the session stays open.",
         check_unknown_type),
    Case("error.missing-type", MUST, _clause("2.4"),
         "A frame without a type gets UNKNOWN_TYPE and the session stays open.",
         check_missing_type),
    Case("error.validation-error", MUST, _clause("2.4"),
         "A schema-violating action gets VALIDATION_ERROR and the session stays open.",
         check_validation_error),
    Case("error.step-without-data", MUST, _clause("2.4"),
         "A step without data gets VALIDATION_ERROR and the session stays open.",
         check_step_without_data),
    Case("error.envelope-extra-key", SHOULD, _clause("2.2"),
         "A state message with a data member gets VALIDATION_ERROR and the session stays open.",
         check_envelope_extra_key),
    Case("error.session-error-non-object", MUST, _clause("2.4"),
         "A JSON frame that is not an object gets SESSION_ERROR, then the server closes.",
         check_session_error),
    Case("error.binary-frame", MUST, _clause("2.4"),
         "A binary frame gets SESSION_ERROR, then the server closes.", check_binary_frame),
    Case("capacity.capacity-reached", MUST, _clause("2.4"),
         "Beyond max sessions the server sends CAPACITY_REACHED with active and max counts.",
         check_capacity),
    Case("capacity.slot-release", SHOULD, _clause("2.5"),
         "At capacity, a closed session's slot admits a new session within 1 s.",
         check_slot_release),
    Case("reward.typed", MUST, _clause("5"),
         "Rewards are null, a boolean or a finite number.", check_reward),
    Case("determinism.reset-same-seed", SHOULD, _clause("6"),
         "Two resets with the same seed give the same observation.", check_determinism),
    Case("determinism.fresh-session-same-seed", SHOULD, _clause("6"),
         "Fresh sessions reset with the same seed give the same observation and the same "
         "state (episode_id compared by presence and type unless the reset set it).",
         check_fresh_session_determinism),
    Case("post-done.frozen", SHOULD, _clause("5"),
         "A step after done=true keeps done=true or is refused with a recoverable error.",
         check_post_done),
    Case("task-api.catalog-or-501", MUST, _clause("4"),
         "The Task API answers a valid catalog or 501 (unsupported); 404 on "
         "/list_environments means a server that predates it (unsupported).", check_task_api),
    Case("mcp.http-response-shape", MUST, _clause("2.6"),
         "POST /mcp {} answers HTTP 200 with a JSON-RPC 2.0 error -32600.",
         mcp.check_http_response_shape),
    Case("mcp.parse-error", MUST, _clause("2.6"),
         "POST /mcp with a body that is not JSON answers a JSON-RPC error -32700.",
         mcp.check_parse_error),
    Case("mcp.method-not-found", MUST, _clause("2.6"),
         "An unknown JSON-RPC method answers error -32601 with the request's id.",
         mcp.check_method_not_found),
    Case("mcp.ws-message", MUST, _clause("2.2"),
         "An mcp message on /ws is answered by one mcp frame holding a JSON-RPC response.",
         mcp.check_ws_message),
    Case("mcp.ws-message-invalid", MUST, _clause("2.2"),
         "A malformed JSON-RPC request in an mcp message gets an mcp frame with error -32600; "
         "the session stays open.", mcp.check_ws_message_invalid),
    Case("mcp.tools-list", MUST, _clause("2.6"),
         "Where MCP is advertised, tools/list answers named tools with input schemas.",
         mcp.check_tools_list),
    Case("mcp.tools-call", MUST, _clause("2.6"),
         "Where MCP is advertised, tools/call of a listed tool with schema-valid arguments "
         "answers a result that is not an error.", mcp.check_tools_call),
    Case("mcp.tools-call-without-name", MUST, _clause("2.6"),
         "Where MCP is advertised, tools/call without a name answers error -32602.",
         mcp.check_tools_call_without_name),
    Case("mcp.tools-call-unknown", SHOULD, _clause("2.6"),
         "Where MCP is advertised, calling a tool that does not exist answers an error.",
         mcp.check_unknown_tool),
    Case("mcp.ws-route", MUST, _clause("2.6"),
         "Where MCP is advertised, WS /mcp answers tools/list with the same tools.",
         mcp.check_ws_route),
    Case("mcp.step-list-tools", MUST, _clause("2.2"),
         "With tool actions, step {type: list_tools} answers an observation listing the tools.",
         mcp.check_step_list_tools),
    Case("mcp.step-call-tool", MUST, _clause("2.2"),
         "With tool actions, step call_tool of a listed tool answers its observation without "
         "an error.", mcp.check_step_call_tool),
    Case("mcp.session-lifecycle", SHOULD, _clause("2.6"),
         "openenv/session/create returns a session_id that openenv/session/close closes once.",
         mcp.check_session_lifecycle),
)

CASES_BY_ID: dict[str, Case] = {case.id: case for case in CASES}
