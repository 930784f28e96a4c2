"""The adapters family: ``GET /v1/adapters``, Kiln's ``AdaptersResponse``.

Kiln's route and record (``contracts/kiln-http-api-v1.openapi.json``,
``kiln-artifacts-v1.schema.json``); the other adapter routes Kiln serves (load, unload,
upload, merge, delete, detail, download, receipt) are not served here: an adapter enters
only through a verified import (a training run's, or Kiln's HTTP PEFT import,
:mod:`kiln_verify.server.routes.hf_imports`), and each run names its own adapter, so
there is nothing to load or unload (docs/resident-model.md). Without a
resident model the route answers ``model_not_loaded`` (409). The listing verifies every
installed directory, so it runs in a worker thread; the resident model's modules are
imported on the first request, never at start-up.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from starlette.responses import Response

from kiln_verify.control.resident.records import AdaptersResponse
from kiln_verify.control.resident.required import require_resident_model
from kiln_verify.server import openapi
from kiln_verify.server.responses import json_response
from kiln_verify.server.routes.common import registry

__all__ = ["router"]

router = APIRouter()


@router.get("/v1/adapters", **openapi.answers(AdaptersResponse, summary="List installed adapters"))
async def list_adapters(request: Request) -> Response:
    config = registry(request).config
    require_resident_model(config, "GET /v1/adapters")
    from kiln_verify.control.resident.serving import adapter_listing

    return json_response(await asyncio.to_thread(adapter_listing, config))
