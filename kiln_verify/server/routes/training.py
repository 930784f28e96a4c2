"""The training-admission family: ``POST /v1/openenv/training/preflight`` (§5.8, §12).

The route reads the body strictly, takes a capacity snapshot from the server's own run
tracker and calls :func:`kiln_verify.control.training.preflight.preflight`; the answer is
``kiln.openenv-training-preflight.v1`` or a typed refusal. Either way it counts
``kiln_openenv_training_preflights_total{status}``. Nothing is written and no environment
is contacted: admission reads only the request, the configuration, the adapter set and the
resident model (loaded on first use to name the behaviour policy; ``model_not_loaded``
without one).
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, Request
from starlette.responses import Response

from kiln_verify.control.registry import RunRegistry
from kiln_verify.control.status import ApiErrorBody
from kiln_verify.control.training.preflight import (
    BEHAVIOUR_STATE_KEY,
    BehaviourSource,
    ResidentBehaviour,
    capacity_snapshot,
    preflight,
)
from kiln_verify.control.training.records import (
    OpenEnvTrainingCapacitySnapshot,
    OpenEnvTrainingPreflightReceipt,
    OpenEnvTrainingPreflightRequest,
)
from kiln_verify.errors import ControlApiError
from kiln_verify.server.responses import json_response
from kiln_verify.server.routes.common import body, enabled

__all__ = ["behaviour_source", "router", "tracker_capacity"]

router = APIRouter()

_ERROR: Final = {"model": ApiErrorBody, "description": 'Refused: {"error": {code, message, hint}}'}
_OPENAPI: Final[dict[str, Any]] = {
    "response_model": None,
    "summary": "Admit a training intent before any collection (nothing is reserved)",
    "responses": {
        200: {"model": OpenEnvTrainingPreflightReceipt, "description": "The receipt"},
        **dict.fromkeys((400, 404, 409, 413, 500, 501, 503), _ERROR),
    },
    "openapi_extra": {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "$ref": f"#/components/schemas/{OpenEnvTrainingPreflightRequest.__name__}"
                    }
                }
            },
        }
    },
}


def behaviour_source(request: Request) -> BehaviourSource:
    """The app's :class:`BehaviourSource` if it set one, else the resident model
    (``model_not_loaded`` on a server without one)."""
    source: BehaviourSource | None = getattr(request.app.state, BEHAVIOUR_STATE_KEY, None)
    if source is not None:
        return source
    runs: RunRegistry = request.app.state.registry
    return ResidentBehaviour(runs.config)


def tracker_capacity(runs: RunRegistry) -> OpenEnvTrainingCapacitySnapshot:
    """The run tracker's live counts now (``openenv_run_capacity_full`` when saturated)."""
    live = runs.gauges()
    return capacity_snapshot(
        checked_unix_ms=runs.clock(),
        queued=live.queued,
        tracked=live.tracked,
        max_tracked=runs.config.openenv.max_tracked_runs,
    )


@router.post("/v1/openenv/training/preflight", **_OPENAPI)
async def training_preflight(request: Request) -> Response:
    runs = enabled(request)
    try:
        source = behaviour_source(request)
        receipt = await preflight(await body(request), source, tracker_capacity(runs))
    except ControlApiError:
        runs.metrics.training_preflight("rejected")
        raise
    runs.metrics.training_preflight("accepted")
    return json_response(receipt)
