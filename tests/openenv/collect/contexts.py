"""An :class:`EnvironmentContext` for a live server, as the collector builds one."""

from __future__ import annotations

import asyncio

from kiln_verify.openenv.collect.engine import inspection_record
from kiln_verify.openenv.collect.episode import EnvironmentContext
from kiln_verify.openenv.protocol.client import OpenEnvClient


def environment_context(url: str) -> EnvironmentContext:
    """Inspect the server at ``url`` and wrap the result (environment index 0)."""

    async def inspect() -> EnvironmentContext:
        async with OpenEnvClient(url) as client:
            found = await client.inspect()
            return EnvironmentContext(0, client, inspection_record(found), found.action_schema)

    return asyncio.run(inspect())
