"""The Task API check: a valid task catalog, or 501 on servers that do not support it.

The check *is* ``kiln-verify openenv tasks``: it calls the same engine function
(:func:`kiln_verify.openenv.protocol.tasks.task_catalog`), so the suite and the CLI cannot disagree
about a server. A server that predates the Task API (404 on ``/list_environments``,
OpenEnv before 0.5) gets ``task_api unsupported`` from both.
"""

from __future__ import annotations

from pytest_kiln.cases.context import CaseContext
from pytest_kiln.cases.model import ANY_STATUS, CheckFailed, describe


async def check_task_api(ctx: CaseContext) -> str | None:
    from kiln_verify.errors import EnvironmentHttpStatus
    from kiln_verify.openenv.protocol.identity import INVENTORY_ABSENT_STATUS
    from kiln_verify.openenv.protocol.tasks import task_catalog

    client = await ctx.client()
    status, _ = await client.request_raw("GET", "/list_environments", allow=ANY_STATUS)
    try:
        catalog = await task_catalog(client)
    except EnvironmentHttpStatus as exc:
        raise CheckFailed(f"the Task API answered neither 501 nor a catalog ({exc.rule})") from None
    except Exception as exc:
        raise CheckFailed(f"the Task API catalog is invalid ({describe(exc)})") from None
    detail = f"task_api {catalog.task_api}, {len(catalog.splits)} splits"
    if status == INVENTORY_ABSENT_STATUS:
        detail += " (no /list_environments (404): the server predates the Task API)"
    return detail
