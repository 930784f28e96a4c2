"""The §10.2 classification table, rule by rule (the live provocations are elsewhere)."""

from __future__ import annotations

from typing import Any

import pytest

from kiln_verify.control.failures import (
    FALLBACK,
    RETRYABLE_HTTP_STATUSES,
    classify,
    stage_for_state,
)
from kiln_verify.control.status import FAILURE_STAGES, RUN_STATES
from kiln_verify.errors import (
    ApiCredentialInvalid,
    CapacityExhausted,
    CredentialInvalid,
    CredentialReflected,
    DiscoveryInvalid,
    EnvironmentHttpStatus,
    EnvironmentIdentityChanged,
    EnvironmentRedirect,
    EnvironmentTimeout,
    EnvironmentTransport,
    KilnError,
    LimitExceeded,
    PolicyConfigInvalid,
    PolicyTransport,
    ProtocolViolation,
    PublishFailed,
    RecoverableProtocolError,
    ResetNondeterministic,
    SessionPoisoned,
    TerminalProtocolError,
    UnexpectedResponse,
)
from kiln_verify.openenv.protocol.wire import ErrorCode, ProtocolError


def _wire(cls: type[KilnError], code: ErrorCode) -> KilnError:
    error = cls(f"the environment answered {code.value}")
    error.error = ProtocolError(code=code, message="m")  # type: ignore[attr-defined]
    return error


def _status(cls: type[KilnError], status: int) -> KilnError:
    error = cls(f"answered HTTP {status}")
    error.http_status = status  # type: ignore[attr-defined]
    return error


CASES: list[tuple[KilnError, str, bool, dict[str, Any]]] = [
    (CapacityExhausted("no slot"), "environment_capacity_exhausted", True, {}),
    (EnvironmentIdentityChanged("drift"), "environment_identity_changed", True, {}),
    (
        _wire(TerminalProtocolError, ErrorCode.CAPACITY_REACHED),
        "environment_capacity_exhausted",
        True,
        {"protocol_code": "CAPACITY_REACHED"},
    ),
    (
        _wire(TerminalProtocolError, ErrorCode.SESSION_ERROR),
        "environment_protocol_error",
        False,
        {"protocol_code": "SESSION_ERROR"},
    ),
    (
        _wire(RecoverableProtocolError, ErrorCode.VALIDATION_ERROR),
        "environment_protocol_error",
        False,
        {"protocol_code": "VALIDATION_ERROR"},
    ),
    (TerminalProtocolError("no frame"), "environment_protocol_error", False, {}),
    (_status(EnvironmentHttpStatus, 401), "environment_unavailable", False, {"http_status": 401}),
    (_status(EnvironmentHttpStatus, 404), "environment_unavailable", False, {"http_status": 404}),
    (_status(EnvironmentRedirect, 302), "environment_unavailable", False, {"http_status": 302}),
    *[
        (_status(EnvironmentHttpStatus, s), "environment_unavailable", True, {"http_status": s})
        for s in sorted(RETRYABLE_HTTP_STATUSES)
    ],
    (EnvironmentTransport("refused"), "environment_unavailable", True, {}),
    (EnvironmentTimeout("slow"), "environment_unavailable", True, {}),
    (SessionPoisoned("earlier"), "environment_unavailable", True, {}),
    (CredentialInvalid("unset"), "persisted_contract_invalid", False, {}),
    (ApiCredentialInvalid("handle gone"), "persisted_contract_invalid", False, {}),
    (PolicyConfigInvalid("bad option"), "persisted_contract_invalid", False, {}),
    (CredentialReflected("echoed"), "environment_protocol_error", False, {}),
    (ProtocolViolation("binary"), "environment_protocol_error", False, {}),
    (UnexpectedResponse("state"), "environment_protocol_error", False, {}),
    (DiscoveryInvalid("bad json"), "environment_protocol_error", False, {}),
    (
        LimitExceeded("body", limit="MAX_DISCOVERY_BODY_BYTES", bound=1),
        "environment_protocol_error",
        False,
        {},
    ),
]


@pytest.mark.parametrize(
    ("error", "code", "retryable", "evidence"), CASES, ids=[f"{c[0].code}-{c[1]}" for c in CASES]
)
def test_error_rules(
    error: KilnError, code: str, retryable: bool, evidence: dict[str, Any]
) -> None:
    failure = classify(error, "collection", 7)
    assert (failure.code, failure.retryable, failure.stage) == (code, retryable, "collection")
    assert failure.protocol_code == evidence.get("protocol_code")
    assert failure.http_status == evidence.get("http_status")
    assert failure.message.startswith(f"{error.code}: ")
    assert failure.occurred_unix_ms == 7


@pytest.mark.parametrize("stage", FAILURE_STAGES)
def test_stage_fallback(stage: str) -> None:
    for error in (
        ResetNondeterministic("reset"),
        PolicyTransport("model down"),
        PublishFailed("disk"),
        RuntimeError("bug"),
    ):
        failure = classify(error, stage, 1)  # type: ignore[arg-type]
        assert (failure.code, failure.retryable) == FALLBACK[stage][:2]  # type: ignore[index]
    assert classify(RuntimeError("x"), "orchestration", 1).code == "internal_error"
    assert (
        classify(
            LimitExceeded("retained", limit="MAX_RETAINED_BYTES", bound=1), "collection", 1
        ).code
        == "collection_failed"
    )


def test_state_table() -> None:
    expected = {
        "queued": "admission",
        "discovering": "discovery",
        "collecting": "collection",
        "revalidating": "identity_verification",
        "submitting": "training_submission",
        "training_queued": "training",
        "training_running": "training",
        "post_evaluating": "post_evaluation",
        "environment_evaluating": "environment_evaluation",
        "rollout_ready": "orchestration",
        "completed": "orchestration",
        "failed": "orchestration",
        "cancelled": "orchestration",
    }
    assert {state: stage_for_state(state) for state in RUN_STATES} == expected  # type: ignore[arg-type]
    assert stage_for_state("collecting", collection_complete=True) == "artifact_publication"
    assert len(FALLBACK) == len(FAILURE_STAGES) == 11
