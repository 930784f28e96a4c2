"""The HTTP routes of an OpenEnv 0.10.0 server, answered from precomputed bytes where possible.

Like OpenEnv, `/reset`, `/step` and `/state` build a fresh environment per request (HTTP
episodes are impossible by design), HTTP rewards are coerced to `float | null` by the
response model, `/state` shows only the base `State` fields, an environment exception is
a plain-text 500, and a malformed body gets FastAPI's 422 `{"detail": [...]}`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from oracle import jsonrpc, tasks
from oracle.context import ServerContext
from oracle.validation import (
    BodyError,
    object_body,
    read_json_body,
    reset_body_errors,
    step_body_errors,
)
from oracle.wire import dumps_bytes, observation_body

JSON = b"application/json"
_strict = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


@dataclasses.dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[bytes, bytes]
    body: bytes

    @property
    def content_type(self) -> str | None:
        raw = self.headers.get(b"content-type")
        return raw.decode("latin-1") if raw is not None else None

    @property
    def authorization(self) -> str | None:
        raw = self.headers.get(b"authorization")
        return raw.decode("latin-1") if raw is not None else None


@dataclasses.dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: bytes | None = JSON
    headers: tuple[tuple[bytes, bytes], ...] = ()


def json_response(status: int, value: Any) -> Response:
    """FastAPI's `JSONResponse`: non-finite floats cannot be rendered and become a 500."""
    try:
        return Response(status, _strict(value).encode("utf-8"))
    except (ValueError, UnicodeEncodeError, RecursionError):
        return INTERNAL_ERROR


NOT_FOUND = Response(404, b'{"detail":"Not Found"}')
#: OpenEnv's server closes the connection after a 500 (Starlette re-raises, uvicorn closes).
INTERNAL_ERROR = Response(500, b"Internal Server Error", b"text/plain; charset=utf-8",
                          ((b"connection", b"close"),))
HEALTHY = Response(200, b'{"status":"healthy"}')

Handler = Callable[[ServerContext, Request], Response]


def _metadata(ctx: ServerContext, request: Request) -> Response:
    ctx.make_env()
    return Response(200, ctx.current_documents().metadata)


def _reset(ctx: ServerContext, request: Request) -> Response:
    body = object_body(read_json_body(request.content_type, request.body), required=False)
    kwargs, errors = reset_body_errors(body)
    if errors:
        raise BodyError(422, errors)
    outcome = ctx.reset(ctx.make_env(), kwargs)
    observation = dict(outcome.observation)
    ctx.decorate_reset(observation, request.authorization)
    return _observation_response(observation, outcome.reward, outcome.done)


def _step(ctx: ServerContext, request: Request) -> Response:
    body = object_body(read_json_body(request.content_type, request.body), required=True)
    errors = step_body_errors(body)
    if errors:
        raise BodyError(422, errors)
    action: dict[str, Any] = body["action"]
    errors = ctx.action_errors(action)
    if errors:
        raise BodyError(422, errors)
    action = {key: value for key, value in action.items() if key != "metadata"}
    outcome = ctx.make_env().step(action)
    return _observation_response(outcome.observation, outcome.reward, outcome.done)


def _observation_response(observation: Any, reward: Any, done: bool) -> Response:
    coerced = None if reward is None else float(reward)
    return json_response(200, {"observation": observation_body(observation), "reward": coerced,
                               "done": done, "metadata": None})


def _state(ctx: ServerContext, request: Request) -> Response:
    state = ctx.make_env().state()
    return json_response(200, {"episode_id": state.get("episode_id"),
                               "step_count": state.get("step_count", 0)})


def _mcp(ctx: ServerContext, request: Request) -> Response:
    return Response(200, dumps_bytes(jsonrpc.answer_http(request.body, ctx.make_env, ctx)))


#: path -> (method, handler); precomputed documents need no handler.
ROUTES: dict[str, tuple[str, Handler]] = {
    "/reset": ("POST", _reset),
    "/step": ("POST", _step),
    "/state": ("GET", _state),
    "/metadata": ("GET", _metadata),
    "/health": ("GET", lambda ctx, request: HEALTHY),
    "/schema": ("GET", lambda ctx, request: Response(200, ctx.current_documents().schema)),
    "/mcp": ("POST", _mcp),
    "/list_environments": ("GET", lambda ctx, request: Response(200, ctx.list_environments)),
    "/openapi.json": ("GET", lambda ctx, request: Response(200, ctx.openapi)),
}


def _task_route(ctx: ServerContext, request: Request, env_name: str, route: str) -> Response:
    """Body (422), then name (404), then the factory OpenEnv calls per request (500)."""
    if route == "splits":
        tasks.check_env_name(ctx.env, env_name)
        ctx.make_env()
        return json_response(200, tasks.splits(ctx.env))
    body = object_body(read_json_body(request.content_type, request.body), required=True)
    values = tasks.validate(route, body)
    tasks.check_env_name(ctx.env, env_name)
    ctx.make_env()
    return json_response(200, tasks.call(ctx.env, route, values))


def _match(path: str) -> tuple[str, Callable[[ServerContext, Request], Response]] | None:
    """(allowed method, handler) for a path, or None."""
    if path in ROUTES:
        return ROUTES[path]
    parts = path.split("/")
    if len(parts) == 3 and parts[0] == "" and parts[1]:
        env_name, route = parts[1], parts[2]
        if route == "splits":
            return "GET", lambda ctx, request: _task_route(ctx, request, env_name, route)
        if route in tasks.ROUTES:
            return "POST", lambda ctx, request: _task_route(ctx, request, env_name, route)
    return None


def _without_inventory(ctx: ServerContext, path: str) -> Response | None:
    """The `inventory-status` fault: `/list_environments` answers that status; with 404 the
    Task API routes are gone too, as on a server older than OpenEnv 0.5 (the OpenAPI
    document still lists them)."""
    status = ctx.faults.inventory_status
    if status is None:
        return None
    if path == "/list_environments":
        return NOT_FOUND if status == 404 else json_response(status, {"detail": "inventory fault"})
    if status == 404 and path not in ROUTES and _match(path) is not None:
        return NOT_FOUND
    return None


def handle(ctx: ServerContext, request: Request) -> Response:
    """Route and answer one HTTP request (authentication is checked by the caller)."""
    faulted = _without_inventory(ctx, request.path)
    if faulted is not None:
        return faulted
    matched = _match(request.path)
    if matched is None:
        if request.path.endswith("/") and _match(request.path.rstrip("/")) is not None:
            return _redirect(request)
        return NOT_FOUND
    method, handler = matched
    if request.method != method:
        return Response(405, b'{"detail":"Method Not Allowed"}',
                        headers=((b"allow", method.encode()),))
    try:
        return handler(ctx, request)
    except BodyError as exc:
        return json_response(exc.status, {"detail": exc.detail})
    except tasks.TaskError as exc:
        return json_response(exc.status, {"detail": exc.detail})
    except Exception:
        return INTERNAL_ERROR


def _redirect(request: Request) -> Response:
    """Starlette's `redirect_slashes`: 307 to the path without its trailing slash."""
    host = request.headers.get(b"host", b"127.0.0.1").decode("latin-1")
    location = f"http://{host}{request.path.rstrip('/')}"
    return Response(307, b"", None, ((b"location", location.encode("latin-1")),))
