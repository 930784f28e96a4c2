"""The OpenAPI document, generated from the same pydantic records the routes use.

Routes read their bodies as bytes (strict JSON), so FastAPI cannot infer the request
schemas; each route declares its body and answers here, and :func:`install` adds the
request records to ``components.schemas``. ``GET /openapi.json`` serves the result.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic.json_schema import models_json_schema

from kiln_verify.control.request import InspectRequest, OpenEnvRunRequest, TaskCatalogRequest
from kiln_verify.control.status import (
    ApiErrorBody,
    InspectResponse,
    OpenEnvRunStatus,
    TaskCatalogResponse,
)
from kiln_verify.control.training.records import OpenEnvTrainingPreflightRequest
from kiln_verify.records import Record

__all__ = [
    "answers",
    "artifact",
    "create_run",
    "inspect",
    "install",
    "resume_run",
    "run_answers",
    "tasks",
]

_REQUESTS: tuple[type[Record], ...] = (
    OpenEnvRunRequest,
    InspectRequest,
    TaskCatalogRequest,
    OpenEnvTrainingPreflightRequest,
)
_ERROR = {"model": ApiErrorBody, "description": 'Refused: {"error": {code, message, hint}}'}


def _body(model: type[Record]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
            },
        }
    }


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: _ERROR for status in statuses}


def answers(model: type[Record], **extra: Any) -> dict[str, Any]:
    return {
        "response_model": None,
        "responses": {200: {"model": model, "description": "OK"}, **_errors(500)},
        **extra,
    }


def create_run() -> dict[str, Any]:
    return {
        "response_model": None,
        "status_code": 202,
        "summary": "Create a rollout run (202), or replay an exact retry (200)",
        "responses": {
            202: {"model": OpenEnvRunStatus, "description": "A new run was queued"},
            200: {"model": OpenEnvRunStatus, "description": "Exact retry: the original run"},
            **_errors(400, 403, 409, 413, 500, 501, 503),
        },
        "openapi_extra": _body(OpenEnvRunRequest),
    }


def resume_run() -> dict[str, Any]:
    return {
        "response_model": None,
        "status_code": 202,
        "summary": (
            "kiln-verify extension (not Kiln's): a new run continuing the journal of a "
            "rollout run failed with run_interrupted"
        ),
        "responses": {
            202: {"model": OpenEnvRunStatus, "description": "The new attempt was queued"},
            **_errors(400, 403, 404, 409, 500, 501, 503),
        },
    }


def run_answers() -> dict[str, Any]:
    return {
        "response_model": None,
        "responses": {
            200: {"model": OpenEnvRunStatus, "description": "The run's status"},
            **_errors(404, 409),
        },
    }


def artifact() -> dict[str, Any]:
    return {
        "response_model": None,
        "summary": "Download a published artifact (verified on the served descriptor)",
        "responses": {
            200: {
                "description": (
                    "The manifest's bytes; Content-Length and a strong quoted-digest ETag "
                    "from the manifest, Cache-Control: private, no-store, nosniff"
                ),
                "content": {"application/x-ndjson": {}, "application/json": {}},
            },
            **_errors(404, 409),
        },
    }


def inspect() -> dict[str, Any]:
    return {
        "response_model": None,
        "responses": {
            200: {"model": InspectResponse, "description": "kiln.openenv-inspection.v1"},
            **_errors(400, 403, 413, 502),
        },
        "openapi_extra": _body(InspectRequest),
    }


def tasks() -> dict[str, Any]:
    return {
        "response_model": None,
        "responses": {
            200: {"model": TaskCatalogResponse, "description": "kiln.openenv-task-catalog.v1"},
            **_errors(400, 403, 413, 502),
        },
        "openapi_extra": _body(TaskCatalogRequest),
    }


def install(app: FastAPI) -> None:
    """Make ``app.openapi()`` include the request records' schemas (computed once)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = get_openapi(
            title=app.title, version=app.version, summary=app.summary, routes=app.routes
        )
        _, defs = models_json_schema(
            [(model, "validation") for model in _REQUESTS],
            ref_template="#/components/schemas/{model}",
        )
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for name, schema in defs.get("$defs", {}).items():
            schemas.setdefault(name, schema)
        app.openapi_schema = document
        return document

    app.openapi = build  # type: ignore[method-assign]
