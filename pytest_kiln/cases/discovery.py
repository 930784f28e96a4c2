"""Health, discovery and schema checks: the HTTP documents every OpenEnv server serves."""

from __future__ import annotations

from typing import Any

from pytest_kiln.cases.context import CaseContext, compile_action_schema
from pytest_kiln.cases.model import ANY_STATUS, CheckFailed, NotApplicable, describe


async def check_health(ctx: CaseContext) -> str | None:
    client = await ctx.client()
    status, _ = await client.request_raw("GET", "/health", allow=ANY_STATUS)
    if status != 200:
        raise CheckFailed(f"GET /health answered HTTP {status}, expected 200")
    return None


async def _document(ctx: CaseContext, path: str) -> Any:
    client = await ctx.client()
    status, document = await client.request_json("GET", path, allow=ANY_STATUS)
    if status != 200:
        raise CheckFailed(f"GET {path} answered HTTP {status}, expected 200")
    return document


async def check_metadata(ctx: CaseContext) -> str | None:
    document = await _document(ctx, "/metadata")
    if not isinstance(document, dict):
        raise CheckFailed("/metadata is not a JSON object")
    for key in ("name", "description"):
        if not isinstance(document.get(key), str):
            raise CheckFailed(f"/metadata lacks a string {key!r}")
    return None


async def check_schema_shape(ctx: CaseContext) -> str | None:
    document = await _document(ctx, "/schema")
    if not isinstance(document, dict):
        raise CheckFailed("/schema is not a JSON object")
    missing = [key for key in ("action", "observation", "state") if key not in document]
    if missing:
        raise CheckFailed(f"/schema lacks {missing}")
    return None


async def check_list_environments(ctx: CaseContext) -> str | None:
    """SKIPPED on 404, a server that predates the route: the same rule the client applies
    when it inspects (``identity.INVENTORY_ABSENT_STATUS``), so suite and CLI agree."""
    from kiln_verify.openenv.protocol.identity import INVENTORY_ABSENT_STATUS

    client = await ctx.client()
    status, document = await client.request_json("GET", "/list_environments", allow=ANY_STATUS)
    if status == INVENTORY_ABSENT_STATUS:
        raise NotApplicable(
            "no /list_environments (404): the server predates the route (OpenEnv before 0.5)"
        )
    if status != 200:
        raise CheckFailed(f"GET /list_environments answered HTTP {status}, expected 200")
    if not (isinstance(document, list) and document and all(isinstance(n, str) for n in document)):
        raise CheckFailed("/list_environments is not a non-empty JSON array of names")
    return None


async def check_openapi(ctx: CaseContext) -> str | None:
    document = await _document(ctx, "/openapi.json")
    info = document.get("info") if isinstance(document, dict) else None
    if not (
        isinstance(document, dict)
        and isinstance(document.get("openapi"), str)
        and isinstance(info, dict)
        and isinstance(info.get("version"), str)
    ):
        raise CheckFailed("/openapi.json lacks a string 'openapi' or 'info.version'")
    return None


async def check_identity(ctx: CaseContext) -> str | None:
    client = await ctx.client()
    try:
        inspection = await client.inspect()
    except Exception as exc:
        raise CheckFailed(f"inspection failed ({describe(exc)})") from None
    detail = f"schema_sha256 {inspection.identity.schema_sha256}"
    if not inspection.documents.inventory_route:
        detail += "; no /list_environments (404): no advertised names"
    return detail


async def check_action_schema(ctx: CaseContext) -> str | None:
    compile_action_schema(await _document(ctx, "/schema"), CheckFailed)
    return None
