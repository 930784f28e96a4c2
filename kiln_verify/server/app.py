"""The control-plane ASGI application (FastAPI): the §12 routes over the control engine.

:func:`create_app` only assembles: the lifespan (the registry over the state directory and
the served run kinds, :data:`kiln_verify.control.kinds.KINDS`), the body limit, the typed
error answers and the route families of :mod:`kiln_verify.server.routes`, one module each.
Routes only parse, call one engine function and render its record; every rule lives in
:mod:`kiln_verify.control`. Request bodies are read as bytes (at most
``MAX_CONTROL_REQUEST_BYTES``, enforced by :class:`BodyLimit` before any route runs) and
parsed by the project's strict JSON reader, so duplicate keys, ``NaN`` and lone
surrogates are refused exactly as everywhere else; the OpenAPI document still describes
every body and answer from the same pydantic records (:mod:`kiln_verify.server.openapi`).

=======================================  ==================================================
route                                    answer
=======================================  ==================================================
``GET /v1/openenv/runs``                 ``kiln.openenv-run-list.v5``, newest first
``POST /v1/openenv/runs``                202 new run, 200 exact retry (original run)
``GET /v1/openenv/runs/{id}``            the run's ``kiln.openenv-run.v5`` status
``DELETE /v1/openenv/runs/{id}``         cooperative cancellation; the status after it
``GET /v1/openenv/runs/{id}/artifacts/   the verified bytes of a manifest artifact
{kind}``
``POST /v1/openenv/inspect``             ``kiln.openenv-inspection.v1``
``POST /v1/openenv/tasks``               ``kiln.openenv-task-catalog.v1``
``POST /v1/openenv/training/preflight``   ``kiln.openenv-training-preflight.v1``
``GET /v1/adapters``                     Kiln's ``AdaptersResponse`` (``serve --model``)
``/v1/train/hf/{sft,grpo}/exports``,     the HF/TRL export registry (docs/hf-http-export.md)
``/v1/train/hf/exports[/{name}...]``
``POST /v1/train/hf/peft/imports/{name}`` the verified PEFT import (docs/hf-http-import.md)
``GET /ui/``                             the dashboard (docs/control-plane.md)
``GET /metrics``                         Prometheus text exposition
``GET /health``                          ``{"status": "ok"}``
=======================================  ==================================================
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.kind import KindTable
from kiln_verify.control.kinds import KINDS
from kiln_verify.control.registry import RunRegistry
from kiln_verify.control.store import RunStore
from kiln_verify.errors import (
    ApiInternalError,
    ApiMethodNotAllowed,
    ApiRequestInvalid,
    ApiRouteNotFound,
    ControlApiError,
)
from kiln_verify.limits import MAX_CONTROL_REQUEST_BYTES
from kiln_verify.server import openapi
from kiln_verify.server.headers import PrivateAnswers
from kiln_verify.server.limits import BodyLimit
from kiln_verify.server.responses import error_response
from kiln_verify.server.routes import include_all

__all__ = ["create_app"]

log = logging.getLogger("kiln_verify.server")


def _install_error_answers(app: FastAPI) -> None:
    """Every refusal is the typed ``{"error": {code, message, hint}}`` body."""

    @app.exception_handler(ControlApiError)
    async def _api_error(request: Request, exc: ControlApiError) -> Response:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 405:
            return error_response(ApiMethodNotAllowed(f"{request.method} is not allowed here"))
        return error_response(ApiRouteNotFound(f"no route {request.url.path[:80]!r}"))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        return error_response(ApiRequestInvalid("the request does not match the route"))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        log.exception("kiln-verify serve: internal error on %s", request.url.path)
        return error_response(ApiInternalError("the server failed to answer this request"))


def create_app(config: ServerConfig, kinds: KindTable = KINDS) -> FastAPI:
    """The application for one state directory; its lifespan restores and drains runs."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        registry = RunRegistry(config, RunStore(config.runs_root), kinds)
        resumed = registry.restore()
        for problem in registry.restore_skipped:
            log.warning("kiln-verify serve: ignored a run directory: %s", problem)
        if resumed:
            log.info("kiln-verify serve: resumed %d queued run(s)", resumed)
        app.state.registry = registry
        registry.pump()
        try:
            yield
        finally:
            await registry.shutdown()

    app = FastAPI(
        title="kiln-verify control plane",
        version="1",
        summary="Server-owned OpenEnv rollout runs (kiln-openenv-contract §12).",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.add_middleware(BodyLimit, limit=MAX_CONTROL_REQUEST_BYTES)
    app.add_middleware(PrivateAnswers)  # outermost: refusals of BodyLimit get it too
    _install_error_answers(app)
    include_all(app)
    openapi.install(app)
    return app
