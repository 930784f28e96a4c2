"""``_act`` steps the policy call once in place and hands a suspended call to a task.

The rest of the call must behave exactly as if it had been awaited from the start:
values sent back in, exceptions, cancellation (in both directions) and non-coroutine
awaitables.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar, cast

import pytest

from kiln_verify.openenv.collect.episode import _act
from kiln_verify.openenv.policy.base import Policy, PolicyRequest, PolicyResponse
from kiln_verify.openenv.session import Session

T = TypeVar("T")


class FakeSession:
    def __init__(self) -> None:
        self.kept_alive = 0

    async def keep_alive_while(self, awaitable: Awaitable[T]) -> T:
        self.kept_alive += 1
        return await asyncio.ensure_future(awaitable)


class FakePolicy:
    def __init__(self, act: Any) -> None:
        self.act = act


def _request() -> PolicyRequest:
    return cast(PolicyRequest, object())


async def _run(act: Any) -> tuple[PolicyResponse, int]:
    session = FakeSession()
    policy = cast(Policy, FakePolicy(act))
    response = await _act(cast(Session, session), policy, _request())
    return response, session.kept_alive


def test_an_immediate_answer_needs_no_keep_alive() -> None:
    async def act(request: PolicyRequest) -> PolicyResponse:
        return PolicyResponse(text="now")

    response, kept = asyncio.run(_run(act))
    assert response.text == "now"
    assert kept == 0


def test_a_suspended_call_continues_where_it_stopped() -> None:
    async def act(request: PolicyRequest) -> PolicyResponse:
        loop = asyncio.get_running_loop()
        parts = []
        for index in range(3):
            await asyncio.sleep(0)
            future: asyncio.Future[str] = loop.create_future()
            loop.call_later(0.001, future.set_result, f"p{index}")
            parts.append(await future)
        await asyncio.sleep(0.002)
        return PolicyResponse(text="".join(parts))

    response, kept = asyncio.run(_run(act))
    assert response.text == "p0p1p2"
    assert kept == 1


def test_errors_after_suspending_propagate() -> None:
    async def act(request: PolicyRequest) -> PolicyResponse:
        await asyncio.sleep(0.001)
        raise ValueError("inference failed")

    with pytest.raises(ValueError, match="inference failed"):
        asyncio.run(_run(act))


def test_errors_before_suspending_propagate() -> None:
    async def act(request: PolicyRequest) -> PolicyResponse:
        raise ValueError("bad request")

    with pytest.raises(ValueError, match="bad request"):
        asyncio.run(_run(act))


def test_cancelling_the_episode_cancels_the_suspended_call() -> None:
    seen: list[str] = []

    async def act(request: PolicyRequest) -> PolicyResponse:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        finally:
            seen.append("finally")
        return PolicyResponse(text="never")

    async def main() -> None:
        task = asyncio.ensure_future(_run(act))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen == ["cancelled", "finally"]


def test_a_call_may_absorb_a_thrown_exception_and_answer() -> None:
    async def act(request: PolicyRequest) -> PolicyResponse:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        loop.call_later(0.001, future.set_exception, KeyError("k"))
        try:
            await future
        except KeyError:
            return PolicyResponse(text="recovered")
        return PolicyResponse(text="unreachable")

    response, _ = asyncio.run(_run(act))
    assert response.text == "recovered"


def test_a_plain_awaitable_is_awaited_under_the_keep_alive() -> None:
    async def main() -> tuple[PolicyResponse, int]:
        future: asyncio.Future[PolicyResponse] = asyncio.get_running_loop().create_future()
        future.set_result(PolicyResponse(text="future"))
        return await _run(lambda request: future)

    response, kept = asyncio.run(main())
    assert response.text == "future"
    assert kept == 1
