"""The metrics family: the Prometheus exposition and the liveness answer.

Neither is part of the OpenAPI document; ``/metrics`` is fixed-cardinality
(:mod:`kiln_verify.control.metrics`) and answers even when the OpenEnv control plane is
disabled.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from kiln_verify.server.responses import json_response
from kiln_verify.server.routes.common import registry

__all__ = ["METRICS_MEDIA_TYPE", "router"]

METRICS_MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"

router = APIRouter()


@router.get("/health", include_in_schema=False)
async def health() -> Response:
    return json_response({"status": "ok"})


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    body = registry(request).metrics.exposition()
    return Response(body, media_type=METRICS_MEDIA_TYPE)
