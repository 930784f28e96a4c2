"""What a check gets: the endpoint, the credential variable, and helpers to drive it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_kiln.cases.acquire import admitted_raw, close_raw, reset_session
from pytest_kiln.cases.actions import ActionBuilder, violating_action
from pytest_kiln.cases.model import (
    DEFAULT_CAPACITY_PROBE,
    FRAME_TIMEOUT_S,
    MAX_ACTION_CANDIDATES,
    CheckFailed,
    NotApplicable,
    describe,
    protocol_code,
)

if TYPE_CHECKING:
    import httpx
    from websockets.asyncio.client import ClientConnection

    from kiln_verify.openenv.protocol.action_schema import ActionSchema
    from kiln_verify.openenv.protocol.client import OpenEnvClient
    from kiln_verify.openenv.protocol.session import Session
    from kiln_verify.openenv.protocol.wire import Observation

T = TypeVar("T")


async def guard(coro: Awaitable[T], what: str) -> T:
    """Await a client exchange; a protocol or transport failure becomes CheckFailed."""
    from kiln_verify.errors import KilnError

    try:
        return await coro
    except KilnError as exc:
        raise CheckFailed(f"{what} failed ({describe(exc)})") from None


def compile_action_schema(document: Any, failure: type[Exception]) -> ActionSchema:
    """Compile the ``action`` member of a ``/schema`` document, or raise ``failure``.

    Through the client's shared cache of compiled schemas: every case is a fresh context, and
    without it each of a run's cases that needs the schema re-ran jsonschema's metaschema
    check on the same document (about 10 ms each, 2 s of a full oracle inventory)."""
    from kiln_verify.openenv.protocol.action_schema import compile_action_schema as compiled

    if not isinstance(document, dict) or "action" not in document:
        raise failure("/schema has no action schema")
    try:
        return compiled(document["action"])
    except Exception as exc:
        raise failure(f"the action schema does not compile ({describe(exc)})") from None


#: How many built candidates are checked against the schema before giving up.
MAX_CANDIDATES_TRIED = 64


class CaseContext:
    """One case's view of an endpoint; the client is opened lazily and closed by the runner.

    ``capacity_retries`` counts the CAPACITY_REACHED refusals the case's acquisitions
    absorbed, and ``measurements`` holds what a case measured; both reach the report.
    """

    def __init__(self, url: str, *, credential_env: str | None = None,
                 capacity_probe: int = DEFAULT_CAPACITY_PROBE) -> None:
        self.url = url
        self.credential_env = credential_env
        self.capacity_probe = capacity_probe
        self.capacity_retries = 0
        self.measurements: dict[str, int | float] = {}
        self._client: OpenEnvClient | None = None
        self._schema: ActionSchema | None = None
        self._raw_http: httpx.AsyncClient | None = None

    async def client(self) -> OpenEnvClient:
        if self._client is None:
            from kiln_verify.openenv.protocol.client import OpenEnvClient

            self._client = OpenEnvClient(self.url, credential_env=self.credential_env)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        if self._raw_http is not None:
            await self._raw_http.aclose()

    async def raw_http(self) -> httpx.AsyncClient:
        """An httpx client for requests the OpenEnv client cannot make (a body that is not
        JSON): no redirects, no proxy from the environment, the bearer header if configured.
        For a plain-http URL no TLS context is built (that costs more than the request)."""
        if self._raw_http is None:
            import httpx

            client = await self.client()
            self._raw_http = httpx.AsyncClient(
                follow_redirects=False, trust_env=False, timeout=FRAME_TIMEOUT_S,
                headers=self.headers(), verify=client.url.is_https,
            )
        return self._raw_http

    def redact(self, text: str) -> str:
        """``text`` with the bearer token removed (unchanged when no client was opened)."""
        return self._client.redact(text) if self._client is not None else text

    def headers(self) -> dict[str, str] | None:
        """The bearer header for raw connections, if a credential is configured."""
        if self.credential_env is None:
            return None
        from kiln_verify.openenv.protocol.credentials import read_bearer_token

        return read_bearer_token(self.credential_env).headers()

    async def action_schema(self) -> ActionSchema:
        """The compiled ``/schema`` action schema (fetched once per case)."""
        if self._schema is None:
            client = await self.client()
            _, schema = await client.request_json("GET", "/schema")
            self._schema = compile_action_schema(schema, NotApplicable)
        return self._schema

    @contextlib.asynccontextmanager
    async def session(
        self, reset: Mapping[str, Any] | None = None
    ) -> AsyncIterator[tuple[Session, Observation]]:
        """A fresh session admitted by its first reset (``reset`` is its payload, ``{}`` by
        default), acquired with capacity retries; yields the session and that observation."""
        client = await self.client()
        session, observation, retries = await reset_session(client, reset or {})
        self.capacity_retries += retries
        try:
            yield session, observation
        finally:
            await session.close()

    async def valid_actions(self, observation: Observation | None = None) -> list[dict[str, Any]]:
        """Distinct schema-valid candidate actions (at most ``MAX_ACTION_CANDIDATES``).

        When none validates, the case is not applicable, and the message names the schema
        keyword that stopped the builder, or the one every candidate violated.
        """
        schema = await self.action_schema()
        builder = ActionBuilder(schema.schema)
        found: list[dict[str, Any]] = []
        first_issue = ""
        for tried, action in enumerate(builder.candidates(observation)):
            if tried >= MAX_CANDIDATES_TRIED:
                break
            if action in found:
                continue
            issues = schema.issues(action)
            if not issues:
                found.append(action)
            elif not first_issue:
                first_issue = f"; candidates violate {issues[0].describe()}"
            if len(found) >= MAX_ACTION_CANDIDATES:
                break
        if not found:
            raise NotApplicable(
                "no schema-valid action could be derived from the action schema"
                + (builder.stopped_by() or first_issue)
            )
        return found

    async def valid_action(self, observation: Observation | None = None) -> dict[str, Any]:
        return (await self.valid_actions(observation))[0]

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
            except KilnError as exc:
                if not (
                    isinstance(exc, RecoverableProtocolError)
                    and protocol_code(exc) == "EXECUTION_ERROR"
                ):
                    raise CheckFailed(f"step failed ({describe(exc)})") from None
                refused = exc.rule
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
        """A raw WebSocket on ``/ws`` whose session answered a ``state`` probe (acquired
        with capacity retries; bearer header if configured)."""
        client = await self.client()
        connection, retries = await admitted_raw(client, self.headers())
        self.capacity_retries += retries
        try:
            yield connection
        finally:
            await close_raw(connection)
