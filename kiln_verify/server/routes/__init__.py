"""The control plane's routes, one module per family; :func:`include_all` mounts them.

=============  ===========================================================================
family         routes
=============  ===========================================================================
``runs``       ``GET``/``POST /v1/openenv/runs``, ``GET``/``DELETE /v1/openenv/runs/{id}``
``artifacts``  ``GET /v1/openenv/runs/{id}/artifacts/{kind}``
``discovery``  ``POST /v1/openenv/inspect``, ``POST /v1/openenv/tasks`` (inspection, tasks)
``training``   ``POST /v1/openenv/training/preflight`` (admission; docs/training-admission.md)
``metrics``    ``GET /metrics``, ``GET /health``
``adapters``   ``GET /v1/adapters`` (the resident model's adapters; docs/resident-model.md)
``hf_exports`` ``POST``/``GET``/``DELETE /v1/train/hf/.../exports`` (docs/hf-http-export.md)
``hf_imports`` ``POST /v1/train/hf/peft/imports/{name}`` (docs/hf-http-import.md)
``ui``         ``GET /ui/`` and its static files, the dashboard (docs/control-plane.md)
=============  ===========================================================================

A new family (HF exports, PEFT imports, adapters, the dashboard's static files) is one
more module with a ``router`` and one more entry in :data:`FAMILIES`; its configuration is
one more section of :class:`~kiln_verify.control.config.ServerConfig`. Every route parses,
calls one engine function of :mod:`kiln_verify.control` and renders its record.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from kiln_verify.server.routes import (
    adapters,
    artifacts,
    discovery,
    hf_exports,
    hf_imports,
    metrics,
    runs,
    training,
    ui,
)

__all__ = ["FAMILIES", "include_all"]

FAMILIES: tuple[tuple[str, APIRouter], ...] = (
    ("runs", runs.router),
    ("artifacts", artifacts.router),
    ("discovery", discovery.router),
    ("training", training.router),
    ("metrics", metrics.router),
    ("adapters", adapters.router),
    ("hf_exports", hf_exports.router),
    ("hf_imports", hf_imports.router),
    ("ui", ui.router),
)
"""Route families in mounting order (the order of the OpenAPI document's paths)."""


def include_all(app: FastAPI) -> None:
    """Mount every family's router on ``app``."""
    for _name, router in FAMILIES:
        app.include_router(router)
