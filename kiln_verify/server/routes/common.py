"""What every route family shares: the registry of the running app and strict bodies.

The registry is created by the application's lifespan and kept on ``app.state``; a route
reaches it through its request (:func:`registry`), or through :func:`enabled` when the
route belongs to the OpenEnv control plane that ``[openenv] enabled = false`` turns off.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from kiln_verify.control.registry import RunRegistry
from kiln_verify.control.store import RUN_ID_PATTERN
from kiln_verify.core.jsonio import loads
from kiln_verify.errors import ApiDisabled, ApiRequestInvalid, ApiRunNotFound, KilnError
from kiln_verify.limits import MAX_CONTROL_REQUEST_BYTES

__all__ = ["body", "enabled", "registry", "run_id"]


def registry(request: Request) -> RunRegistry:
    """The running application's registry."""
    runs: RunRegistry = request.app.state.registry
    return runs


def enabled(request: Request) -> RunRegistry:
    """The registry, or ``openenv_disabled`` when the OpenEnv control plane is off."""
    runs = registry(request)
    if not runs.config.openenv.enabled:
        raise ApiDisabled("the OpenEnv control plane is disabled on this server")
    return runs


async def body(request: Request) -> Any:
    """The request body through the project's strict JSON reader."""
    raw = await request.body()
    try:
        return loads(raw, max_bytes=MAX_CONTROL_REQUEST_BYTES)
    except KilnError as exc:
        raise ApiRequestInvalid(f"the body is not strict JSON ({exc.code}: {exc.rule})") from None


def run_id(value: str) -> str:
    """A path's run id; anything that is not a lower-case UUID is no retained run."""
    if not RUN_ID_PATTERN.fullmatch(value):
        raise ApiRunNotFound(f"no retained run has id {value[:40]!r}")
    return value
