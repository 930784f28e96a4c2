"""Persisted failure semantics: the ``kiln.openenv-run-failure.v1`` a failed run keeps (§10).

The stage comes from where the run was when it failed (:func:`stage_for_state`, the §10.2
state table; the executor passes the stage of the phase it is in, which is the same
mapping). The code comes from the error itself, first match wins (§10.2):

====================================================  =================================
error                                                 code (retryable)
====================================================  =================================
no free session slot within the capacity wait         ``environment_capacity_exhausted``
                                                      (yes)
identity changed at revalidation                      ``environment_identity_changed``
                                                      (yes)
protocol error frame ``CAPACITY_REACHED``             ``environment_capacity_exhausted``
                                                      (yes, ``protocol_code``)
any other protocol error frame                        ``environment_protocol_error``
                                                      (no, ``protocol_code``)
HTTP status (discovery, or the WebSocket upgrade)     ``environment_unavailable``, yes iff
                                                      408/425/429/500/502/503/504,
                                                      ``http_status``
transport, timeout, closed or poisoned session        ``environment_unavailable`` (yes)
bad URL, credential configuration, task selector,     ``persisted_contract_invalid`` (no)
policy configuration, a retained request the current
server policy no longer admits
oversized body or frame, reflected credential,        ``environment_protocol_error`` (no)
malformed/binary/unexpected/invalid messages
anything else                                         the stage's fallback (§10.2 table)
====================================================  =================================

``protocol_code`` and ``http_status`` are set only when the environment actually sent
them. Messages are bounded to ``MAX_FAILURE_MESSAGE_BYTES`` (cut at a character boundary,
ending in ``...``); they carry the error's code and rule, never a token.
"""

from __future__ import annotations

from typing import Final

from kiln_verify.control.status import FailureCode, FailureStage, RunFailure, RunState
from kiln_verify.errors import (
    ActionSchemaInvalid,
    ApiAdapterUnknown,
    ApiCredentialInvalid,
    ApiRemoteForbidden,
    ApiRequestInvalid,
    ApiUrlInvalid,
    CapacityExhausted,
    CredentialInsecure,
    CredentialInvalid,
    CredentialReflected,
    DiscoveryInvalid,
    EnvironmentHttpStatus,
    EnvironmentIdentityChanged,
    EnvironmentRedirect,
    EnvironmentTimeout,
    EnvironmentTransport,
    EnvironmentUrlInvalid,
    KilnError,
    LimitExceeded,
    PolicyAdapterInvalid,
    PolicyConfigInvalid,
    PolicyScriptInvalid,
    PolicyUnavailable,
    ProtocolViolation,
    RecoverableProtocolError,
    SessionClosed,
    SessionPoisoned,
    TaskApiInvalid,
    TerminalProtocolError,
    UnexpectedResponse,
)
from kiln_verify.limits import MAX_FAILURE_MESSAGE_BYTES

__all__ = [
    "FALLBACK",
    "RETRYABLE_HTTP_STATUSES",
    "bounded_message",
    "classify",
    "explicit",
    "stage_for_state",
]

RETRYABLE_HTTP_STATUSES: Final = frozenset({408, 425, 429, 500, 502, 503, 504})

FALLBACK: Final[dict[FailureStage, tuple[FailureCode, bool, str]]] = {
    "restoration": (
        "run_interrupted",
        True,
        "submit a new run: an environment session cannot be resumed after a restart",
    ),
    "admission": (
        "run_admission_failed",
        True,
        "check the server's capacity and state directory, then submit a new run",
    ),
    "discovery": (
        "environment_unavailable",
        True,
        "check that the environment serves discovery, then submit a new run",
    ),
    "collection": (
        "collection_failed",
        True,
        "check the environment and the policy, then submit a new run (episodes never resume)",
    ),
    "identity_verification": (
        "environment_unavailable",
        True,
        "keep the environment's discovery endpoint up and stable, then submit a new run",
    ),
    "artifact_publication": (
        "artifact_publication_failed",
        False,
        "check the state directory's free space and permissions; nothing was published",
    ),
    "training_submission": (
        "training_submission_failed",
        True,
        "check the trainer's admission and capacity, then submit a new run",
    ),
    "training": ("training_failed", False, "inspect the trainer's status and evidence"),
    "post_evaluation": ("post_evaluation_failed", False, "inspect the linked evaluation"),
    "environment_evaluation": (
        "environment_evaluation_failed",
        True,
        "inspect the paired evaluation and the environment, then submit a new run",
    ),
    "orchestration": ("internal_error", False, "see the server log and the run's status"),
}
"""The §10.2 stage fallback: code, retryable and our hint, when no error rule matches."""

_STATE_STAGE: Final[dict[str, FailureStage]] = {
    "queued": "admission",
    "discovering": "discovery",
    "collecting": "collection",
    "revalidating": "identity_verification",
    "submitting": "training_submission",
    "training_queued": "training",
    "training_running": "training",
    "post_evaluating": "post_evaluation",
    "environment_evaluating": "environment_evaluation",
}

_CONTRACT: Final = (
    ApiAdapterUnknown,
    ApiCredentialInvalid,
    ApiRemoteForbidden,
    ApiRequestInvalid,
    ApiUrlInvalid,
    EnvironmentUrlInvalid,
    CredentialInvalid,
    CredentialInsecure,
    TaskApiInvalid,
    PolicyConfigInvalid,
    PolicyUnavailable,
    PolicyScriptInvalid,
    PolicyAdapterInvalid,
)
_UNAVAILABLE: Final = (EnvironmentTransport, EnvironmentTimeout, SessionClosed, SessionPoisoned)
_PROTOCOL: Final = (
    CredentialReflected,
    ProtocolViolation,
    UnexpectedResponse,
    DiscoveryInvalid,
    ActionSchemaInvalid,
)
_PEER_SIZE_LIMITS: Final = frozenset({"MAX_DISCOVERY_BODY_BYTES", "MAX_SERVER_FRAME_BYTES"})

_HINTS: Final[dict[FailureCode, str]] = {
    "environment_capacity_exhausted": (
        "wait until the environment has free sessions or raise capacity_wait_seconds, then "
        "submit a new run"
    ),
    "environment_identity_changed": (
        "pin the environment deployment so discovery stays identical, inspect it again and "
        "submit a new run; mixed-identity episodes are never published"
    ),
    "environment_protocol_error": (
        "the environment broke or terminally refused the OpenEnv protocol; inspect it and its "
        "advertised schemas before submitting a new run"
    ),
    "environment_unavailable": (
        "check that the environment is running and reachable from the server, then submit a new run"
    ),
    "persisted_contract_invalid": (
        "correct the request or the server configuration (URL, credential handle, policy) "
        "before submitting a new run"
    ),
}


def stage_for_state(state: RunState, collection_complete: bool = False) -> FailureStage:
    """The §10.2 stage of a failure in ``state`` (a finished collection is publication)."""
    if state == "collecting" and collection_complete:
        return "artifact_publication"
    return _STATE_STAGE.get(state, "orchestration")


def bounded_message(text: str) -> str:
    """``text`` cut to ``MAX_FAILURE_MESSAGE_BYTES`` UTF-8 bytes, ending in ``...`` if cut."""
    data = text.encode("utf-8", "replace")
    if len(data) <= MAX_FAILURE_MESSAGE_BYTES:
        return text.encode("utf-8", "replace").decode("utf-8")
    cut = data[: MAX_FAILURE_MESSAGE_BYTES - 3].decode("utf-8", "ignore")
    return cut + "..."


def explicit(
    code: FailureCode,
    stage: FailureStage,
    retryable: bool,
    message: str,
    hint: str,
    occurred_unix_ms: int,
    *,
    protocol_code: str | None = None,
    http_status: int | None = None,
) -> RunFailure:
    """A failure record with a bounded message."""
    return RunFailure.model_validate(
        {
            "code": code,
            "stage": stage,
            "retryable": retryable,
            "message": bounded_message(message),
            "hint": hint,
            "occurred_unix_ms": occurred_unix_ms,
            "protocol_code": protocol_code,
            "http_status": http_status,
        }
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KilnError):
        return f"{exc.code}: {exc.rule}"
    return f"{type(exc).__name__}: {exc}"


def _wire_code(exc: RecoverableProtocolError | TerminalProtocolError) -> str | None:
    error = getattr(exc, "error", None)
    value = getattr(getattr(error, "code", None), "value", None)
    return value if isinstance(value, str) else None


def classify(exc: BaseException, stage: FailureStage, occurred_unix_ms: int) -> RunFailure:
    """The failure record for ``exc`` raised while the run was in ``stage`` (§10.2)."""
    message = _describe(exc)

    def make(
        code: FailureCode,
        retryable: bool,
        *,
        protocol_code: str | None = None,
        http_status: int | None = None,
    ) -> RunFailure:
        hint = _HINTS.get(code) or FALLBACK[stage][2]
        return explicit(
            code,
            stage,
            retryable,
            message,
            hint,
            occurred_unix_ms,
            protocol_code=protocol_code,
            http_status=http_status,
        )

    if isinstance(exc, CapacityExhausted):
        return make("environment_capacity_exhausted", True)
    if isinstance(exc, EnvironmentIdentityChanged):
        return make("environment_identity_changed", True)
    if isinstance(exc, RecoverableProtocolError | TerminalProtocolError):
        wire = _wire_code(exc)
        if wire == "CAPACITY_REACHED":
            return make("environment_capacity_exhausted", True, protocol_code=wire)
        return make("environment_protocol_error", False, protocol_code=wire)
    if isinstance(exc, EnvironmentHttpStatus | EnvironmentRedirect):
        status = exc.http_status
        retryable = status in RETRYABLE_HTTP_STATUSES
        failure = make("environment_unavailable", retryable, http_status=status)
        if not retryable:
            hint = "check the environment URL, its credential and discovery, then submit a new run"
            return failure.model_copy(update={"hint": hint})
        return failure
    if isinstance(exc, _UNAVAILABLE):
        return make("environment_unavailable", True)
    if isinstance(exc, _CONTRACT):
        return make("persisted_contract_invalid", False)
    if isinstance(exc, _PROTOCOL) or (
        isinstance(exc, LimitExceeded) and exc.limit in _PEER_SIZE_LIMITS
    ):
        return make("environment_protocol_error", False)
    code, retryable, hint = FALLBACK[stage]
    return explicit(code, stage, retryable, message, hint, occurred_unix_ms)
