"""The inspection and tasks family: what the requested environments are and offer.

Both routes apply a run's origin rule and credential handles
(:mod:`kiln_verify.control.discovery`) and answer ``kiln.openenv-inspection.v1`` and
``kiln.openenv-task-catalog.v1``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from kiln_verify.control import discovery
from kiln_verify.server import openapi
from kiln_verify.server.responses import json_response
from kiln_verify.server.routes.common import body, enabled

__all__ = ["router"]

router = APIRouter()


@router.post("/v1/openenv/inspect", **openapi.inspect())
async def inspect(request: Request) -> Response:
    answer = await discovery.inspect(enabled(request), await body(request))
    return json_response(answer)


@router.post("/v1/openenv/tasks", **openapi.tasks())
async def tasks(request: Request) -> Response:
    answer = await discovery.task_catalogs(enabled(request), await body(request))
    return json_response(answer)
