"""Error-path checks: malformed frames, schema violations and the error frame itself."""

from __future__ import annotations

from pytest_kiln.cases.context import CaseContext, guard
from pytest_kiln.cases.frames import exchange, expect_closed, expect_error, recv_object
from pytest_kiln.cases.model import CheckFailed, describe, protocol_code


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


async def check_missing_type(ctx: CaseContext) -> str | None:
    return await _recoverable(ctx, "{}", "UNKNOWN_TYPE")


async def check_step_without_data(ctx: CaseContext) -> str | None:
    return await _recoverable(ctx, '{"type":"step"}', "VALIDATION_ERROR")


async def check_envelope_extra_key(ctx: CaseContext) -> str | None:
    return await _recoverable(ctx, '{"type":"state","data":{}}', "VALIDATION_ERROR")


async def check_error_frame_shape(ctx: CaseContext) -> str | None:
    async with ctx.raw() as ws:
        frame = await exchange(ws, "not json")
    extra = sorted(set(frame) - {"type", "data"})
    data = frame.get("data")
    if frame.get("type") != "error" or not isinstance(data, dict):
        raise CheckFailed("a frame that is not JSON was not answered with an error frame")
    if extra:
        raise CheckFailed(f"the error frame has keys besides type and data: {extra[:4]}")
    for key in ("message", "code"):
        if not isinstance(data.get(key), str):
            raise CheckFailed(f"the error frame's data lacks a string {key!r}")
    return None


async def check_validation_error(ctx: CaseContext) -> str | None:
    from kiln_verify.errors import RecoverableProtocolError

    async with ctx.session() as (session, observation):
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


async def check_binary_frame(ctx: CaseContext) -> str | None:
    async with ctx.raw() as ws:
        await ws.send(b'{"type":"state"}')
        expect_error(await recv_object(ws, "the reply to a binary frame"), "SESSION_ERROR")
        await expect_closed(ws, "after SESSION_ERROR (it is terminal)")
    return None
