"""The case inventory: every conformance case with its stable id, level and clause."""

from __future__ import annotations

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
    check_capacity,
    check_invalid_json,
    check_session_error,
    check_unknown_type,
    check_validation_error,
)
from pytest_kiln.cases.model import PROTOCOL_DOC, Case, Level
from pytest_kiln.cases.session_checks import (
    check_close,
    check_determinism,
    check_ping,
    check_post_done,
    check_reset,
    check_reward,
    check_state,
    check_step,
)
from pytest_kiln.cases.tasks import check_task_api


def _clause(section: str) -> str:
    return f"{PROTOCOL_DOC} §{section}"


CASES: tuple[Case, ...] = (
    Case("health.status-200", Level.MUST, _clause("1"), "GET /health answers 200.", check_health),
    Case(
        "discovery.metadata-shape",
        Level.MUST,
        _clause("3"),
        "GET /metadata answers a JSON object with string name and description.",
        check_metadata,
    ),
    Case(
        "discovery.schema-shape",
        Level.MUST,
        _clause("3"),
        "GET /schema answers an object with action, observation and state.",
        check_schema_shape,
    ),
    Case(
        "discovery.list-environments",
        Level.SHOULD,
        _clause("3"),
        "GET /list_environments answers a non-empty array of names.",
        check_list_environments,
    ),
    Case(
        "discovery.openapi",
        Level.SHOULD,
        _clause("1"),
        "GET /openapi.json answers an OpenAPI document with info.version.",
        check_openapi,
    ),
    Case(
        "discovery.identity",
        Level.SHOULD,
        "kiln-openenv-contract.md §8",
        "Kiln's inspection (health, four documents, identity digests) succeeds.",
        check_identity,
    ),
    Case(
        "schema.action-valid-json-schema",
        Level.MUST,
        _clause("3"),
        "The action schema is a valid JSON Schema with no remote references.",
        check_action_schema,
    ),
    Case(
        "ws.reset-observation",
        Level.MUST,
        _clause("2.3"),
        "reset is answered by exactly one well-formed observation frame.",
        check_reset,
    ),
    Case(
        "ws.step-observation",
        Level.MUST,
        _clause("2.3"),
        "step with a schema-valid action is answered by one observation text frame.",
        check_step,
    ),
    Case(
        "ws.state", Level.MUST, _clause("2.2"), "state is answered by one state frame.", check_state
    ),
    Case(
        "ws.close-no-reply",
        Level.MUST,
        _clause("2.1"),
        "close has no reply frame; the server closes the connection.",
        check_close,
    ),
    Case(
        "ws.ping", Level.MUST, _clause("2.5"), "A client ping is answered with a pong.", check_ping
    ),
    Case(
        "error.invalid-json",
        Level.MUST,
        _clause("2.4"),
        "A frame that is not JSON gets INVALID_JSON and the session stays open.",
        check_invalid_json,
    ),
    Case(
        "error.unknown-type",
        Level.MUST,
        _clause("2.4"),
        "An unknown message type gets UNKNOWN_TYPE and the session stays open.",
        check_unknown_type,
    ),
    Case(
        "error.validation-error",
        Level.MUST,
        _clause("2.4"),
        "A schema-violating action gets VALIDATION_ERROR and the session stays open.",
        check_validation_error,
    ),
    Case(
        "error.session-error-non-object",
        Level.MUST,
        _clause("2.4"),
        "A JSON frame that is not an object gets SESSION_ERROR, then the server closes.",
        check_session_error,
    ),
    Case(
        "capacity.capacity-reached",
        Level.MUST,
        _clause("2.4"),
        "Beyond max sessions the server sends CAPACITY_REACHED with active and max counts.",
        check_capacity,
    ),
    Case(
        "reward.typed",
        Level.MUST,
        _clause("5"),
        "Rewards are null, a boolean or a finite number.",
        check_reward,
    ),
    Case(
        "determinism.reset-same-seed",
        Level.SHOULD,
        _clause("6"),
        "Two resets with the same seed give the same observation.",
        check_determinism,
    ),
    Case(
        "post-done.frozen",
        Level.SHOULD,
        _clause("5"),
        "A step after done=true keeps done=true or is refused with a recoverable error.",
        check_post_done,
    ),
    Case(
        "task-api.catalog-or-501",
        Level.MUST,
        _clause("4"),
        "The Task API answers a valid catalog or 501 (unsupported).",
        check_task_api,
    ),
)

CASES_BY_ID: dict[str, Case] = {case.id: case for case in CASES}
