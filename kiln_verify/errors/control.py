"""Errors of the control plane: the server's typed API answers and the control client's.

The server's codes (``openenv_*``) are the stable ``error.code`` of its JSON error bodies
(kiln-openenv-contract §12); each class carries the HTTP status it is answered with. The
client's codes (``control_*``, ``artifact_*``, ``run_*``) are what ``kiln-verify openenv
runs|start|status|cancel|artifact`` report when a server, a file or an answer breaks a rule.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kiln_verify.errors.base import KilnError

# --- the server's API answers (kiln-openenv-contract §12) -------------------------------


class ControlApiError(KilnError, abstract=True):
    """A request the control-plane server refuses; ``http_status`` is the answer's status."""

    http_status: ClassVar[int] = 400


class ApiRequestInvalid(ControlApiError):
    code = "openenv_invalid_request"
    default_hint = "send one JSON object with the documented fields (docs/control-plane.md)"


class ApiRequestTooLarge(ControlApiError):
    code = "openenv_request_too_large"
    http_status = 413
    default_hint = "control-plane request bodies are at most MAX_CONTROL_REQUEST_BYTES (1 MiB)"


class ApiUrlInvalid(ControlApiError):
    code = "openenv_invalid_url"
    default_hint = "use an absolute http(s) OpenEnv base URL without userinfo, query or fragment"


class ApiRemoteForbidden(ControlApiError):
    code = "openenv_remote_environment_forbidden"
    http_status = 403
    default_hint = (
        "use a loopback OpenEnv server, or set [openenv] allow_remote_environments = true in "
        "the server configuration"
    )


class ApiCredentialInvalid(ControlApiError):
    code = "openenv_invalid_credential"
    default_hint = (
        "configure [openenv.credentials.<id>] with the environment's exact origin and give "
        "one credential_ids entry (a handle or null) per environment URL"
    )


class ApiIdempotencyKeyInvalid(ControlApiError):
    code = "openenv_invalid_idempotency_key"
    default_hint = (
        "use 1..128 ASCII letters, digits, '.', '_', ':' or '-'; never put a secret in it, "
        "the key is stored in run.json and shown in status"
    )


class ApiIdempotencyConflict(ControlApiError):
    code = "openenv_run_idempotency_conflict"
    http_status = 409
    default_hint = "reuse a key only for the identical request; choose a new key for different work"


class ApiAdapterUnknown(ControlApiError):
    code = "openenv_adapter_unknown"
    default_hint = "use adapter 'base' or one configured in a [policies.<adapter>] table"


class ApiRunKindUnsupported(ControlApiError):
    code = "openenv_run_kind_unsupported"
    http_status = 501
    default_hint = (
        "this server runs kind=rollout only; submit the training hand-off to a Kiln server"
    )


class ApiCapacityFull(ControlApiError):
    code = "openenv_run_capacity_full"
    http_status = 503
    default_hint = "cancel an unneeded queued run or wait for retained history to expire"


class ApiRunCreateFailed(ControlApiError):
    code = "openenv_run_create_failed"
    http_status = 500
    default_hint = "check that the server's state directory is writable and has free space"


class ApiDisabled(ControlApiError):
    code = "openenv_disabled"
    http_status = 404
    default_hint = "set [openenv] enabled = true in the server configuration and restart it"


class ApiRunNotFound(ControlApiError):
    code = "openenv_run_not_found"
    http_status = 404
    default_hint = "list retained runs with GET /v1/openenv/runs (kiln-verify openenv runs)"


class ApiRunNotCancellable(ControlApiError):
    code = "openenv_run_not_cancellable"
    http_status = 409
    default_hint = "only queued or running runs can be cancelled"


class ApiRunNotResumable(ControlApiError):
    """kiln-verify's own resume route (Kiln has none): the run is not an interrupted
    rollout run whose journal is still there."""

    code = "openenv_run_not_resumable"
    http_status = 409
    default_hint = (
        "only a rollout run failed with run_interrupted can be resumed, once; "
        "submit a new run instead"
    )


class ApiArtifactNotFound(ControlApiError):
    code = "openenv_artifact_not_found"
    http_status = 404
    default_hint = (
        "request only a kind listed in the run's artifacts; none exist before publication"
    )


class ApiArtifactIntegrityFailed(ControlApiError):
    code = "openenv_artifact_integrity_failed"
    http_status = 409
    default_hint = (
        "restore the original bundle files or collect again; never edit retained artifacts"
    )


class ApiTaskSelectionInvalid(ControlApiError):
    code = "openenv_invalid_task_selection"
    default_hint = "name one advertised environment and split, and ask for a bounded page"


class ApiInspectionFailed(ControlApiError):
    code = "openenv_inspection_failed"
    http_status = 502
    default_hint = "check that the environment is running, reachable and serves discovery"


class ApiTaskCatalogFailed(ControlApiError):
    code = "openenv_task_catalog_failed"
    http_status = 502
    default_hint = "check the environment's Task API (a server without one answers 501)"


class ApiRouteNotFound(ControlApiError):
    code = "openenv_route_not_found"
    http_status = 404
    default_hint = "see docs/control-plane.md for the routes"


class ApiMethodNotAllowed(ControlApiError):
    code = "openenv_method_not_allowed"
    http_status = 405
    default_hint = "see docs/control-plane.md for each route's methods"


class ApiInternalError(ControlApiError):
    code = "openenv_internal_error"
    http_status = 500
    default_hint = "see the server's log output"


# --- training admission (kiln-openenv-contract §5.8, §12; docs/training-admission.md) ---


class ApiTrainingRequestInvalid(ControlApiError):
    code = "openenv_training_request_invalid"
    default_hint = (
        "a kind=train request names output_adapter, a behaviour adapter that differs from it "
        "and only the documented training fields (docs/training-admission.md)"
    )


class ApiTrainingConfigUnsupported(ControlApiError):
    code = "openenv_training_config_unsupported"
    default_hint = (
        "leave the named GrpoConfig field at Kiln's default or use a value this trainer "
        "honours (docs/training-admission.md, the effective-configuration table)"
    )


class ApiEnvironmentEvalInvalid(ControlApiError):
    code = "openenv_environment_eval_invalid"
    default_hint = (
        "keep the evaluation seeds [seed_start, seed_start+groups) outside the training seeds "
        "and give a gate at least 20 groups"
    )


class ApiPostEvalUnsupported(ControlApiError):
    code = "openenv_post_eval_unsupported"
    http_status = 501
    default_hint = (
        "drop post_eval: this server has no static evaluation suites; use environment_eval "
        "for a paired held-out evaluation on the same environments"
    )


# --- the resident model and its adapters (docs/resident-model.md) ---------------------


class ApiModelNotLoaded(ControlApiError):
    """No resident model: a train request or an adapter route needs one."""

    code = "model_not_loaded"
    http_status = 409
    default_hint = (
        "start the server with `kiln-verify serve --model DIR` (or a [model] table with "
        "path = DIR in its configuration file)"
    )


class ApiAdapterNameInvalid(ControlApiError):
    code = "adapter_name_invalid"
    default_hint = (
        "an adapter name is 1..128 ASCII characters: a letter or digit, then letters, digits, "
        "'.', '_' or '-', with no '..'; 'base' names the resident model itself"
    )


class ApiAdapterExists(ControlApiError):
    code = "adapter_exists"
    http_status = 409
    default_hint = "an installed adapter is never replaced; choose another name"


class ApiAdapterRegistryFull(ControlApiError):
    code = "adapter_registry_full"
    http_status = 409
    default_hint = "the server holds MAX_SERVER_ADAPTERS adapters; remove one by hand first"


class ApiAdapterImportFailed(ControlApiError):
    """The verified import refused the adapter; ``cause`` is the import's own error code."""

    code = "adapter_import_failed"
    http_status = 422
    default_hint = "the adapter must pass `kiln-verify hf import-peft`'s checks; nothing was kept"
    cause: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.cause is not None:
            out["cause"] = self.cause
        return out


# --- the HF/TRL export registry (docs/hf-http-export.md; hf-trl-contract §4.9) ----------


class ApiHfTrlInvalidRequest(ControlApiError):
    """An export request refused at admission: nothing was published."""

    code = "hf_trl_invalid_request"
    default_hint = (
        "send exactly one data source, a valid export name and policy, an object "
        "split_manifest and data the resident model accepts (docs/hf-http-export.md)"
    )


class ApiHfTrlExportExists(ControlApiError):
    code = "hf_trl_export_exists"
    http_status = 409
    default_hint = "an export name is never reused while it exists; delete it or choose another"


class ApiHfTrlExportNotFound(ControlApiError):
    code = "hf_trl_export_not_found"
    http_status = 404
    default_hint = "list the retained exports with GET /v1/train/hf/exports"


class ApiHfTrlExportCapacity(ControlApiError):
    code = "hf_trl_export_capacity"
    http_status = 503
    default_hint = "the registry holds MAX_HF_EXPORTS (256) exports; delete one first"


class ApiHfTrlExportFailed(ControlApiError):
    """The registry, its lock or a verification after admission failed (a server error)."""

    code = "hf_trl_export_failed"
    http_status = 500
    default_hint = "see the server log; a damaged export is removed by an unconditioned DELETE"


class ApiHfTrlExportPrecondition(ControlApiError):
    """``If-Match`` names another identity than the export under that name."""

    code = "hf_trl_export_precondition_failed"
    http_status = 412
    default_hint = 'send If-Match: "sha256:<64 hex>" of the export you mean (create or list)'


class ApiAdapterNotFound(ControlApiError):
    code = "adapter_not_found"
    http_status = 404
    default_hint = "name an adapter GET /v1/adapters lists"


# --- the control client ---------------------------------------------------------------


class ControlClientError(KilnError, abstract=True):
    """Talking to a control-plane server failed, or its answer broke the contract."""


class ControlUrlInvalid(ControlClientError):
    code = "control_url_invalid"
    exit_code = 2
    default_hint = "give --url as http(s)://host:port without userinfo, query or fragment"


class ControlTransport(ControlClientError):
    code = "control_transport"
    default_hint = "check that `kiln-verify serve` (or Kiln) is running at --url"


class ControlRedirect(ControlClientError):
    code = "control_redirect"
    default_hint = "use the server's final URL; the control client never follows redirects"


class ControlHttpStatus(ControlClientError):
    """The server answered with an error; ``server_code`` is its ``error.code`` if any."""

    code = "control_http_status"
    default_hint = "see the server's error code and hint above"
    http_status: int | None = None
    server_code: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.http_status is not None:
            out["http_status"] = self.http_status
        if self.server_code is not None:
            out["server_code"] = self.server_code
        return out


class ControlResponseInvalid(ControlClientError):
    code = "control_response_invalid"
    default_hint = (
        "the server does not implement the control-plane contract (docs/control-plane.md)"
    )


class RunRequestFileInvalid(ControlClientError):
    code = "run_request_file_invalid"
    exit_code = 2
    default_hint = "give --request a regular (non-symlink) file holding one JSON object <= 1 MiB"


class IdempotencyKeyDisagrees(ControlClientError):
    code = "idempotency_key_disagrees"
    exit_code = 2
    default_hint = "drop --idempotency-key or make it equal to the file's idempotency_key"


class ArtifactManifestInvalid(ControlClientError):
    code = "artifact_manifest_invalid"
    default_hint = "download only a kind the run's status lists, from its own relative URL"


class ArtifactHeadersInvalid(ControlClientError):
    code = "artifact_headers_invalid"
    default_hint = (
        "the server must send Content-Length and a strong ETag equal to the manifest, "
        "Cache-Control: private, no-store and X-Content-Type-Options: nosniff"
    )


class ArtifactBodyInvalid(ControlClientError):
    code = "artifact_body_invalid"
    default_hint = "the bytes served differ from the run's manifest; nothing was written"


class RunEndedUnsuccessfully(ControlClientError):
    """``--follow`` saw the run end ``failed`` or ``cancelled``; ``failure`` is its record."""

    code = "run_unsuccessful"
    default_hint = "see the failure's code, stage and hint; retryable means: submit a new run"
    failure: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.failure is not None:
            out["failure"] = self.failure
        return out
