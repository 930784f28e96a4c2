"""From a request body to an admissible, normalized run request (or a typed refusal).

Order matters and follows §12: the body is parsed and normalized first
(:func:`parse_run_request`), so an exact retry is recognised (and answered with the
original run) before anything about the current server policy is checked; then the
registry dispatches on the run kind (:mod:`kiln_verify.control.kind`), and for
``kind=rollout`` :func:`check_run_request` applies that policy: training-only fields, the
environment-origin rule, credential handles, the adapter's policy and every collection
bound of :class:`~kiln_verify.openenv.collect.CollectionControls`.

:func:`collection_controls` is the one mapping from a request to the collector's
controls. The controls admission computes are kept by the registry and handed to the
executor once; only a run restored from disk is admitted again by the executor (the
configuration may have changed across a restart), and a failure there is
``persisted_contract_invalid``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeVar

from kiln_verify.control.config import ServerConfig, origin_of
from kiln_verify.control.request import (
    IDEMPOTENCY_KEY_PATTERN,
    InspectRequest,
    OpenEnvRunRequest,
    TaskCatalogRequest,
)
from kiln_verify.errors import (
    ApiAdapterUnknown,
    ApiCredentialInvalid,
    ApiIdempotencyKeyInvalid,
    ApiRemoteForbidden,
    ApiRequestInvalid,
    ApiUrlInvalid,
    KilnError,
    RecordInvalid,
    snippet,
)
from kiln_verify.openenv.collect import CollectionControls, CollectionOptions
from kiln_verify.openenv.protocol.urls import normalize_base_url
from kiln_verify.records import Record, validate_record

__all__ = [
    "check_environments",
    "check_run_request",
    "collection_controls",
    "credential_envs",
    "parse_body",
    "parse_run_request",
]

R = TypeVar("R", bound=Record)
_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)


def parse_body(model: type[R], value: Any) -> R:
    """``value`` (already strictly parsed JSON) as ``model``, or ``openenv_invalid_request``."""
    if not isinstance(value, dict):
        raise ApiRequestInvalid("the request body must be one JSON object")
    try:
        record = validate_record(model, value)
    except RecordInvalid as exc:
        raise ApiRequestInvalid(exc.rule) from None
    return record


def _normalized_urls(urls: Sequence[str]) -> list[str]:
    out: list[str] = []
    for url in urls:
        try:
            out.append(normalize_base_url(url).base_url)
        except KilnError as exc:
            raise ApiUrlInvalid(exc.rule) from None
    return out


def parse_run_request(value: Any) -> OpenEnvRunRequest:
    """The normalized request of a ``POST /v1/openenv/runs`` body (see the module doc)."""
    if isinstance(value, dict) and "idempotency_key" in value:
        key = value["idempotency_key"]
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ApiIdempotencyKeyInvalid(
                "idempotency_key must be 1..128 ASCII letters, digits, '.', '_', ':' or '-'"
            )
    request = parse_body(OpenEnvRunRequest, value)
    urls = _normalized_urls(request.environment_urls)
    return request.model_copy(update={"environment_urls": urls})


def parse_targets(model: type[InspectRequest] | type[TaskCatalogRequest], value: Any) -> Any:
    """An inspect or task-catalog body with its URLs normalized."""
    request = parse_body(model, value)
    return request.model_copy(
        update={"environment_urls": _normalized_urls(request.environment_urls)}
    )


def check_environments(
    urls: Sequence[str], credential_ids: Sequence[str | None] | None, config: ServerConfig
) -> list[str | None]:
    """The origin rule and the credential handles; the credential variable per URL."""
    if not config.openenv.allow_remote_environments:
        for url in urls:
            if not normalize_base_url(url).is_loopback:
                raise ApiRemoteForbidden(
                    f"remote OpenEnv origins are disabled on this server: {snippet(url)}"
                )
    return credential_envs(urls, credential_ids, config)


def credential_envs(
    urls: Sequence[str], credential_ids: Sequence[str | None] | None, config: ServerConfig
) -> list[str | None]:
    """Each URL's bearer-token variable from its handle (``None`` = public), origin-checked."""
    if not credential_ids:
        return [None for _ in urls]
    out: list[str | None] = []
    for url, handle in zip(urls, credential_ids, strict=True):
        if handle is None:
            out.append(None)
            continue
        entry = config.openenv.credentials.get(handle)
        if entry is None:
            raise ApiCredentialInvalid(
                f"credential handle {snippet(handle)} is not configured on this server"
            )
        if origin_of(url) != entry.origin:
            raise ApiCredentialInvalid(
                f"credential handle {snippet(handle)} is configured for another origin than "
                f"{snippet(origin_of(url))}"
            )
        out.append(entry.bearer_token_env)
    return out


def collection_controls(request: OpenEnvRunRequest, config: ServerConfig) -> CollectionControls:
    """The collector's controls for ``request`` (outputs keep the bundle's default names)."""
    slots = credential_envs(request.environment_urls, request.credential_ids, config)
    return CollectionControls.create(
        request.environment_urls,
        reset_templates=request.reset_templates(),
        credential_envs=slots if any(slot is not None for slot in slots) else (),
        options=CollectionOptions(
            groups=request.groups,
            group_size=request.group_size,
            seed_start=request.seed_start,
            max_steps=request.max_steps,
            concurrency=request.concurrency,
            max_action_tokens=request.max_action_tokens,
            thinking_budget_tokens=request.thinking_budget_tokens,
            temperature=request.temperature,
            thinking=request.thinking,
            protocol_error_reward=request.protocol_error_reward,
            max_recoverable_errors=request.max_recoverable_errors,
            capacity_wait_seconds=request.capacity_wait_seconds,
        ),
    )


def _resident_serves(config: ServerConfig, adapter: str) -> bool:
    """Whether the resident model plays ``adapter`` (an installed adapter needs no policy
    table). Its modules load the HF half, so only a server with a resident model imports
    them."""
    if config.model is None:
        return False
    from kiln_verify.control.resident.serving import serves

    return serves(config, adapter)


def check_run_request(request: OpenEnvRunRequest, config: ServerConfig) -> CollectionControls:
    """Apply the server's policy to a normalized rollout request; its controls when
    admissible (the registry has already dispatched on ``request.kind``)."""
    extra = request.train_only_fields()
    if extra:
        raise ApiRequestInvalid(
            f"{', '.join(extra)} {'is' if len(extra) == 1 else 'are'} valid only for kind=train",
            hint="remove the training-only fields from a rollout request",
        )
    check_environments(request.environment_urls, request.credential_ids, config)
    if request.adapter not in config.policies and not _resident_serves(config, request.adapter):
        raise ApiAdapterUnknown(f"no policy is configured for adapter {snippet(request.adapter)}")
    try:
        return collection_controls(request, config)
    except ApiCredentialInvalid:
        raise
    except KilnError as exc:
        raise ApiRequestInvalid(exc.rule, hint=exc.hint) from None
