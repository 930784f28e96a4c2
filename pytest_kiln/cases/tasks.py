"""The Task API check: a valid task catalog, or 501 on servers that do not support it."""

from __future__ import annotations

from pytest_kiln.cases.context import CaseContext
from pytest_kiln.cases.model import ANY_STATUS, CheckFailed, NotApplicable, describe


async def check_task_api(ctx: CaseContext) -> str | None:
    from kiln_verify.errors import EnvironmentHttpStatus
    from kiln_verify.openenv.identity import INVENTORY_ABSENT_STATUS
    from kiln_verify.openenv.tasks import task_catalog

    client = await ctx.client()
    status, _ = await client.request_raw("GET", "/list_environments", allow=ANY_STATUS)
    if status == INVENTORY_ABSENT_STATUS:
        # `kiln-verify openenv tasks` reports such a server as `task_api: unsupported`.
        raise NotApplicable(
            "no /list_environments (404): the server predates the Task API "
            "(`openenv tasks` reports task_api unsupported)"
        )
    try:
        catalog = await task_catalog(client)
    except EnvironmentHttpStatus as exc:
        raise CheckFailed(f"the Task API answered neither 501 nor a catalog ({exc.rule})") from None
    except Exception as exc:
        raise CheckFailed(f"the Task API catalog is invalid ({describe(exc)})") from None
    return f"task_api {catalog.task_api}, {len(catalog.splits)} splits"
