"""``_act`` steps the policy call once in place and continues a suspended call in the same
task, under the session's keep-alive.

The rest of the call must behave exactly as if it had been awaited from the start:
values sent back in, exceptions, cancellation (in both directions), non-coroutine
awaitables, and (the real-socket case at the end) an httpx call, whose anyio locks must be
released by the task that took them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar, cast

import pytest

from kiln_verify.openenv.collect.episode import _act
from kiln_verify.openenv.policy.base import Policy, PolicyRequest, PolicyResponse
from kiln_verify.openenv.session import Session
from oracle.runner import ServerHandle

T = TypeVar("T")


class FakeSession:
    """Awaits in the caller's task, as :meth:`Session.keep_alive_while` does."""

    def __init__(self) -> None:
        self.kept_alive = 0

    async def keep_alive_while(self, awaitable: Awaitable[T]) -> T:
        self.kept_alive += 1
        return await awaitable


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


def test_a_suspended_call_never_changes_task() -> None:
    async def act(request: PolicyRequest) -> PolicyResponse:
        first = asyncio.current_task()
        await asyncio.sleep(0.001)
        return PolicyResponse(text="same" if asyncio.current_task() is first else "moved")

    response, kept = asyncio.run(_run(act))
    assert (response.text, kept) == ("same", 1)


def test_the_openai_policy_over_real_sockets_under_keep_alive(
    servers: dict[str, ServerHandle],
) -> None:
    """An httpx call that outlasts several keep-alive intervals (0.3 s answer, 0.05 s
    interval): state exchanges run beside it and it completes in its own task."""
    from kiln_verify.openenv.client import OpenEnvClient
    from kiln_verify.openenv.policy.openai_compat import OpenAICompatPolicy
    from tests.policy.openai_stub import stub_server

    async def scenario(origin: str) -> None:
        policy = OpenAICompatPolicy(base_url=f"{origin}/slow-action/v1", model="m")
        request = PolicyRequest.for_step(
            messages=[{"role": "user", "content": "u"}], action_schema={}, seed=1,
            candidate_index=0, step_index=0,
        )  # fmt: skip
        try:
            async with (
                OpenEnvClient(servers["bandit"].base_url, request_timeout=0.2) as client,
                await client.open_session() as session,
            ):
                await session.reset({"seed": 1})
                for _ in range(2):
                    response = await _act(session, policy, request)
                    assert response.text == '{"arm": 2}'
                assert session.usable
                observation = await session.step({"arm": 2})
                assert observation.done in (True, False)
        finally:
            await policy.aclose()

    with stub_server() as origin:
        asyncio.run(scenario(origin))
