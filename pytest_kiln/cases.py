"""The OpenEnv conformance inventory: stable case ids, levels, clauses and check functions.

Every case works against any OpenEnv server: a valid action is derived from the server's
action schema (or the reset observation's ``legal_actions``), a schema-violating one by
giving a required property the wrong JSON type. Checks run through
:class:`kiln_verify.openenv.client.OpenEnvClient`; only malformed frames (invalid JSON, a
non-object frame, an unknown type, a ping, the close handshake) use a raw ``websockets``
connection, because the client can never send those.

A check is an ``async`` function of a :class:`CaseContext`. It returns ``None`` (or a
note) when the requirement holds, raises :class:`CheckFailed` when it does not, and
:class:`NotApplicable` when the server cannot be probed for it. :func:`run_case` turns
that into a :class:`Verdict` according to the case's :class:`Level`: a failed MUST is
``FAILED``, a failed SHOULD ``NON-STRICT``, a failed MAY ``INFORMATIONAL``.

Nothing here is imported by the plugin module; websockets, httpx and the client are
imported when a case runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

    from kiln_verify.openenv.action_schema import ActionSchema
    from kiln_verify.openenv.client import OpenEnvClient
    from kiln_verify.openenv.session import Session
    from kiln_verify.openenv.wire import Observation

PROTOCOL_DOC = "openenv-wire-protocol.md"
#: Seconds one raw frame exchange may take before the case counts it as no answer.
FRAME_TIMEOUT_S = 5.0
#: Seconds a whole case may take.
CASE_TIMEOUT_S = 60.0
#: How many concurrent sessions ``capacity.capacity-reached`` opens at most.
CAPACITY_PROBE_SESSIONS = 8
#: How many steps ``post-done.frozen`` plays before giving up on reaching ``done``.
MAX_EPISODE_STEPS = 200
#: How many distinct schema-valid actions a step check tries.
MAX_ACTION_CANDIDATES = 8
DETERMINISM_SEED = 7


class Level(enum.StrEnum):
    MUST = "MUST"
    SHOULD = "SHOULD"
    MAY = "MAY"


class Verdict(enum.StrEnum):
    OK = "OK"
    NON_STRICT = "NON-STRICT"
    FAILED = "FAILED"
    INFORMATIONAL = "INFORMATIONAL"
    SKIPPED = "SKIPPED"


VERDICT_ORDER: tuple[Verdict, ...] = tuple(Verdict)


class CheckFailed(Exception):
    """The requirement does not hold; the message says what was expected and observed."""


class NotApplicable(Exception):
    """The server cannot be probed for this requirement (the verdict is SKIPPED)."""


@dataclass(frozen=True, slots=True)
class CaseResult:
    case_id: str
    level: Level
    clause: str
    verdict: Verdict
    detail: str
    duration_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case_id,
            "level": self.level.value,
            "clause": self.clause,
            "verdict": self.verdict.value,
            "detail": self.detail,
            "duration_s": round(self.duration_s, 4),
        }


Check = Callable[["CaseContext"], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class Case:
    """One conformance case: ``id`` is stable and never reused for another requirement."""

    id: str
    level: Level
    clause: str
    requirement: str
    check: Check = field(repr=False)


# --- context --------------------------------------------------------------------------------


class CaseContext:
    """What a check gets: the endpoint URL, the credential variable and helpers."""

    def __init__(self, url: str, *, credential_env: str | None = None) -> None:
        self.url = url
        self.credential_env = credential_env
        self._client: OpenEnvClient | None = None
        self._schema: ActionSchema | None = None

    async def client(self) -> OpenEnvClient:
        if self._client is None:
            from kiln_verify.openenv.client import OpenEnvClient

            self._client = OpenEnvClient(self.url, credential_env=self.credential_env)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def action_schema(self) -> ActionSchema:
        """The compiled ``/schema`` action schema (fetched once per case)."""
        if self._schema is None:
            from kiln_verify.openenv.action_schema import ActionSchema

            client = await self.client()
            _, schema = await client.request_json("GET", "/schema")
            if not isinstance(schema, dict) or "action" not in schema:
                raise NotApplicable("/schema has no action schema")
            try:
                self._schema = ActionSchema(schema["action"])
            except Exception as exc:
                raise NotApplicable(f"the action schema does not compile ({exc})") from None
        return self._schema

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        client = await self.client()
        session = await client.open_session()
        try:
            yield session
        finally:
            await session.close()

    async def valid_action(self, observation: Observation | None = None) -> dict[str, Any]:
        schema = await self.action_schema()
        for action in candidate_actions(schema.schema, observation):
            if not schema.issues(action):
                return action
        raise NotApplicable("no schema-valid action could be derived from the action schema")

    async def valid_actions(self, observation: Observation | None = None) -> list[dict[str, Any]]:
        """Distinct schema-valid candidate actions (at most ``MAX_ACTION_CANDIDATES``)."""
        schema = await self.action_schema()
        found: list[dict[str, Any]] = []
        for action in candidate_actions(schema.schema, observation):
            if action not in found and not schema.issues(action):
                found.append(action)
            if len(found) >= MAX_ACTION_CANDIDATES:
                break
        if not found:
            raise NotApplicable("no schema-valid action could be derived from the action schema")
        return found

    async def step_valid(
        self, session: Session, observation: Observation
    ) -> tuple[dict[str, Any], Observation]:
        """Step with the first derived action the environment executes.

        ``EXECUTION_ERROR`` is a conforming answer to an action the environment refuses on
        semantic grounds (a wrong-length answer, say); the next candidate is tried, and
        when every candidate is refused the case is not applicable.
        """
        from kiln_verify.errors import KilnError, RecoverableProtocolError

        refused = ""
        for action in await self.valid_actions(observation):
            try:
                return action, await session.step(action)
            except RecoverableProtocolError as exc:
                if exc.error is None or exc.error.code.value != "EXECUTION_ERROR":
                    raise CheckFailed(f"step failed ({_protocol(exc)})") from None
                refused = exc.rule
            except KilnError as exc:
                raise CheckFailed(f"step failed ({_protocol(exc)})") from None
        raise NotApplicable(f"the environment refused every derived action ({refused[:120]})")

    async def invalid_action(self, observation: Observation | None = None) -> dict[str, Any]:
        schema = await self.action_schema()
        valid = await self.valid_action(observation)
        action = violating_action(schema.schema, valid)
        if action is None or not schema.issues(action):
            raise NotApplicable("the action schema admits no generic schema violation")
        return action

    @contextlib.asynccontextmanager
    async def raw(self) -> AsyncIterator[ClientConnection]:
        """A raw WebSocket on ``/ws`` (health-checked first, bearer header if configured)."""
        from websockets.asyncio.client import connect

        from kiln_verify.limits import MAX_SERVER_FRAME_BYTES

        client = await self.client()
        await client.health()
        headers: dict[str, str] | None = None
        if self.credential_env is not None:
            from kiln_verify.openenv.credentials import read_bearer_token

            headers = read_bearer_token(self.credential_env).headers()
        connection = await connect(
            client.url.websocket_url,
            additional_headers=headers,
            open_timeout=FRAME_TIMEOUT_S,
            close_timeout=2,
            max_size=MAX_SERVER_FRAME_BYTES,
            proxy=None,
            ping_interval=None,
            user_agent_header="kiln-verify-conformance",
        )
        try:
            yield connection
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connection.close(), 2.0)

    async def exchange(self, ws: ClientConnection, text: str) -> dict[str, Any]:
        """Send one raw text frame and read one reply frame as a JSON object."""
        await ws.send(text)
        return await recv_object(ws, f"the reply to {text[:40]!r}")


async def recv_object(ws: ClientConnection, what: str) -> dict[str, Any]:
    from websockets.exceptions import ConnectionClosed

    from kiln_verify.core.jsonio import loads_object
    from kiln_verify.errors import KilnError
    from kiln_verify.limits import MAX_SERVER_FRAME_BYTES

    try:
        message = await asyncio.wait_for(ws.recv(), FRAME_TIMEOUT_S)
    except TimeoutError:
        raise CheckFailed(f"no frame within {FRAME_TIMEOUT_S:g} s for {what}") from None
    except ConnectionClosed as exc:
        raise CheckFailed(f"the server closed the connection instead of sending {what}"
                          f" (close code {exc.rcvd.code if exc.rcvd else 'none'})") from None
    if isinstance(message, bytes):
        raise CheckFailed(f"{what} was a binary frame; OpenEnv frames are text")
    try:
        return loads_object(message, max_bytes=MAX_SERVER_FRAME_BYTES)
    except KilnError as exc:
        raise CheckFailed(f"{what} is not a strict JSON object ({exc.code})") from None


def error_code(frame: dict[str, Any]) -> str | None:
    data = frame.get("data")
    if frame.get("type") != "error" or not isinstance(data, dict):
        return None
    code = data.get("code")
    return code if isinstance(code, str) else None


def expect_error(frame: dict[str, Any], code: str) -> None:
    got = error_code(frame)
    if got != code:
        shown = got if got is not None else f"a {str(frame.get('type'))[:20]!r} frame"
        raise CheckFailed(f"expected an error frame with code {code}, got {shown}")


async def expect_closed(ws: ClientConnection, what: str) -> int | None:
    """Wait for the server to close; a text frame first is a failure. Returns the code."""
    from websockets.exceptions import ConnectionClosed

    try:
        message = await asyncio.wait_for(ws.recv(), FRAME_TIMEOUT_S)
    except ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd is not None else None
    except TimeoutError:
        raise CheckFailed(f"the server did not close the connection {what}") from None
    raise CheckFailed(f"the server sent a {type(message).__name__} frame {what}")


# --- actions --------------------------------------------------------------------------------


def _resolve(root: dict[str, Any], node: Any, depth: int = 0) -> Any:
    """Follow local ``#/...`` references (a few levels); anything else is returned as is."""
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and depth < 8:
        ref: str = node["$ref"]
        if not ref.startswith("#/"):
            return node
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                return node
            target = target[part]
        node = target
        depth += 1
    return node


def _types(node: dict[str, Any]) -> list[str]:
    value = node.get("type")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def sample_value(root: dict[str, Any], node: Any, depth: int = 0) -> Iterator[Any]:
    """Plausible values for a property schema, most specific first."""
    node = _resolve(root, node)
    if not isinstance(node, dict) or depth > 6:
        yield "a"
        return
    if "const" in node:
        yield node["const"]
        return
    if isinstance(node.get("enum"), list) and node["enum"]:
        yield from node["enum"][:3]
        return
    if "default" in node and node["default"] is not None:
        yield node["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            for branch in branches:
                yield from sample_value(root, branch, depth + 1)
    for kind in _types(node):
        if kind == "integer":
            minimum = node.get("minimum", node.get("exclusiveMinimum"))
            yield int(minimum) + (1 if "exclusiveMinimum" in node else 0) if isinstance(
                minimum, int | float
            ) else 0
            yield 1
        elif kind == "number":
            minimum = node.get("minimum")
            yield float(minimum) if isinstance(minimum, int | float) else 0.0
            yield 1.0
        elif kind == "string":
            length = node.get("minLength")
            if isinstance(length, int) and 1 < length <= 64:
                yield "a" * length
            else:
                yield from ("a", "0", "1")
        elif kind == "boolean":
            yield False
        elif kind == "array":
            yield []
        elif kind == "object":
            yield _build_object(root, node, depth + 1)
        elif kind == "null":
            yield None


def _build_object(root: dict[str, Any], node: dict[str, Any], depth: int) -> dict[str, Any]:
    properties = node.get("properties")
    props: dict[str, Any] = properties if isinstance(properties, dict) else {}
    required = node.get("required")
    out: dict[str, Any] = {}
    for name in required if isinstance(required, list) else []:
        if isinstance(name, str):
            out[name] = next(iter(sample_value(root, props.get(name, {}), depth)), "a")
    return out


def candidate_actions(
    schema: Any, observation: Observation | None = None
) -> Iterator[dict[str, Any]]:
    """Candidate valid actions: ``legal_actions`` first, then values built from the schema."""
    root: dict[str, Any] = schema if isinstance(schema, dict) else {}
    node = _resolve(root, root)
    base = _build_object(root, node, 0) if isinstance(node, dict) else {}
    required = node.get("required") if isinstance(node, dict) else None
    names = [name for name in required or [] if isinstance(name, str)]
    legal = observation.observation.get("legal_actions") if observation is not None else None
    if isinstance(legal, list) and legal:
        if len(names) == 1:
            yield {names[0]: legal[0]}
        if isinstance(legal[0], dict):
            yield dict(legal[0])
    yield base
    properties = node.get("properties") if isinstance(node, dict) else None
    if isinstance(properties, dict):
        for name in names:
            for value in list(sample_value(root, properties.get(name, {})))[:4]:
                yield {**base, name: value}


def _wrong_type(root: dict[str, Any], node: Any) -> Any:
    types = set(_types(_resolve(root, node))) if isinstance(_resolve(root, node), dict) else set()
    if types & {"string"}:
        return 12345
    if types & {"integer", "number", "boolean", "null"}:
        return "not-a-valid-value"
    if types & {"object", "array"}:
        return 0
    return {"kiln-conformance": ["unexpected"]}


def violating_action(schema: Any, valid: dict[str, Any]) -> dict[str, Any] | None:
    """A schema-violating action: a required property with the wrong JSON type."""
    root: dict[str, Any] = schema if isinstance(schema, dict) else {}
    node = _resolve(root, root)
    if not isinstance(node, dict):
        return None
    properties = node.get("properties")
    props: dict[str, Any] = properties if isinstance(properties, dict) else {}
    required = node.get("required")
    for name in required if isinstance(required, list) else []:
        if isinstance(name, str):
            return {**valid, name: _wrong_type(root, props.get(name, {}))}
    if node.get("additionalProperties") is False:
        return {**valid, "kiln_conformance_unknown_property": 1}
    return None


# --- checks ---------------------------------------------------------------------------------


def _protocol(exc: BaseException) -> str:
    from kiln_verify.errors import KilnError

    if isinstance(exc, KilnError):
        return f"{exc.code}: {exc.rule}"
    return f"{type(exc).__name__}: {exc}"


async def check_health(ctx: CaseContext) -> str | None:
    client = await ctx.client()
    status, _ = await client.request_raw("GET", "/health", allow=frozenset(range(100, 600)))
    if status != 200:
        raise CheckFailed(f"GET /health answered HTTP {status}, expected 200")
    return None


async def _document(ctx: CaseContext, path: str) -> Any:
    client = await ctx.client()
    status, document = await client.request_json("GET", path, allow=frozenset(range(100, 600)))
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
    document = await _document(ctx, "/list_environments")
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
        raise CheckFailed(f"inspection failed ({_protocol(exc)})") from None
    return f"schema_sha256 {inspection.identity.schema_sha256}"


async def check_action_schema(ctx: CaseContext) -> str | None:
    from kiln_verify.openenv.action_schema import ActionSchema

    document = await _document(ctx, "/schema")
    if not isinstance(document, dict) or "action" not in document:
        raise CheckFailed("/schema has no action schema")
    try:
        ActionSchema(document["action"])
    except Exception as exc:
        raise CheckFailed(f"the action schema does not compile ({_protocol(exc)})") from None
    return None


async def _guard(coro: Awaitable[Any], what: str) -> Any:
    """Await a client exchange; a protocol or transport failure becomes CheckFailed."""
    from kiln_verify.errors import KilnError

    try:
        return await coro
    except KilnError as exc:
        raise CheckFailed(f"{what} failed ({_protocol(exc)})") from None


async def check_reset(ctx: CaseContext) -> str | None:
    async with ctx.session() as session:
        observation = await _guard(session.reset(), "reset")
    return f"reward {observation.reward.kind}, done {observation.done}"


async def check_step(ctx: CaseContext) -> str | None:
    async with ctx.session() as session:
        observation = await _guard(session.reset(), "reset")
        _, stepped = await ctx.step_valid(session, observation)
    return f"reward {stepped.reward.kind}, done {stepped.done}"


async def check_state(ctx: CaseContext) -> str | None:
    async with ctx.session() as session:
        await _guard(session.reset(), "reset")
        await _guard(session.state(), "state")
    return None


async def check_close(ctx: CaseContext) -> str | None:
    async with ctx.raw() as ws:
        reply = await ctx.exchange(ws, '{"type":"reset"}')
        if reply.get("type") != "observation":
            raise CheckFailed(f"reset was answered with a {str(reply.get('type'))[:20]!r} frame")
        await ws.send('{"type":"close"}')
        code = await expect_closed(ws, "after close (close has no reply)")
    return f"close code {code}"


async def _recoverable(ctx: CaseContext, text: str, code: str) -> str | None:
    async with ctx.raw() as ws:
        expect_error(await ctx.exchange(ws, text), code)
        reply = await ctx.exchange(ws, '{"type":"state"}')
        if reply.get("type") != "state":
            raise CheckFailed(f"after {code} the session did not answer state (it must stay open)")
    return None


async def check_invalid_json(ctx: CaseContext) -> str | None:
    return await _recoverable(ctx, '{"type": "reset", ', "INVALID_JSON")


async def check_unknown_type(ctx: CaseContext) -> str | None:
    return await _recoverable(ctx, '{"type":"kiln-conformance-unknown"}', "UNKNOWN_TYPE")


async def check_validation_error(ctx: CaseContext) -> str | None:
    from kiln_verify.errors import RecoverableProtocolError

    async with ctx.session() as session:
        observation = await _guard(session.reset(), "reset")
        action = await ctx.invalid_action(observation)
        try:
            await session.step(action)
        except RecoverableProtocolError as exc:
            if exc.error is None or exc.error.code.value != "VALIDATION_ERROR":
                raise CheckFailed(f"expected VALIDATION_ERROR, got {_protocol(exc)}") from None
        except Exception as exc:
            raise CheckFailed(f"expected VALIDATION_ERROR, got {_protocol(exc)}") from None
        else:
            raise CheckFailed("a schema-violating action was accepted")
        await _guard(session.state(), "state after VALIDATION_ERROR (the session must stay open)")
    return None


async def check_session_error(ctx: CaseContext) -> str | None:
    async with ctx.raw() as ws:
        expect_error(await ctx.exchange(ws, "[1, 2]"), "SESSION_ERROR")
        await expect_closed(ws, "after SESSION_ERROR (it is terminal)")
    return None


async def check_capacity(ctx: CaseContext) -> str | None:
    from kiln_verify.errors import KilnError, TerminalProtocolError

    client = await ctx.client()
    sessions: list[Session] = []
    try:
        for opened in range(1, CAPACITY_PROBE_SESSIONS + 1):
            session = await _guard(client.open_session(), "opening a session")
            sessions.append(session)
            try:
                await session.state()
            except TerminalProtocolError as exc:
                if exc.error is not None and exc.error.code.value == "CAPACITY_REACHED":
                    if exc.error.max_sessions is None or exc.error.active_sessions is None:
                        raise CheckFailed(
                            "CAPACITY_REACHED lacks active_sessions/max_sessions"
                        ) from None
                    return f"CAPACITY_REACHED at session {opened} (max {exc.error.max_sessions})"
                raise CheckFailed(f"session {opened} failed: {_protocol(exc)}") from None
            except KilnError as exc:
                raise CheckFailed(f"session {opened} failed: {_protocol(exc)}") from None
    finally:
        for session in sessions:
            await session.close()
    raise NotApplicable(
        f"{CAPACITY_PROBE_SESSIONS} concurrent sessions were admitted; capacity not provokable"
    )


async def check_reward(ctx: CaseContext) -> str | None:
    async with ctx.session() as session:
        first = await _guard(session.reset(), "reset")
        _, stepped = await ctx.step_valid(session, first)
    return f"reset reward {first.reward.kind}, step reward {stepped.reward.kind}"


async def check_determinism(ctx: CaseContext) -> str | None:
    async with ctx.session() as session:
        first = await _guard(session.reset({"seed": DETERMINISM_SEED}), "reset")
        second = await _guard(session.reset({"seed": DETERMINISM_SEED}), "second reset")
    if first.observation != second.observation or first.reward != second.reward:
        keys = sorted(
            key
            for key in set(first.observation) | set(second.observation)
            if first.observation.get(key) != second.observation.get(key)
        )
        raise CheckFailed(f"two resets with seed {DETERMINISM_SEED} differ in {keys[:8]}")
    return None


async def check_post_done(ctx: CaseContext) -> str | None:
    from kiln_verify.errors import RecoverableProtocolError

    async with ctx.session() as session:
        observation = await _guard(session.reset({"seed": DETERMINISM_SEED}), "reset")
        action = await ctx.valid_action(observation)
        for _ in range(MAX_EPISODE_STEPS):
            if observation.done:
                break
            action, observation = await ctx.step_valid(session, observation)
        else:
            raise NotApplicable(f"the episode did not end within {MAX_EPISODE_STEPS} steps")
        try:
            after = await session.step(action)
        except RecoverableProtocolError as exc:
            return f"step after done answered {_protocol(exc)}"
        except Exception as exc:
            raise CheckFailed(f"step after done failed ({_protocol(exc)})") from None
        if not after.done:
            raise CheckFailed("a step after done=true answered done=false")
    return None


async def check_ping(ctx: CaseContext) -> str | None:
    async with ctx.raw() as ws:
        started = time.monotonic()
        try:
            waiter = await ws.ping()
            await asyncio.wait_for(waiter, FRAME_TIMEOUT_S)
        except TimeoutError:
            raise CheckFailed(f"no pong within {FRAME_TIMEOUT_S:g} s") from None
        except Exception as exc:
            raise CheckFailed(f"ping failed ({_protocol(exc)})") from None
    return f"pong after {1000 * (time.monotonic() - started):.1f} ms"


async def check_task_api(ctx: CaseContext) -> str | None:
    from kiln_verify.errors import EnvironmentHttpStatus
    from kiln_verify.openenv.tasks import task_catalog

    client = await ctx.client()
    status, _ = await client.request_raw(
        "GET", "/list_environments", allow=frozenset(range(100, 600))
    )
    if status == 404:
        raise NotApplicable("no /list_environments (a pre-Task-API server)")
    try:
        catalog = await task_catalog(client)
    except EnvironmentHttpStatus as exc:
        raise CheckFailed(f"the Task API answered neither 501 nor a catalog ({exc.rule})") from None
    except Exception as exc:
        raise CheckFailed(f"the Task API catalog is invalid ({_protocol(exc)})") from None
    return f"task_api {catalog.task_api}, {len(catalog.splits)} splits"


def _clause(section: str) -> str:
    return f"{PROTOCOL_DOC} §{section}"


CASES: tuple[Case, ...] = (
    Case("health.status-200", Level.MUST, _clause("1"),
         "GET /health answers 200.", check_health),
    Case("discovery.metadata-shape", Level.MUST, _clause("3"),
         "GET /metadata answers a JSON object with string name and description.",
         check_metadata),
    Case("discovery.schema-shape", Level.MUST, _clause("3"),
         "GET /schema answers an object with action, observation and state.",
         check_schema_shape),
    Case("discovery.list-environments", Level.SHOULD, _clause("3"),
         "GET /list_environments answers a non-empty array of names.",
         check_list_environments),
    Case("discovery.openapi", Level.SHOULD, _clause("1"),
         "GET /openapi.json answers an OpenAPI document with info.version.", check_openapi),
    Case("discovery.identity", Level.SHOULD, "kiln-openenv-contract.md §8",
         "Kiln's inspection (health, four documents, identity digests) succeeds.",
         check_identity),
    Case("schema.action-valid-json-schema", Level.MUST, _clause("3"),
         "The action schema is a valid JSON Schema with no remote references.",
         check_action_schema),
    Case("ws.reset-observation", Level.MUST, _clause("2.3"),
         "reset is answered by exactly one well-formed observation frame.", check_reset),
    Case("ws.step-observation", Level.MUST, _clause("2.3"),
         "step with a schema-valid action is answered by one observation text frame.",
         check_step),
    Case("ws.state", Level.MUST, _clause("2.2"),
         "state is answered by one state frame.", check_state),
    Case("ws.close-no-reply", Level.MUST, _clause("2.1"),
         "close has no reply frame; the server closes the connection.", check_close),
    Case("ws.ping", Level.MUST, _clause("2.5"),
         "A client ping is answered with a pong.", check_ping),
    Case("error.invalid-json", Level.MUST, _clause("2.4"),
         "A frame that is not JSON gets INVALID_JSON and the session stays open.",
         check_invalid_json),
    Case("error.unknown-type", Level.MUST, _clause("2.4"),
         "An unknown message type gets UNKNOWN_TYPE and the session stays open.",
         check_unknown_type),
    Case("error.validation-error", Level.MUST, _clause("2.4"),
         "A schema-violating action gets VALIDATION_ERROR and the session stays open.",
         check_validation_error),
    Case("error.session-error-non-object", Level.MUST, _clause("2.4"),
         "A JSON frame that is not an object gets SESSION_ERROR, then the server closes.",
         check_session_error),
    Case("capacity.capacity-reached", Level.MUST, _clause("2.4"),
         "Beyond max sessions the server sends CAPACITY_REACHED with active and max counts.",
         check_capacity),
    Case("reward.typed", Level.MUST, _clause("5"),
         "Rewards are null, a boolean or a finite number.", check_reward),
    Case("determinism.reset-same-seed", Level.SHOULD, _clause("6"),
         "Two resets with the same seed give the same observation.", check_determinism),
    Case("post-done.frozen", Level.SHOULD, _clause("5"),
         "A step after done=true keeps done=true or is refused with a recoverable error.",
         check_post_done),
    Case("task-api.catalog-or-501", Level.MUST, _clause("4"),
         "The Task API answers a valid catalog or 501 (unsupported).", check_task_api),
)

CASES_BY_ID: dict[str, Case] = {case.id: case for case in CASES}


def _verdict_for_failure(level: Level) -> Verdict:
    return {
        Level.MUST: Verdict.FAILED,
        Level.SHOULD: Verdict.NON_STRICT,
        Level.MAY: Verdict.INFORMATIONAL,
    }[level]


async def run_case_async(
    case: Case, url: str, *, credential_env: str | None = None, timeout: float = CASE_TIMEOUT_S
) -> CaseResult:
    started = time.monotonic()
    ctx = CaseContext(url, credential_env=credential_env)
    verdict = Verdict.OK
    detail = ""
    try:
        async with asyncio.timeout(timeout):
            detail = await case.check(ctx) or ""
    except NotApplicable as exc:
        verdict, detail = Verdict.SKIPPED, str(exc)
    except CheckFailed as exc:
        verdict, detail = _verdict_for_failure(case.level), str(exc)
    except TimeoutError:
        verdict, detail = _verdict_for_failure(case.level), f"the case took over {timeout:g} s"
    except Exception as exc:  # a client error the check did not anticipate
        verdict, detail = _verdict_for_failure(case.level), _protocol(exc)
    finally:
        with contextlib.suppress(Exception):
            await ctx.aclose()
    client_redact = ctx._client.redact if ctx._client is not None else None
    if client_redact is not None:
        detail = client_redact(detail)
    return CaseResult(case.id, case.level, case.clause, verdict, detail,
                      time.monotonic() - started)


def run_case(
    case: Case, url: str, *, credential_env: str | None = None, timeout: float = CASE_TIMEOUT_S
) -> CaseResult:
    """Run one case on a fresh event loop (pytest-asyncio is not needed)."""
    return asyncio.run(run_case_async(case, url, credential_env=credential_env, timeout=timeout))
