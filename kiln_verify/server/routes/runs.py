"""The runs family: list, create (or replay an exact retry), read, cancel and resume a run.

Creation parses and normalizes the body first, so an exact retry is answered with the
original run (200) before the server's current policy is applied; otherwise the
registry admits the request once through its run kind (in a worker thread: a train
request's admission may load the resident model) and queues it (202). Resume is
kiln-verify's own route (Kiln has none): a new attempt at a rollout run interrupted by a
restart, continuing its journal (:mod:`kiln_verify.control.resume`).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from kiln_verify.control.admission import parse_run_request
from kiln_verify.control.resume import resume_run as resume_interrupted
from kiln_verify.control.status import RUN_LIST_SCHEMA, RunList
from kiln_verify.server import openapi
from kiln_verify.server.responses import json_response
from kiln_verify.server.routes.common import body, enabled, registry
from kiln_verify.server.routes.common import run_id as checked

__all__ = ["router"]

router = APIRouter()


@router.get("/v1/openenv/runs", **openapi.answers(RunList))
async def list_runs(request: Request) -> Response:
    return json_response(RunList(schema=RUN_LIST_SCHEMA, runs=registry(request).list()))


@router.post("/v1/openenv/runs", **openapi.create_run())
async def create_run(request: Request) -> Response:
    runs = enabled(request)
    status, created = await runs.create_off_loop(parse_run_request(await body(request)))
    return json_response(status, 202 if created else 200)


@router.get("/v1/openenv/runs/{run_id}", **openapi.run_answers())
async def get_run(request: Request, run_id: str) -> Response:
    return json_response(registry(request).get(checked(run_id)))


@router.delete("/v1/openenv/runs/{run_id}", **openapi.run_answers())
async def cancel_run(request: Request, run_id: str) -> Response:
    return json_response(await registry(request).cancel(checked(run_id)))


@router.post("/v1/openenv/runs/{run_id}/resume", **openapi.resume_run())
async def resume_run(request: Request, run_id: str) -> Response:
    runs = enabled(request)
    return json_response(resume_interrupted(runs, checked(run_id)), 202)
