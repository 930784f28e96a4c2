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
from typing import TYPE_CHECKING

from pytest_kiln.cases.acquire import reset_session
from pytest_kiln.cases.context import CaseContext
from pytest_kiln.cases.model import (
    CAPACITY_PROBE_TIME_S,
    SLOT_RELEASE_BOUND_S,
    SLOT_RELEASE_POLL_S,
    SLOT_RELEASE_WAIT_S,
    CheckFailed,
    NotApplicable,
    describe,
    protocol_code,
)

if TYPE_CHECKING:
    from kiln_verify.errors import TerminalProtocolError
    from kiln_verify.openenv.client import OpenEnvClient
    from kiln_verify.openenv.session import Session


@dataclass(slots=True)
class Filled:
    """Sessions held open, and the refusal that ended the probe (``None``: none came)."""

    sessions: list[Session] = field(default_factory=list)
    refusal: TerminalProtocolError | None = None
    timed_out: bool = False


async def _admit(client: OpenEnvClient, opened: int) -> tuple[Session | None,
                                                            TerminalProtocolError | None]:
    """Open one more session; a terminal refusal is returned, anything else fails."""
    from kiln_verify.errors import KilnError, TerminalProtocolError

    try:
        session = await client.open_session()
    except KilnError as exc:
        raise CheckFailed(f"opening session {opened} failed ({describe(exc)})") from None
    try:
        await session.state()
    except TerminalProtocolError as exc:
        await session.close()
        return None, exc
    except KilnError as exc:
        await session.close()
        raise CheckFailed(f"session {opened} failed: {describe(exc)}") from None
    return session, None


@contextlib.asynccontextmanager
async def filled(ctx: CaseContext) -> AsyncIterator[Filled]:
    """Hold sessions open until a refusal, the probe limit or the time bound; close all."""
    client = await ctx.client()
    held = Filled()
    deadline = time.monotonic() + CAPACITY_PROBE_TIME_S
    try:
        first, _, retries = await reset_session(client, {})
        ctx.capacity_retries += retries
        held.sessions.append(first)
        while len(held.sessions) <= ctx.capacity_probe:
            if time.monotonic() >= deadline:
                held.timed_out = True
                break
            session, refusal = await _admit(client, len(held.sessions) + 1)
            if refusal is not None:
                held.refusal = refusal
                break
            assert session is not None
            held.sessions.append(session)
        ctx.measurements["admitted_sessions"] = len(held.sessions)
        ctx.measurements["capacity_probe"] = ctx.capacity_probe
        yield held
    finally:
        await asyncio.gather(*(session.close() for session in held.sessions),
                             return_exceptions=True)


def _not_reached(ctx: CaseContext, held: Filled) -> NotApplicable:
    admitted = len(held.sessions)
    if held.timed_out:
        return NotApplicable(
            f"{admitted} concurrent sessions were admitted before the {CAPACITY_PROBE_TIME_S:g} s "
            "probe bound; capacity not provokable"
        )
    return NotApplicable(
        f"{admitted} concurrent sessions were admitted (--kiln-capacity-probe "
        f"{ctx.capacity_probe}): the limit is above the probe; capacity not provokable"
    )


def _check_refusal(exc: TerminalProtocolError, opened: int) -> int:
    """The refusal must be CAPACITY_REACHED with its counts; returns ``max_sessions``."""
    if protocol_code(exc) != "CAPACITY_REACHED":
        raise CheckFailed(f"session {opened} failed: {describe(exc)}") from None
    error = exc.error
    if error is None or error.max_sessions is None or error.active_sessions is None:
        raise CheckFailed("CAPACITY_REACHED lacks active_sessions/max_sessions") from None
    return int(error.max_sessions)


async def check_capacity(ctx: CaseContext) -> str | None:
    async with filled(ctx) as held:
        if held.refusal is None:
            raise _not_reached(ctx, held)
        admitted = len(held.sessions)
        maximum = _check_refusal(held.refusal, admitted + 1)
        ctx.measurements["max_sessions"] = maximum
    return f"CAPACITY_REACHED at session {admitted + 1} ({admitted} admitted, max {maximum})"


async def check_slot_release(ctx: CaseContext) -> str | None:
    """At capacity, close one session and time how long until a new one is admitted."""
    client = await ctx.client()
    async with filled(ctx) as held:
        if held.refusal is None:
            raise _not_reached(ctx, held)
        _check_refusal(held.refusal, len(held.sessions) + 1)
        released = held.sessions.pop()
        started = time.monotonic()
        await released.close()
        refusals = 0
        while True:
            # The slot was free when the attempt that got in began; what follows (the new
            # environment being built before the probe is answered) is not release latency.
            attempt = time.monotonic()
            session, refusal = await _admit(client, len(held.sessions) + 1)
            elapsed = attempt - started
            if session is not None:
                held.sessions.append(session)
                break
            elapsed = time.monotonic() - started
            assert refusal is not None
            if protocol_code(refusal) != "CAPACITY_REACHED":
                raise CheckFailed(f"the replacement session failed: {describe(refusal)}")
            refusals += 1
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
