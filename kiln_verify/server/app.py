"""The control-plane ASGI application (FastAPI): the §12 routes over the control engine.

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
``GET /metrics``                         Prometheus text exposition
``GET /health``                          ``{"status": "ok"}``
=======================================  ==================================================
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from kiln_verify.control import discovery
from kiln_verify.control.admission import check_run_request, parse_run_request
from kiln_verify.control.artifacts import artifact_headers, open_verified
from kiln_verify.control.config import ServerConfig
from kiln_verify.control.executor import execute_run
from kiln_verify.control.registry import RunRegistry
from kiln_verify.control.status import RUN_LIST_SCHEMA, RunList
from kiln_verify.control.store import RUN_ID_PATTERN, RunStore
from kiln_verify.core.jsonio import loads
from kiln_verify.errors import (
    ApiDisabled,
    ApiInternalError,
    ApiMethodNotAllowed,
    ApiRequestInvalid,
    ApiRouteNotFound,
    ApiRunNotFound,
    ControlApiError,
    KilnError,
)
from kiln_verify.limits import MAX_CONTROL_REQUEST_BYTES
from kiln_verify.server import openapi
from kiln_verify.server.limits import BodyLimit
from kiln_verify.server.responses import DescriptorResponse, error_response, json_response

__all__ = ["create_app"]

log = logging.getLogger("kiln_verify.server")
METRICS_MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _body(raw: bytes) -> Any:
    try:
        return loads(raw, max_bytes=MAX_CONTROL_REQUEST_BYTES)
    except KilnError as exc:
        raise ApiRequestInvalid(f"the body is not strict JSON ({exc.code}: {exc.rule})") from None


def _run_id(value: str) -> str:
    if not RUN_ID_PATTERN.fullmatch(value):
        raise ApiRunNotFound(f"no retained run has id {value[:40]!r}")
    return value


def create_app(config: ServerConfig) -> FastAPI:
    """The application for one state directory; its lifespan restores and drains runs."""
    holder: dict[str, RunRegistry] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        registry = RunRegistry(config, RunStore(config.runs_root), execute_run)
        resumed = registry.restore()
        for problem in registry.restore_skipped:
            log.warning("kiln-verify serve: ignored a run directory: %s", problem)
        if resumed:
            log.info("kiln-verify serve: resumed %d queued run(s)", resumed)
        holder["registry"] = registry
        app.state.registry = registry
        registry.pump()
        try:
            yield
        finally:
            await registry.shutdown()

    def registry() -> RunRegistry:
        return holder["registry"]

    def enabled() -> RunRegistry:
        runs = holder["registry"]
        if not runs.config.openenv.enabled:
            raise ApiDisabled("the OpenEnv control plane is disabled on this server")
        return runs

    app = FastAPI(
        title="kiln-verify control plane",
        version="1",
        summary="Server-owned OpenEnv rollout runs (kiln-openenv-contract §12).",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.add_middleware(BodyLimit, limit=MAX_CONTROL_REQUEST_BYTES)

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

    @app.get("/health", include_in_schema=False)
    async def health() -> Response:
        return json_response({"status": "ok"})

    @app.get("/v1/openenv/runs", **openapi.answers(RunList))
    async def list_runs() -> Response:
        return json_response(RunList(schema=RUN_LIST_SCHEMA, runs=registry().list()))

    @app.post("/v1/openenv/runs", **openapi.create_run())
    async def create_run(request: Request) -> Response:
        runs = enabled()
        run_request = parse_run_request(_body(await request.body()))
        replayed = runs.replay(run_request)
        if replayed is not None:
            return json_response(replayed, 200)
        check_run_request(run_request, runs.config)
        status, created = runs.submit(run_request)
        return json_response(status, 202 if created else 200)

    @app.get("/v1/openenv/runs/{run_id}", **openapi.run_answers())
    async def get_run(run_id: str) -> Response:
        return json_response(registry().get(_run_id(run_id)))

    @app.delete("/v1/openenv/runs/{run_id}", **openapi.run_answers())
    async def cancel_run(run_id: str) -> Response:
        return json_response(await registry().cancel(_run_id(run_id)))

    @app.get("/v1/openenv/runs/{run_id}/artifacts/{kind}", **openapi.artifact())
    async def download(run_id: str, kind: str) -> Response:
        runs = registry()
        status = runs.get(_run_id(run_id))
        fd, entry = await asyncio.to_thread(
            open_verified, status, runs.store.run_dir(status.run_id), kind
        )
        return DescriptorResponse(fd, entry.bytes, artifact_headers(status.run_id, entry))

    @app.post("/v1/openenv/inspect", **openapi.inspect())
    async def inspect(request: Request) -> Response:
        answer = await discovery.inspect(enabled(), _body(await request.body()))
        return json_response(answer)

    @app.post("/v1/openenv/tasks", **openapi.tasks())
    async def tasks(request: Request) -> Response:
        answer = await discovery.task_catalogs(enabled(), _body(await request.body()))
        return json_response(answer)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        body = registry().metrics.exposition()
        return Response(body, media_type=METRICS_MEDIA_TYPE)

    openapi.install(app)
    return app
