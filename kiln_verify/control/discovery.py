"""``POST /v1/openenv/inspect`` and ``POST /v1/openenv/tasks`` through the project's client.

Both apply the same origin rule and credential handles as a run (§12), inspect every
requested environment concurrently with :class:`~kiln_verify.openenv.protocol.client.OpenEnvClient`
and answer with the control-plane records. An environment that cannot be reached or
breaks the protocol is a 502 naming the URL and the client's error (with any token
redacted); a bad selector or page is a 400.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from kiln_verify.control.admission import check_environments, parse_targets
from kiln_verify.control.registry import RunRegistry
from kiln_verify.control.request import InspectRequest, TaskCatalogRequest
from kiln_verify.control.status import (
    INSPECTION_SCHEMA,
    TASK_CATALOG_SCHEMA,
    InspectResponse,
    TaskCatalogEntry,
    TaskCatalogRecord,
    TaskCatalogResponse,
)
from kiln_verify.errors import (
    ApiCredentialInvalid,
    ApiInspectionFailed,
    ApiRequestInvalid,
    ApiTaskCatalogFailed,
    ApiTaskSelectionInvalid,
    ControlApiError,
    CredentialInsecure,
    CredentialInvalid,
    KilnError,
    TaskApiInvalid,
    UsageError,
    snippet,
)
from kiln_verify.openenv.collect.engine import inspection_record
from kiln_verify.openenv.protocol.client import OpenEnvClient
from kiln_verify.openenv.protocol.tasks import task_catalog
from kiln_verify.openenv.records.environment import EnvironmentInspection

__all__ = ["inspect", "task_catalogs"]

T = TypeVar("T")

_SELECTION_RULES: Final = ("is not listed", "choose one with", "is not one of the listed splits")
"""Phrases of :mod:`kiln_verify.openenv.protocol.tasks` rules that blame the caller's selection."""


async def _each(
    urls: list[str],
    slots: list[str | None],
    work: Callable[[OpenEnvClient], Awaitable[T]],
    failed: type[ControlApiError],
) -> list[T]:
    async def one(url: str, slot: str | None) -> T:
        try:
            client = OpenEnvClient(url, credential_env=slot)
        except (CredentialInvalid, CredentialInsecure) as exc:
            raise ApiCredentialInvalid(f"{snippet(url)}: {exc.rule}") from None
        async with client:
            try:
                return await work(client)
            except ControlApiError:
                raise
            except UsageError as exc:
                raise ApiRequestInvalid(client.redact(exc.rule)) from None
            except TaskApiInvalid as exc:
                text = client.redact(exc.rule)
                if any(phrase in text for phrase in _SELECTION_RULES):
                    raise ApiTaskSelectionInvalid(text) from None
                raise failed(f"{snippet(url)}: {exc.code}: {text}") from None
            except KilnError as exc:
                raise failed(f"{snippet(url)}: {exc.code}: {client.redact(exc.rule)}") from None

    tasks = [asyncio.ensure_future(one(url, slot)) for url, slot in zip(urls, slots, strict=True)]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def inspect(registry: RunRegistry, value: Any) -> InspectResponse:
    """Discovery, identity and schemas of every requested environment."""
    request: InspectRequest = parse_targets(InspectRequest, value)
    slots = check_environments(request.environment_urls, request.credential_ids, registry.config)
    if any(slots):
        registry.metrics.authenticated_operation("inspect")

    async def work(client: OpenEnvClient) -> EnvironmentInspection:
        return inspection_record(await client.inspect())

    found = await _each(request.environment_urls, slots, work, ApiInspectionFailed)
    return InspectResponse(schema=INSPECTION_SCHEMA, environments=found)


async def task_catalogs(registry: RunRegistry, value: Any) -> TaskCatalogResponse:
    """Task API splits (and with ``split`` one bounded page) of every requested environment."""
    request: TaskCatalogRequest = parse_targets(TaskCatalogRequest, value)
    slots = check_environments(request.environment_urls, request.credential_ids, registry.config)
    if any(slots):
        registry.metrics.authenticated_operation("task_catalog")
    registry.metrics.catalog_inspection("started")

    async def work(client: OpenEnvClient) -> TaskCatalogEntry:
        catalog = await task_catalog(
            client, request.environment_name, request.split, request.start, request.limit
        )
        return TaskCatalogEntry(
            base_url=client.url.base_url,
            catalog=TaskCatalogRecord.model_validate(catalog.to_json()),
        )

    try:
        entries = await _each(request.environment_urls, slots, work, ApiTaskCatalogFailed)
    except BaseException:
        registry.metrics.catalog_inspection("failed")
        raise
    registry.metrics.catalog_inspection("completed")
    return TaskCatalogResponse(schema=TASK_CATALOG_SCHEMA, catalogs=entries)
