"""The OpenEnv client: health, discovery, identity, sessions and capacity acquisition.

HTTP (httpx) is used only for ``/health``, discovery and the Task API; episodes run over
the WebSocket (:mod:`kiln_verify.openenv.protocol.session`). Every HTTP body is read through a
byte cap while it streams, redirects are answered with an error instead of being followed
(a redirect could move a bearer token to another origin), and a body that holds the
token in any spelling (raw before parsing, JSON-escaped in any decoded key or string
after) is refused as ``credential_reflected``
(:func:`~kiln_verify.openenv.protocol.credentials.read_guarded`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus, WebSocketException

from kiln_verify.core.jsonio import loads
from kiln_verify.errors import (
    CapacityExhausted,
    CredentialReflected,
    DiscoveryInvalid,
    EnvironmentHttpStatus,
    EnvironmentRedirect,
    EnvironmentTimeout,
    EnvironmentTransport,
    KilnError,
    LimitExceeded,
    TerminalProtocolError,
    UsageError,
    snippet,
)
from kiln_verify.limits import (
    CAPACITY_BACKOFF_MAX_S,
    CAPACITY_BACKOFF_STEP_S,
    HTTP_CONNECT_TIMEOUT_S,
    HTTP_REQUEST_TIMEOUT_S,
    MAX_CAPACITY_WAIT_S,
    MAX_DISCOVERY_BODY_BYTES,
    MAX_SERVER_FRAME_BYTES,
)
from kiln_verify.openenv.protocol.action_schema import ActionSchema, compile_action_schema
from kiln_verify.openenv.protocol.credentials import (
    BearerToken,
    check_body,
    check_header,
    check_transport,
    read_bearer_token,
    read_guarded,
    redact,
)
from kiln_verify.openenv.protocol.hints import connection_hint, status_hint
from kiln_verify.openenv.protocol.identity import (
    INVENTORY_ABSENT_STATUS,
    DiscoveryDocuments,
    EnvironmentIdentity,
    build_identity,
)
from kiln_verify.openenv.protocol.session import Session
from kiln_verify.openenv.protocol.urls import EnvironmentUrl, normalize_base_url
from kiln_verify.openenv.protocol.wire import ErrorCode, Observation

_INVENTORY_ABSENT = frozenset({INVENTORY_ABSENT_STATUS})


@dataclass(frozen=True, slots=True)
class Inspection:
    """What ``inspect()`` learned: the identity, the raw documents, the compiled schema."""

    identity: EnvironmentIdentity
    documents: DiscoveryDocuments
    action_schema: ActionSchema

    @property
    def environment_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = self.documents.environment_schema
        return schema


@dataclass(frozen=True, slots=True)
class CapacityAcquisition:
    """A session that got a slot, the probe's result and how many retries it took."""

    session: Session
    retries: int
    observation: Observation | None = None


def _check_timeout(name: str, value: float) -> float:
    if not isinstance(value, int | float) or not 0 < value <= MAX_CAPACITY_WAIT_S:
        raise UsageError(f"{name} must be a number of seconds in (0, {MAX_CAPACITY_WAIT_S:g}]")
    return float(value)


def _parse_discovery(body: bytes | str) -> Any:
    return loads(body, max_bytes=MAX_DISCOVERY_BODY_BYTES)


class OpenEnvClient:
    """A client for one OpenEnv server; use as ``async with OpenEnvClient(url) as client``.

    ``credential_env`` names the environment variable holding a bearer token; it is read
    here, once, and refused for plain http unless the host is loopback.
    """

    def __init__(
        self,
        base_url: str,
        *,
        credential_env: str | None = None,
        request_timeout: float = HTTP_REQUEST_TIMEOUT_S,
        connect_timeout: float = HTTP_CONNECT_TIMEOUT_S,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.url: EnvironmentUrl = normalize_base_url(base_url)
        self.request_timeout = _check_timeout("request_timeout", request_timeout)
        self.connect_timeout = _check_timeout("connect_timeout", connect_timeout)
        self._token: BearerToken | None = None
        if credential_env is not None:
            self._token = read_bearer_token(credential_env, environ)
        check_transport(self._token, self.url)
        headers = self._token.headers() if self._token is not None else {}
        self._http = httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,
            headers=headers,
            timeout=httpx.Timeout(self.request_timeout, connect=self.connect_timeout),
            # Redirects are never followed, so a plain-http client never speaks TLS: skip
            # building a verifying TLS context (loading the CA bundle costs more CPU than a
            # whole conformance case). https keeps full verification.
            verify=self.url.is_https,
        )

    @property
    def authenticated(self) -> bool:
        return self._token is not None

    def redact(self, text: str) -> str:
        return redact(self._token, text)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> OpenEnvClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- HTTP --------------------------------------------------------------------------------

    async def request_raw(
        self, method: str, path: str, *, json_body: Any = None, allow: frozenset[int] = frozenset()
    ) -> tuple[int, bytes]:
        """Status and body (at most MAX_DISCOVERY_BODY_BYTES), within the request timeout.

        A 3xx is an error naming the redirect; other non-200 statuses not in ``allow``
        raise :class:`EnvironmentHttpStatus` without quoting the body.
        """
        url = self.url.join(path)
        where = f"{method} {url}"
        try:
            async with asyncio.timeout(self.request_timeout):
                async with self._http.stream(method, url, json=json_body) as response:
                    status = response.status_code
                    if 300 <= status < 400:
                        location = response.headers.get("location", "")
                        check_header(self._token, location, f"the redirect of {where}")
                        redirect = EnvironmentRedirect(
                            f"{where} answered {status} redirecting to {snippet(location)}"
                        )
                        redirect.http_status = status
                        raise redirect
                    body = await self._read_capped(response, where)
        except TimeoutError:
            raise EnvironmentTimeout(
                f"{where} took longer than {self.request_timeout:g} s"
            ) from None
        except httpx.TimeoutException:
            raise EnvironmentTimeout(f"{where} timed out connecting or reading") from None
        except httpx.HTTPError as exc:
            raise EnvironmentTransport(
                f"{where} failed: {type(exc).__name__}: {snippet(self.redact(str(exc)))}",
                hint=connection_hint(self.url, exc),
            ) from None
        check_body(self._token, body, f"the response to {where}")
        if status != 200 and status not in allow:
            refused = EnvironmentHttpStatus(
                f"{where} answered HTTP {status}, expected 200",
                hint=status_hint(self.url, path, status),
            )
            refused.http_status = status
            raise refused
        return status, body

    async def _read_capped(self, response: httpx.Response, where: str) -> bytes:
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_DISCOVERY_BODY_BYTES:
            raise LimitExceeded(
                f"the body of {where}",
                limit="MAX_DISCOVERY_BODY_BYTES",
                bound=MAX_DISCOVERY_BODY_BYTES,
                observed=int(declared),
            )
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_DISCOVERY_BODY_BYTES:
                raise LimitExceeded(
                    f"the body of {where}",
                    limit="MAX_DISCOVERY_BODY_BYTES",
                    bound=MAX_DISCOVERY_BODY_BYTES,
                    observed=size,
                )
            chunks.append(chunk)
        return b"".join(chunks)

    async def request_json(
        self, method: str, path: str, *, json_body: Any = None, allow: frozenset[int] = frozenset()
    ) -> tuple[int, Any]:
        """Like :meth:`request_raw`; a 200 body is parsed strictly (others are not parsed)."""
        status, body = await self.request_raw(method, path, json_body=json_body, allow=allow)
        if status != 200:
            return status, None
        try:
            return status, read_guarded(
                self._token, body, f"the response to {method} {path}", _parse_discovery
            )
        except CredentialReflected:
            raise
        except KilnError as exc:
            raise DiscoveryInvalid(
                f"{method} {path} is not strict JSON ({exc.code}: {exc.rule})"
            ) from None

    async def health(self) -> None:
        """``GET /health`` must answer 200; the body is ignored (servers differ there)."""
        await self.request_raw("GET", "/health")

    # -- discovery ---------------------------------------------------------------------------

    async def inspect(self) -> Inspection:
        """Health, then the four discovery documents concurrently; identity and schema.

        A 404 on ``/list_environments`` means the server predates that route (openenv-core
        0.3.0, openenv 0.3.1 and 0.4.0, all still deployed): the identity then advertises
        no names and the discovery preimage records ``null`` there (docs/contract.md,
        "Servers without /list_environments"). Kiln's own inspection fails on that 404;
        we depart from it so that such servers can be inspected, collected from and
        replayed. Any other status still fails inspection.
        """
        await self.health()
        metadata, schema, environments, openapi = await asyncio.gather(
            self.request_json("GET", "/metadata"),
            self.request_json("GET", "/schema"),
            self.request_json("GET", "/list_environments", allow=_INVENTORY_ABSENT),
            self.request_json("GET", "/openapi.json"),
        )
        documents = DiscoveryDocuments(
            metadata[1],
            schema[1],
            environments[1],
            openapi[1],
            inventory_route=environments[0] != INVENTORY_ABSENT_STATUS,
        )
        identity = build_identity(
            base_url=self.url.base_url,
            websocket_url=self.url.websocket_url,
            authenticated=self.authenticated,
            documents=documents,
        )
        action = compile_action_schema(documents.environment_schema["action"])
        return Inspection(identity, documents, action)

    # -- sessions ----------------------------------------------------------------------------

    async def open_session(self, *, health: bool = True) -> Session:
        """Health check, then the WebSocket upgrade (with the bearer header if configured).
        ``health=False`` skips the check for a caller that inspected the server itself (the
        TRL factory, which opens a session at each instance's first reset): a server that
        went away still fails the upgrade, as ``environment_transport`` naming the URL."""
        if health:
            await self.health()
        headers = self._token.headers() if self._token is not None else None
        try:
            connection = await connect(
                self.url.websocket_url,
                additional_headers=headers,
                open_timeout=self.connect_timeout,
                max_size=MAX_SERVER_FRAME_BYTES,
                proxy=None,
                user_agent_header="kiln-verify",
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            refused = EnvironmentHttpStatus(
                f"the WebSocket upgrade to {self.url.websocket_url} answered HTTP {status}",
                hint=status_hint(self.url, "/ws", status),
            )
            refused.http_status = status
            raise refused from None
        except TimeoutError:
            raise EnvironmentTimeout(
                f"the WebSocket upgrade took longer than {self.connect_timeout:g} s"
            ) from None
        except (OSError, WebSocketException) as exc:
            raise EnvironmentTransport(
                f"the WebSocket upgrade to {self.url.websocket_url} failed: {type(exc).__name__}",
                hint=connection_hint(self.url, exc),
            ) from None
        return Session(connection, request_timeout=self.request_timeout, token=self._token)

    async def open_session_with_capacity(
        self,
        wait_seconds: float,
        *,
        reset_data: Mapping[str, Any] | None = None,
        health: bool = True,
    ) -> CapacityAcquisition:
        """Open a session that has a slot, retrying on CAPACITY_REACHED within a bound.

        OpenEnv reports capacity as an unsolicited error frame right after the upgrade,
        so admission is only known after a first exchange: the probe is the ``reset``
        (when ``reset_data`` is given; its observation is returned) or else a read-only
        ``state``. Retries back off ``min(0.25 s x retries, 2 s, remaining)``.
        """
        if not isinstance(wait_seconds, int | float) or not (
            0 <= wait_seconds <= MAX_CAPACITY_WAIT_S
        ):
            raise UsageError(f"wait_seconds must be in [0, {MAX_CAPACITY_WAIT_S:g}]")
        deadline = time.monotonic() + wait_seconds
        retries = 0
        while True:
            session = await self.open_session(health=health)
            try:
                if reset_data is not None:
                    observation: Observation | None = await session.reset(reset_data)
                else:
                    observation = None
                    await session.state()
                return CapacityAcquisition(session, retries, observation)
            except TerminalProtocolError as exc:
                await session.close()
                if exc.error is None or exc.error.code is not ErrorCode.CAPACITY_REACHED:
                    raise
            except BaseException:
                await session.close()
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CapacityExhausted(
                    f"no session slot within {wait_seconds:g} s after {retries} retries"
                )
            retries += 1
            await asyncio.sleep(
                min(CAPACITY_BACKOFF_STEP_S * retries, CAPACITY_BACKOFF_MAX_S, remaining)
            )
