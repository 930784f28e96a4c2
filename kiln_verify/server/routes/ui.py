"""The dashboard family: ``GET /ui/`` and its static files (docs/control-plane.md, Dashboard).

The page is plain files from the :mod:`kiln_verify.server.ui` package, read once per
request from the installed package (no build step, no template, nothing of the request or
the server's state is written into them), so the page learns everything through the same
public routes any client uses. Only the files named in :data:`ASSETS` are served; each
answer carries a strict Content-Security-Policy (``default-src 'self'``, no inline script
or style, no frames, no form posts elsewhere), so a peer-supplied string that reached the
DOM as markup could neither run nor load anything. None of these routes is part of the
API, so they stay out of the OpenAPI document.
"""

from __future__ import annotations

from importlib import resources
from typing import Final

from fastapi import APIRouter
from starlette.responses import RedirectResponse, Response

from kiln_verify.errors import ApiRouteNotFound

__all__ = ["ASSETS", "CONTENT_SECURITY_POLICY", "UI_HEADERS", "router"]

ASSETS: Final[dict[str, str]] = {
    "index.html": "text/html; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
    "app.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "dom.js": "text/javascript; charset=utf-8",
    "runs.js": "text/javascript; charset=utf-8",
    "form.js": "text/javascript; charset=utf-8",
    "environments.js": "text/javascript; charset=utf-8",
    "handoffs.js": "text/javascript; charset=utf-8",
}
"""Every file the dashboard is made of, with its media type."""

CONTENT_SECURITY_POLICY: Final = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "font-src 'none'",
        "object-src 'none'",
        "frame-src 'none'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'none'",
    )
)

UI_HEADERS: Final[dict[str, str]] = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}

router = APIRouter(include_in_schema=False)


def _asset(name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise ApiRouteNotFound(f"no dashboard file {name[:80]!r}")
    data = resources.files("kiln_verify.server.ui").joinpath(name).read_bytes()
    return Response(data, media_type=media_type, headers=UI_HEADERS)


@router.get("/ui")
async def ui_root() -> Response:
    return RedirectResponse("/ui/", status_code=308, headers=UI_HEADERS)


@router.get("/ui/")
async def ui_index() -> Response:
    return _asset("index.html")


@router.get("/ui/{name}")
async def ui_file(name: str) -> Response:
    return _asset(name)
