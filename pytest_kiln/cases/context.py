"""What a check gets: the endpoint, the credential variable, and helpers to drive it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_kiln.cases.actions import candidate_actions, violating_action
from pytest_kiln.cases.model import (
    FRAME_TIMEOUT_S,
    MAX_ACTION_CANDIDATES,
    CheckFailed,
    NotApplicable,
    describe,
    protocol_code,
)

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

    from kiln_verify.openenv.action_schema import ActionSchema
    from kiln_verify.openenv.client import OpenEnvClient
    from kiln_verify.openenv.session import Session
    from kiln_verify.openenv.wire import Observation

T = TypeVar("T")


async def guard(coro: Awaitable[T], what: str) -> T:
    """Await a client exchange; a protocol or transport failure becomes CheckFailed."""
    from kiln_verify.errors import KilnError

    try:
        return await coro
    except KilnError as exc:
        raise CheckFailed(f"{what} failed ({describe(exc)})") from None


def compile_action_schema(document: Any, failure: type[Exception]) -> ActionSchema:
    """Compile the ``action`` member of a ``/schema`` document, or raise ``failure``."""
    from kiln_verify.openenv.action_schema import ActionSchema

    if not isinstance(document, dict) or "action" not in document:
        raise failure("/schema has no action schema")
    try:
        return ActionSchema(document["action"])
    except Exception as exc:
        raise failure(f"the action schema does not compile ({describe(exc)})") from None


class CaseContext:
    """One case's view of an endpoint; the client is opened lazily and closed by the runner."""

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

    def redact(self, text: str) -> str:
        """``text`` with the bearer token removed (unchanged when no client was opened)."""
        return self._client.redact(text) if self._client is not None else text

    async def action_schema(self) -> ActionSchema:
        """The compiled ``/schema`` action schema (fetched once per case)."""
        if self._schema is None:
            client = await self.client()
            _, schema = await client.request_json("GET", "/schema")
            self._schema = compile_action_schema(schema, NotApplicable)
        return self._schema

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        client = await self.client()
        session = await client.open_session()
        try:
            yield session
        finally:
            await session.close()

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
