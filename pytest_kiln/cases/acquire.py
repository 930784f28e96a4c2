"""Getting a session slot the way the collector does, for client sessions and raw sockets.

OpenEnv reports a full server with an unsolicited ``CAPACITY_REACHED`` frame after the
upgrade, and a server frees a slot only once it has finished with the socket that held it:
after the close, after an in-flight step, and, for a socket that closed while its
environment was still being built, after the factory returns. A case that connects the
moment the previous case closed can therefore be refused by the suite's own previous
socket. Every case acquires its sessions here: on ``CAPACITY_REACHED`` the socket is
closed and the attempt retried with the collector's backoff
(``min(CAPACITY_BACKOFF_STEP_S x retries, CAPACITY_BACKOFF_MAX_S, remaining)``) for at most
``SESSION_WAIT_S``, so a MUST case never fails because of a slot the suite itself just
gave back.

Client sessions are admitted by their first ``reset`` (the collector's probe); raw sockets
by a read-only ``state`` frame, whose reply (a state, or any recoverable error) proves the
session exists before the case sends what it came to send.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_kiln.cases.frames import error_code, recv_object
from pytest_kiln.cases.model import FRAME_TIMEOUT_S, SESSION_WAIT_S, CheckFailed, describe

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

    from kiln_verify.openenv.protocol.client import OpenEnvClient
    from kiln_verify.openenv.protocol.session import Session
    from kiln_verify.openenv.protocol.wire import Observation

#: The terminal codes a server sends instead of admitting a session.
REFUSALS = frozenset({"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"})


def backoff(retries: int, remaining: float) -> float:
    """The collector's capacity backoff (kiln-openenv-contract §7.2)."""
    from kiln_verify.limits import CAPACITY_BACKOFF_MAX_S, CAPACITY_BACKOFF_STEP_S

    return max(0.0, min(CAPACITY_BACKOFF_STEP_S * retries, CAPACITY_BACKOFF_MAX_S, remaining))


async def reset_session(
    client: OpenEnvClient, reset: Mapping[str, Any], wait_s: float = SESSION_WAIT_S
) -> tuple[Session, Observation, int]:
    """A session admitted by its first ``reset``: (session, observation, capacity retries)."""
    from kiln_verify.errors import CapacityExhausted, KilnError

    try:
        acquired = await client.open_session_with_capacity(wait_s, reset_data=reset)
    except CapacityExhausted as exc:
        raise CheckFailed(
            f"no session slot within {wait_s:g} s: every attempt got CAPACITY_REACHED "
            f"({exc.rule}); the suite had closed all of its own sessions"
        ) from None
    except KilnError as exc:
        raise CheckFailed(f"reset failed ({describe(exc)})") from None
    assert acquired.observation is not None
    return acquired.session, acquired.observation, acquired.retries


async def connect_raw(client: OpenEnvClient, headers: dict[str, str] | None, *,
                      health: bool = True) -> ClientConnection:
    """One raw ``/ws`` connection (health-checked first unless told not to), with bounded
    timeouts."""
    from websockets.asyncio.client import connect

    from kiln_verify.limits import MAX_SERVER_FRAME_BYTES

    if health:
        await client.health()
    return await connect(
        client.url.websocket_url,
        additional_headers=headers,
        open_timeout=FRAME_TIMEOUT_S,
        close_timeout=2,
        max_size=MAX_SERVER_FRAME_BYTES,
        proxy=None,
        ping_interval=None,
        user_agent_header="kiln-verify-conformance",
    )


async def close_raw(connection: ClientConnection, *, say_close: bool = False) -> None:
    """Close a raw connection; ``say_close`` sends OpenEnv's ``close`` message first."""
    with contextlib.suppress(Exception):
        if say_close:
            await asyncio.wait_for(connection.send('{"type":"close"}'), 1.0)
        await asyncio.wait_for(connection.close(), 2.0)


async def admitted_raw(
    client: OpenEnvClient, headers: dict[str, str] | None, wait_s: float = SESSION_WAIT_S
) -> tuple[ClientConnection, int]:
    """A raw socket whose session answered a ``state`` probe: (connection, retries)."""
    from websockets.exceptions import ConnectionClosed

    deadline = time.monotonic() + wait_s
    retries = 0
    while True:
        try:
            connection = await connect_raw(client, headers)
        except Exception as exc:
            raise CheckFailed(f"the WebSocket upgrade failed ({describe(exc)})") from None
        try:
            # A refusal may already be queued (it is unsolicited) and the socket closed
            # behind it: the send can fail while the frame is still there to read.
            with contextlib.suppress(ConnectionClosed):
                await connection.send('{"type":"state"}')
            reply = await recv_object(connection, "the admission probe (state)")
        except BaseException:
            await close_raw(connection)
            raise
        code = error_code(reply)
        if code not in REFUSALS:
            return connection, retries
        await close_raw(connection)
        if code != "CAPACITY_REACHED":
            raise CheckFailed(f"the server refused the session with {code}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CheckFailed(
                f"no session slot within {wait_s:g} s: every attempt got CAPACITY_REACHED "
                f"({retries} retries); the suite had closed all of its own sessions"
            )
        retries += 1
        await asyncio.sleep(backoff(retries, remaining))
