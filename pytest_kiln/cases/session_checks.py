"""Session checks: reset, step, state, close, ping, rewards, post-done."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from pytest_kiln.cases.context import CaseContext, guard
from pytest_kiln.cases.frames import exchange, expect_closed
from pytest_kiln.cases.model import (
    DETERMINISM_SEED,
    FRAME_TIMEOUT_S,
    MAX_EPISODE_STEPS,
    CheckFailed,
    NotApplicable,
    describe,
)

if TYPE_CHECKING:
    from kiln_verify.openenv.protocol.wire import Observation


async def _reset_and_step(ctx: CaseContext) -> tuple[Observation, Observation]:
    """Reset a fresh session and step it once with a derived valid action."""
    async with ctx.session() as (session, first):
        _, stepped = await ctx.step_valid(session, first)
    return first, stepped


async def check_reset(ctx: CaseContext) -> str | None:
    async with ctx.session() as (_, observation):
        pass
    return f"reward {observation.reward.kind}, done {observation.done}"


async def check_step(ctx: CaseContext) -> str | None:
    _, stepped = await _reset_and_step(ctx)
    return f"reward {stepped.reward.kind}, done {stepped.done}"


async def check_state(ctx: CaseContext) -> str | None:
    async with ctx.session() as (session, _):
        await guard(session.state(), "state")
    return None


async def check_close(ctx: CaseContext) -> str | None:
    async with ctx.raw() as ws:
        reply = await exchange(ws, '{"type":"reset"}')
        if reply.get("type") != "observation":
            raise CheckFailed(f"reset was answered with a {str(reply.get('type'))[:20]!r} frame")
        await ws.send('{"type":"close"}')
        code = await expect_closed(ws, "after close (close has no reply)")
    return f"close code {code}"


async def check_ping(ctx: CaseContext) -> str | None:
    async with ctx.raw() as ws:
        started = time.monotonic()
        try:
            waiter = await ws.ping()
            await asyncio.wait_for(waiter, FRAME_TIMEOUT_S)
        except TimeoutError:
            raise CheckFailed(f"no pong within {FRAME_TIMEOUT_S:g} s") from None
        except Exception as exc:
            raise CheckFailed(f"ping failed ({describe(exc)})") from None
    return f"pong after {1000 * (time.monotonic() - started):.1f} ms"


async def check_reward(ctx: CaseContext) -> str | None:
    first, stepped = await _reset_and_step(ctx)
    return f"reset reward {first.reward.kind}, step reward {stepped.reward.kind}"


async def check_post_done(ctx: CaseContext) -> str | None:
    from kiln_verify.errors import RecoverableProtocolError

    async with ctx.session({"seed": DETERMINISM_SEED}) as (session, observation):
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
            return f"step after done answered {describe(exc)}"
        except Exception as exc:
            raise CheckFailed(f"step after done failed ({describe(exc)})") from None
        if not after.done:
            raise CheckFailed("a step after done=true answered done=false")
    return None
