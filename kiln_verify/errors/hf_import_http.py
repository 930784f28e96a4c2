"""Errors of the PEFT import over HTTP: the route's answers and ``hf import-peft --url``'s.

The route's codes are Kiln's (``contracts/kiln-artifacts-v1.schema.json`` error envelope,
kiln-hf-trl-contract §4.9): ``hf_trl_import_invalid`` (400) for anything wrong with the
request or the envelope, ``hf_trl_import_identity_mismatch`` (409) for a result made from
another model, ``hf_trl_import_timeout`` (408) for a stalled body, ``hf_trl_import_failed``
(500) for the server's own failures, ``adapter_already_exists`` and ``adapter_loaded``
(409). The client's two codes separate an unknown outcome from a refusal: after the body
was sent, a dropped connection or a success answer that is not exactly the predicted one
may hide an installed adapter, so the operator must look before retrying.
"""

from __future__ import annotations

from typing import Any

from kiln_verify.errors.control import ControlApiError, ControlClientError

# --- the route's answers (docs/hf-http-import.md) --------------------------------------


class _CausedApiError(ControlApiError, abstract=True):
    """A refusal that carries the import step's own error code (``cause``)."""

    cause: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.cause is not None:
            out["cause"] = self.cause
        return out


class ApiHfImportInvalid(_CausedApiError):
    code = "hf_trl_import_invalid"
    default_hint = (
        "POST one gzip USTAR archive of exactly NAME.kiln-hf-import/ (the ten envelope files) "
        "with Content-Type: application/gzip; `kiln-verify hf import-peft --url` builds it"
    )


class ApiHfImportIdentityMismatch(_CausedApiError):
    code = "hf_trl_import_identity_mismatch"
    http_status = 409
    default_hint = "import a result trained from an export of this server's resident model"


class ApiHfImportTimeout(ControlApiError):
    code = "hf_trl_import_timeout"
    http_status = 408
    default_hint = "send the body without pauses longer than HTTP_IMPORT_BODY_IDLE_TIMEOUT_S"


class ApiHfImportFailed(_CausedApiError):
    code = "hf_trl_import_failed"
    http_status = 500
    default_hint = "see the server's log; check that its state directory is writable"


class ApiAdapterAlreadyExists(ControlApiError):
    code = "adapter_already_exists"
    http_status = 409
    default_hint = "an installed adapter is never replaced; import under another name"


class ApiAdapterLoaded(ControlApiError):
    code = "adapter_loaded"
    http_status = 409
    default_hint = (
        "the resident model still holds an adapter of this name (its directory was removed "
        "by hand); restart the server or choose another name"
    )


# --- the client (`kiln-verify hf import-peft --url`) --------------------------------------


class HfImportOutcomeUnknown(ControlClientError):
    code = "hf_import_outcome_unknown"
    default_hint = (
        "the adapter may already be installed: inspect GET /v1/adapters on the server before "
        "retrying under the same name"
    )


class HfImportAnswerInvalid(ControlClientError):
    code = "hf_import_answer_invalid"
    default_hint = (
        "the server's success answer is not the receipt this bundle predicts; the adapter may "
        "already be installed: inspect GET /v1/adapters and `kiln-verify hf verify-import` it"
    )
