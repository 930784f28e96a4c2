"""Error-path checks: malformed frames, schema violations and the session limit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_kiln.cases.context import CaseContext, guard
from pytest_kiln.cases.frames import exchange, expect_closed, expect_error
from pytest_kiln.cases.model import (
    CAPACITY_PROBE_SESSIONS,
    CheckFailed,
    NotApplicable,
    describe,
    protocol_code,
)

if TYPE_CHECKING:
    from kiln_verify.errors import TerminalProtocolError
    from kiln_verify.openenv.session import Session


async def _recoverable(ctx: CaseContext, text: str, code: str) -> str | None:
    """``text`` gets an error frame with ``code`` and the session still answers state."""
    async with ctx.raw() as ws:
        expect_error(await exchange(ws, text), code)
        reply = await exchange(ws, '{"type":"state"}')
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
        observation = await guard(session.reset(), "reset")
        action = await ctx.invalid_action(observation)
        try:
            await session.step(action)
        except Exception as exc:
            if not (
                isinstance(exc, RecoverableProtocolError)
                and protocol_code(exc) == "VALIDATION_ERROR"
            ):
                raise CheckFailed(f"expected VALIDATION_ERROR, got {describe(exc)}") from None
        else:
            raise CheckFailed("a schema-violating action was accepted")
        await guard(session.state(), "state after VALIDATION_ERROR (the session must stay open)")
    return None


async def check_session_error(ctx: CaseContext) -> str | None:
    async with ctx.raw() as ws:
        expect_error(await exchange(ws, "[1, 2]"), "SESSION_ERROR")
        await expect_closed(ws, "after SESSION_ERROR (it is terminal)")
    return None


def _capacity_reached(exc: TerminalProtocolError, opened: int) -> str:
    """The detail for a terminal error on session ``opened``; it must be CAPACITY_REACHED."""
    if protocol_code(exc) != "CAPACITY_REACHED":
        raise CheckFailed(f"session {opened} failed: {describe(exc)}") from None
    if exc.error.max_sessions is None or exc.error.active_sessions is None:
        raise CheckFailed("CAPACITY_REACHED lacks active_sessions/max_sessions") from None
    return f"CAPACITY_REACHED at session {opened} (max {exc.error.max_sessions})"


async def check_capacity(ctx: CaseContext) -> str | None:
    from kiln_verify.errors import KilnError, TerminalProtocolError

    client = await ctx.client()
    sessions: list[Session] = []
    try:
        for opened in range(1, CAPACITY_PROBE_SESSIONS + 1):
            session = await guard(client.open_session(), "opening a session")
            sessions.append(session)
            try:
                await session.state()
            except KilnError as exc:
                if not isinstance(exc, TerminalProtocolError):
                    raise CheckFailed(f"session {opened} failed: {describe(exc)}") from None
                return _capacity_reached(exc, opened)
    finally:
        for session in sessions:
            await session.close()
    raise NotApplicable(
        f"{CAPACITY_PROBE_SESSIONS} concurrent sessions were admitted; capacity not provokable"
    )
