"""The artifacts family: the verified bytes of one artifact a run's manifest binds.

Which files a run can serve is its kind's artifact table
(:meth:`~kiln_verify.control.registry.RunRegistry.artifacts`), so this route knows no run
kind. The file is hashed from one descriptor in a worker thread, then that same
descriptor is streamed (:class:`~kiln_verify.server.responses.DescriptorResponse`).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from starlette.responses import Response

from kiln_verify.control.artifacts import artifact_headers, open_verified
from kiln_verify.server import openapi
from kiln_verify.server.responses import DescriptorResponse
from kiln_verify.server.routes.common import registry
from kiln_verify.server.routes.common import run_id as checked

__all__ = ["router"]

router = APIRouter()


@router.get("/v1/openenv/runs/{run_id}/artifacts/{kind}", **openapi.artifact())
async def download(request: Request, run_id: str, kind: str) -> Response:
    runs = registry(request)
    status = runs.get(checked(run_id))
    table = runs.artifacts(status)
    fd, entry = await asyncio.to_thread(
        open_verified, status, runs.store.run_dir(status.run_id), kind, table
    )
    return DescriptorResponse(fd, entry.bytes, artifact_headers(status.run_id, entry, table))
