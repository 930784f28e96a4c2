"""The Task API catalog (``kiln.openenv-task-catalog.v1`` shape, contract §8.8).

Discovery only: the catalog lists an environment's splits and one page of task rows so a
person can see what a server offers. Rows are untrusted peer data and are returned for
display only; nothing here ever turns a row into reset data. HTTP 501 on ``splits`` is a
conforming answer (an environment without a task provider) and yields
``task_api: "unsupported"``; so does HTTP 404 on ``/list_environments``, a server that
predates the Task API altogether (openenv-core 0.3.0, openenv 0.3.1 and 0.4.0). Such a
server lists no names, so its catalog is named by its ``/metadata`` name, the name the
rollout records use.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict

from kiln_verify.errors import TaskApiInvalid, UsageError, snippet
from kiln_verify.limits import (
    MAX_CATALOG_NAMES,
    MAX_SELECTOR_BYTES,
    MAX_TASK_COLLECTION_ITEMS,
    MAX_TASK_PAGE,
)
from kiln_verify.openenv.protocol.client import OpenEnvClient
from kiln_verify.openenv.protocol.identity import INVENTORY_ABSENT_STATUS, environment_names

NOT_IMPLEMENTED = frozenset({501})
_INVENTORY_ABSENT = frozenset({INVENTORY_ABSENT_STATUS})


class TaskSplit(BaseModel):
    """One split; fields beyond ``name`` and ``type`` are preserved as the server sent them.

    Both are required non-empty strings, as in Kiln's ``OpenEnvTaskSplit``: a catalog that
    names Kiln's record is Kiln's record (OpenEnv's server always sends a ``type``)."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    name: str
    type: str


class TaskCatalog(BaseModel):
    """``{environment_name, task_api, splits, selected_split?, num_tasks?, start?, stop?,
    tasks?}``; absent optional fields are omitted from JSON (see :meth:`to_json`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    environment_name: str
    task_api: Literal["available", "unsupported"]
    splits: list[TaskSplit]
    selected_split: str | None = None
    num_tasks: int | None = None
    start: int | None = None
    stop: int | None = None
    tasks: list[Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


def segment(name: str) -> str:
    """Percent-encode an environment name as exactly one path segment."""
    return quote(name, safe="")


def _selector(value: str, what: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value.encode("utf-8")) <= MAX_SELECTOR_BYTES:
        raise UsageError(f"{what} must be 1..{MAX_SELECTOR_BYTES} UTF-8 bytes")
    return value


def _select_environment(names: list[str], wanted: str | None) -> str:
    if wanted is not None:
        for name in names:
            if name.lower() == wanted.lower():
                return name
        raise TaskApiInvalid(
            f"environment {snippet(wanted)} is not listed; the server lists {snippet(names)}"
        )
    if len(names) == 1:
        return names[0]
    raise TaskApiInvalid(
        f"the server lists {len(names)} environments; choose one with --environment-name"
    )


def _splits(document: Any) -> list[TaskSplit]:
    if not isinstance(document, list) or len(document) > MAX_CATALOG_NAMES:
        raise TaskApiInvalid(f"splits must be a JSON array of at most {MAX_CATALOG_NAMES} items")
    out: list[TaskSplit] = []
    for item in document:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise TaskApiInvalid("every split must be an object with a non-empty string name")
        if not isinstance(item.get("type"), str) or not item["type"]:
            raise TaskApiInvalid("every split must have a non-empty string type")
        out.append(TaskSplit.model_validate(item))
    return out


async def _predates_task_api(client: OpenEnvClient, wanted: str | None) -> TaskCatalog:
    """The catalog of a server without ``/list_environments``: its metadata name, no API.

    A requested name must be that name (case-insensitive, as the Task API matches names),
    so a typo is still an error rather than a catalog of some other environment.
    """
    _, metadata = await client.request_json("GET", "/metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not 1 <= len(name.encode("utf-8", "surrogatepass")) <= (
        MAX_SELECTOR_BYTES
    ):
        raise TaskApiInvalid(
            f"/metadata must name the environment (a string of 1..{MAX_SELECTOR_BYTES} bytes) "
            "on a server without /list_environments"
        )
    if wanted is not None and wanted.lower() != name.lower():
        raise TaskApiInvalid(
            f"environment {snippet(wanted)} is not listed; the server predates "
            f"/list_environments and names itself {snippet(name)}"
        )
    return TaskCatalog(environment_name=name, task_api="unsupported", splits=[])


async def task_catalog(
    client: OpenEnvClient,
    environment_name: str | None = None,
    split: str | None = None,
    start: int = 0,
    limit: int = 50,
) -> TaskCatalog:
    """List splits; with ``split``, also ``num_tasks`` and the page ``[start, start+limit)``."""
    if type(start) is not int or start < 0:
        raise UsageError("start must be a non-negative integer")
    if type(limit) is not int or not 1 <= limit <= MAX_TASK_PAGE:
        raise UsageError(f"limit must be an integer in 1..MAX_TASK_PAGE = {MAX_TASK_PAGE}")
    if environment_name is not None:
        _selector(environment_name, "the environment name")
    if split is not None:
        _selector(split, "the split")
    await client.health()
    status, listed = await client.request_json(
        "GET", "/list_environments", allow=_INVENTORY_ABSENT
    )
    if status == INVENTORY_ABSENT_STATUS:
        return await _predates_task_api(client, environment_name)
    try:
        names = environment_names(listed)
    except Exception as exc:
        raise TaskApiInvalid(str(getattr(exc, "rule", exc))) from None
    name = _select_environment(names, environment_name)
    prefix = "/" + segment(name)
    status, document = await client.request_json("GET", prefix + "/splits", allow=NOT_IMPLEMENTED)
    if status == 501:
        return TaskCatalog(environment_name=name, task_api="unsupported", splits=[])
    splits = _splits(document)
    if split is None:
        return TaskCatalog(environment_name=name, task_api="available", splits=splits)
    if split not in {item.name for item in splits}:
        raise TaskApiInvalid(f"split {snippet(split)} is not one of the listed splits")
    _, counted = await client.request_json(
        "POST", prefix + "/num_tasks", json_body={"split": split}
    )
    num_tasks = counted.get("num_tasks") if isinstance(counted, dict) else None
    if type(num_tasks) is not int or num_tasks < 0:
        raise TaskApiInvalid('num_tasks must answer {"num_tasks": <non-negative integer>}')
    stop = min(start + limit, num_tasks) if start < num_tasks else start
    rows: list[Any] = []
    if stop > start:
        _, page = await client.request_json(
            "POST", prefix + "/task_range", json_body={"split": split, "start": start, "stop": stop}
        )
        rows_value = page.get("tasks") if isinstance(page, dict) else None
        if not isinstance(rows_value, list) or len(rows_value) > MAX_TASK_COLLECTION_ITEMS:
            raise TaskApiInvalid('task_range must answer {"tasks": [...]}')
        if len(rows_value) > stop - start:
            raise TaskApiInvalid(f"task_range returned {len(rows_value)} rows for {stop - start}")
        rows = rows_value
    return TaskCatalog(
        environment_name=name,
        task_api="available",
        splits=splits,
        selected_split=split,
        num_tasks=num_tasks,
        start=start,
        stop=stop,
        tasks=rows,
    )
