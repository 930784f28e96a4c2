"""The policy call under :meth:`Session.keep_alive_while`, as the episode driver makes it.

The call is awaited in the caller's own task from its first step to its last (values
sent back in, exceptions, cancellation in both directions, non-coroutine awaitables, and
at the end an httpx call, whose anyio locks must be released by the task that took
them), and the keep-alive pump starts only once the call actually waits: an answer that
needs no waiting costs no task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from kiln_verify.openenv.policy.base import PolicyRequest, PolicyResponse
from kiln_verify.openenv.protocol import session as session_module
from kiln_verify.openenv.protocol.client import OpenEnvClient
from oracle.runner import ServerHandle

T = TypeVar("T")


def _request() -> PolicyRequest:
    return PolicyRequest.for_step(
        messages=[{"role": "user", "content": "u"}], action_schema={}, seed=1,
        candidate_index=0, step_index=0,
    )  # fmt: skip


def _run(
    servers: dict[str, ServerHandle],
    act: Callable[[PolicyRequest], Awaitable[T]],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[T, int]:
    """``act``'s answer under a live session's keep-alive, and how many pumps started."""
    started: list[object] = []
    begin = session_module._KeepAlivePump._begin

    def counted(pump: Any) -> None:
        started.append(pump)
        begin(pump)

    monkeypatch.setattr(session_module._KeepAlivePump, "_begin", counted)

    async def scenario() -> T:
        async with (
            OpenEnvClient(servers["bandit"].base_url) as client,
            await client.open_session() as session,
        ):
            await session.reset({"seed": 1})
            result = await session.keep_alive_while(act(_request()))
            assert session.usable
            await session.step({"arm": 1})  # the session is still in lock-step
            return result

    return asyncio.run(scenario()), len(started)


def test_an_immediate_answer_starts_no_pump(
    servers: dict[str, ServerHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def act(request: PolicyRequest) -> PolicyResponse:
        return PolicyResponse(text="now")

    response, pumps = _run(servers, act, monkeypatch)
    assert (response.text, pumps) == ("now", 0)


def test_a_suspended_call_continues_where_it_stopped(
    servers: dict[str, ServerHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
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

    response, pumps = _run(servers, act, monkeypatch)
    assert (response.text, pumps) == ("p0p1p2", 1)


def test_errors_after_suspending_propagate(
    servers: dict[str, ServerHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def act(request: PolicyRequest) -> PolicyResponse:
        await asyncio.sleep(0.001)
        raise ValueError("inference failed")

    with pytest.raises(ValueError, match="inference failed"):
        _run(servers, act, monkeypatch)


def test_errors_before_suspending_propagate(
    servers: dict[str, ServerHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def act(request: PolicyRequest) -> PolicyResponse:
        raise ValueError("bad request")

    with pytest.raises(ValueError, match="bad request"):
        _run(servers, act, monkeypatch)


def test_cancelling_the_episode_cancels_the_suspended_call(
    servers: dict[str, ServerHandle],
) -> None:
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
        async with (
            OpenEnvClient(servers["bandit"].base_url) as client,
            await client.open_session() as session,
        ):
            await session.reset({"seed": 1})
            task = asyncio.ensure_future(session.keep_alive_while(act(_request())))
            await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    assert seen == ["cancelled", "finally"]


def test_a_call_may_absorb_a_thrown_exception_and_answer(
    servers: dict[str, ServerHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def act(request: PolicyRequest) -> PolicyResponse:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        loop.call_later(0.001, future.set_exception, KeyError("k"))
        try:
            await future
        except KeyError:
            return PolicyResponse(text="recovered")
        return PolicyResponse(text="unreachable")

    response, _ = _run(servers, act, monkeypatch)
    assert response.text == "recovered"


def test_a_plain_awaitable_is_awaited_under_the_keep_alive(
    servers: dict[str, ServerHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    def act(request: PolicyRequest) -> Awaitable[PolicyResponse]:
        future: asyncio.Future[PolicyResponse] = asyncio.get_running_loop().create_future()
        future.get_loop().call_later(0.001, future.set_result, PolicyResponse(text="future"))
        return future

    response, pumps = _run(servers, act, monkeypatch)
    assert (response.text, pumps) == ("future", 1)


def test_a_suspended_call_never_changes_task(
    servers: dict[str, ServerHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def act(request: PolicyRequest) -> PolicyResponse:
        first = asyncio.current_task()
        await asyncio.sleep(0.001)
        return PolicyResponse(text="same" if asyncio.current_task() is first else "moved")

    response, pumps = _run(servers, act, monkeypatch)
    assert (response.text, pumps) == ("same", 1)


def test_a_session_closed_before_the_pump_starts_fails_the_wait(
    servers: dict[str, ServerHandle],
) -> None:
    """The pump starts one loop turn after the call first waits; a session that ended in
    between still fails the wait at once instead of leaving it unwatched."""
    from kiln_verify.errors import SessionClosed

    async def main() -> None:
        async with OpenEnvClient(servers["bandit"].base_url) as client:
            session = await client.open_session()
            await session.reset({"seed": 1})

            async def act() -> PolicyResponse:
                session._end(SessionClosed("x"), poison=False)  # before the pump's first turn
                await asyncio.sleep(10)
                return PolicyResponse(text="never")

            with pytest.raises(SessionClosed):
                await asyncio.wait_for(session.keep_alive_while(act()), 5)
            await session.close()

    asyncio.run(main())


def test_the_openai_policy_over_real_sockets_under_keep_alive(
    servers: dict[str, ServerHandle],
) -> None:
    """An httpx call that outlasts several keep-alive intervals (0.3 s answer, 0.05 s
    interval): state exchanges run beside it and it completes in its own task."""
    from kiln_verify.openenv.policy.openai_compat import OpenAICompatPolicy
    from tests.openenv.policy.openai_stub import stub_server

    async def scenario(origin: str) -> None:
        policy = OpenAICompatPolicy(base_url=f"{origin}/slow-action/v1", model="m")
        try:
            async with (
                OpenEnvClient(servers["bandit"].base_url, request_timeout=0.2) as client,
                await client.open_session() as session,
            ):
                await session.reset({"seed": 1})
                for _ in range(2):
                    response = await session.keep_alive_while(policy.act(_request()))
                    assert response.text == '{"arm": 2}'
                assert session.usable
                observation = await session.step({"arm": 2})
                assert observation.done in (True, False)
        finally:
            await policy.aclose()

    with stub_server() as origin:
        asyncio.run(scenario(origin))
