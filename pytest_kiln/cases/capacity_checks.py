"""The session limit: provoking CAPACITY_REACHED and timing how fast a closed slot returns.

Both cases hold sessions open until the server refuses one: a probe of N
(``--kiln-capacity-probe``, default 64, well above OpenEnv's defaults of 1 and 8) admits
at most N sessions and then opens one more, so any limit up to N is seen, all within
``CAPACITY_PROBE_TIME_S``. The first session is acquired with capacity retries (a slot of
the suite's previous case may still be in the server's hands); the others are not, since
a refusal is what the probe looks for. The report records how many were admitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_kiln.cases.acquire import REFUSALS, close_raw, connect_raw, reset_session
from pytest_kiln.cases.context import CaseContext
from pytest_kiln.cases.frames import error_code, recv_object
from pytest_kiln.cases.model import (
    CAPACITY_PROBE_TIME_S,
    SLOT_RELEASE_BOUND_S,
    SLOT_RELEASE_POLL_S,
    SLOT_RELEASE_WAIT_S,
    CheckFailed,
    NotApplicable,
    describe,
)

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

    from kiln_verify.openenv.protocol.session import Session


@dataclass(slots=True)
class Filled:
    """Sessions held open (the first a client session, the rest raw sockets), and the data
    of the error frame that ended the probe (``None``: no refusal came)."""

    first: Session | None = None
    sockets: list[ClientConnection] = field(default_factory=list)
    refusal: dict[str, Any] | None = None
    timed_out: bool = False

    @property
    def admitted(self) -> int:
        return (self.first is not None) + len(self.sockets)


async def _admit(ctx: CaseContext, opened: int) -> tuple[ClientConnection | None,
                                                         dict[str, Any] | None]:
    """One more session on a raw socket, admitted by a ``state`` probe: the connection, or
    the data of the terminal error frame that refused it. Raw sockets keep the probe cheap
    (no health check, no client session per slot) when it holds dozens of slots."""
    from websockets.exceptions import ConnectionClosed

    client = await ctx.client()
    try:
        connection = await connect_raw(client, ctx.headers(), health=False)
    except Exception as exc:
        raise CheckFailed(f"opening session {opened} failed ({describe(exc)})") from None
    try:
        with contextlib.suppress(ConnectionClosed):
            await connection.send('{"type":"state"}')
        reply = await recv_object(connection, f"the admission probe of session {opened}")
    except BaseException:
        await close_raw(connection)
        raise
    code = error_code(reply)
    if code in REFUSALS:
        await close_raw(connection)
        data = reply["data"]
        assert isinstance(data, dict)
        return None, data
    return connection, None


@contextlib.asynccontextmanager
async def filled(ctx: CaseContext) -> AsyncIterator[Filled]:
    """Hold sessions open until a refusal, the probe limit (+1) or the time bound; close all."""
    client = await ctx.client()
    held = Filled()
    deadline = time.monotonic() + CAPACITY_PROBE_TIME_S
    try:
        held.first, _, retries = await reset_session(client, {})
        ctx.capacity_retries += retries
        while held.admitted <= ctx.capacity_probe:
            if time.monotonic() >= deadline:
                held.timed_out = True
                break
            connection, refusal = await _admit(ctx, held.admitted + 1)
            if refusal is not None:
                held.refusal = refusal
                break
            assert connection is not None
            held.sockets.append(connection)
        ctx.measurements["admitted_sessions"] = held.admitted
        ctx.measurements["capacity_probe"] = ctx.capacity_probe
        yield held
    finally:
        closing = [close_raw(socket, say_close=True) for socket in held.sockets]
        if held.first is not None:
            closing.append(held.first.close())
        await asyncio.gather(*closing, return_exceptions=True)


def _not_reached(ctx: CaseContext, held: Filled) -> NotApplicable:
    admitted = held.admitted
    if held.timed_out:
        return NotApplicable(
            f"{admitted} concurrent sessions were admitted before the {CAPACITY_PROBE_TIME_S:g} s "
            "probe bound; capacity not provokable"
        )
    return NotApplicable(
        f"{admitted} concurrent sessions were admitted (--kiln-capacity-probe "
        f"{ctx.capacity_probe}): the limit is above the probe; capacity not provokable"
    )


def _check_refusal(data: dict[str, Any], opened: int) -> int:
    """The refusal must be CAPACITY_REACHED with its counts; returns ``max_sessions``."""
    code = data.get("code")
    if code != "CAPACITY_REACHED":
        raise CheckFailed(f"session {opened} was refused with {str(code)[:40]}")
    active, maximum = data.get("active_sessions"), data.get("max_sessions")
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (active, maximum)):
        raise CheckFailed("CAPACITY_REACHED lacks integer active_sessions/max_sessions")
    assert isinstance(maximum, int)
    return maximum


async def check_capacity(ctx: CaseContext) -> str | None:
    async with filled(ctx) as held:
        if held.refusal is None:
            raise _not_reached(ctx, held)
        admitted = held.admitted
        maximum = _check_refusal(held.refusal, admitted + 1)
        ctx.measurements["max_sessions"] = maximum
    return f"CAPACITY_REACHED at session {admitted + 1} ({admitted} admitted, max {maximum})"


async def check_slot_release(ctx: CaseContext) -> str | None:
    """At capacity, close one session and time how long until a new one is admitted."""
    async with filled(ctx) as held:
        if held.refusal is None:
            raise _not_reached(ctx, held)
        _check_refusal(held.refusal, held.admitted + 1)
        started = time.monotonic()
        if held.sockets:
            await close_raw(held.sockets.pop(), say_close=True)
        else:
            assert held.first is not None
            first, held.first = held.first, None
            await first.close()
        refusals = 0
        while True:
            # The slot was free when the attempt that got in began; what follows (the new
            # environment being built before the probe is answered) is not release latency.
            attempt = time.monotonic()
            connection, refusal = await _admit(ctx, held.admitted + 1)
            elapsed = attempt - started
            if connection is not None:
                held.sockets.append(connection)
                break
            assert refusal is not None
            if refusal.get("code") != "CAPACITY_REACHED":
                raise CheckFailed(
                    f"the replacement session was refused with {str(refusal.get('code'))[:40]}")
            refusals += 1
            elapsed = time.monotonic() - started
            if elapsed >= SLOT_RELEASE_WAIT_S:
                ctx.measurements["slot_release_refusals"] = refusals
                raise CheckFailed(
                    f"the closed session's slot was still taken {SLOT_RELEASE_WAIT_S:g} s "
                    f"after the close ({refusals} refusals)"
                )
            await asyncio.sleep(SLOT_RELEASE_POLL_S)
    ctx.measurements["slot_release_ms"] = round(1000 * elapsed, 1)
    ctx.measurements["slot_release_refusals"] = refusals
    detail = f"slot free again {1000 * elapsed:.1f} ms after the close ({refusals} refusals)"
    if elapsed > SLOT_RELEASE_BOUND_S:
        raise CheckFailed(f"{detail}; more than {SLOT_RELEASE_BOUND_S:g} s")
    return detail
