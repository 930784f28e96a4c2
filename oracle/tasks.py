"""The ORS-compatible Task API of OpenEnv 0.10.0 (`/{env}/splits`, `tasks`, `num_tasks`, ...).

The status codes are the contract clients rely on: 422 for a malformed body (checked
before anything else, as FastAPI does), 404 for another environment's name, 501 when the
environment has no tasks at all, 400 for an index or split that does not exist. The
environment's `task_splits()`/`task_rows()` class methods are the whole provider (the HTTP
layer still calls the factory once per request, as OpenEnv does, so that a failing factory
is a 500 here too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from oracle.base import Environment
from oracle.validation import BodyError, ErrorItem, error, extras, lax_int, string

FieldSpec = tuple[str, Literal["string", "integer"], bool]

#: route -> (OpenEnv method name, request-model fields in declaration order)
ROUTES: dict[str, tuple[str, tuple[FieldSpec, ...]]] = {
    "tasks": ("list_tasks", (("split", "string", True),)),
    "num_tasks": ("num_tasks", (("split", "string", True),)),
    "task": ("get_task", (("split", "string", True), ("index", "integer", True))),
    "task_range": ("get_task_range", (("split", "string", True), ("start", "integer", False),
                                      ("stop", "integer", False))),
}


class TaskError(Exception):
    """An HTTP error of the Task API with OpenEnv's `detail` text."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def validate(route: str, body: dict[str, Any]) -> dict[str, Any]:
    """The request model (`extra="forbid"`, lax int) or a 422 `BodyError`."""
    _, fields = ROUTES[route]
    errors: list[ErrorItem] = []
    values: dict[str, Any] = {}
    for name, kind, required in fields:
        if name not in body:
            if required:
                errors.append(error("missing", ("body", name), dict(body), url=False))
            values[name] = None
            continue
        value = body[name]
        if value is None and not required:
            values[name] = None
        elif kind == "string":
            values[name] = string(value, ("body", name), errors)
        else:
            values[name] = lax_int(value, ("body", name), errors)
    errors.extend(extras(body, (name for name, _, _ in fields), ("body",), url=False))
    if errors:
        raise BodyError(422, errors)
    return values


def check_env_name(env: type[Environment], name: str) -> None:
    if name.lower() != env.env_name.lower():
        raise TaskError(404, f"unknown environment {name!r}")


def splits(env: type[Environment]) -> list[dict[str, Any]]:
    declared = env.task_splits()
    if declared is None:
        raise TaskError(501, "list_splits is not supported for this environment")
    return [dict(split) for split in declared]


def call(env: type[Environment], route: str, values: dict[str, Any]) -> dict[str, Any]:
    """Run one Task API method; the response body on success."""
    method, _ = ROUTES[route]
    if env.task_splits() is None:
        raise TaskError(501, f"{method} is not supported for this environment")
    rows = _rows(env, values["split"])
    if route == "tasks":
        return {"tasks": list(rows), "env_name": env.env_name}
    if route == "num_tasks":
        return {"num_tasks": len(rows)}
    if route == "task":
        index: int = values["index"]
        if not 0 <= index < len(rows):
            raise TaskError(400, "Invalid task index")
        return {"task": rows[index]}
    return {"tasks": list(rows[values["start"]:values["stop"]])}


def _rows(env: type[Environment], split: str) -> Sequence[Any]:
    try:
        return env.task_rows(split)
    except (KeyError, IndexError):
        raise TaskError(400, "Invalid task index") from None
    except NotImplementedError:
        raise TaskError(501, "list_tasks is not supported for this environment") from None
