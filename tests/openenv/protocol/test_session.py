"""Sessions against live oracle servers: episodes, error codes, capacity, every fault profile."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import ClassVar

import pytest

from kiln_verify.errors import (
    CapacityExhausted,
    CredentialReflected,
    EnvironmentHttpStatus,
    EnvironmentTimeout,
    EnvironmentTransport,
    ProtocolViolation,
    RecoverableProtocolError,
    SessionBusy,
    SessionClosed,
    SessionPoisoned,
    TerminalProtocolError,
    UnexpectedResponse,
)
from kiln_verify.openenv.protocol.client import OpenEnvClient
from kiln_verify.openenv.protocol.session import keep_alive_interval
from kiln_verify.openenv.protocol.wire import ErrorCode, Reward
from oracle.base import JsonObject
from oracle.envs.counter import CounterEnvironment
from oracle.runner import ServerHandle
from tests.openenv.protocol.oekit import Start, run

SECRET = "kiln-test-token-7f3a9c"


def test_counter_episode_as_kiln_interop(servers: dict[str, ServerHandle]) -> None:
    async def scenario() -> None:
        async with OpenEnvClient(servers["counter"].base_url) as client:
            session = await client.open_session()
            async with session:
                first = await session.reset({"seed": 17, "episode_id": "kiln-interop"})
                assert first.observation["total"] == 0
                assert first.reward == Reward("null", None)
                assert first.done is False
                one = await session.step({"amount": 2, "note": "first"})
                assert one.reward == Reward("float", 2.0)
                assert one.reward != Reward("integer", 2)
                assert not one.done
                two = await session.step({"amount": 2})
                assert two.reward == Reward("float", 4.0)
                assert two.done
                state = await session.state()
                assert state == {"episode_id": "kiln-interop", "step_count": 2, "total": 4}
            with pytest.raises(SessionClosed):
                await session.state()

    run(scenario())


def test_recoverable_errors_keep_the_session(servers: dict[str, ServerHandle]) -> None:
    async def scenario() -> None:
        async with (
            OpenEnvClient(servers["bandit"].base_url) as client,
            await client.open_session() as session,
        ):
            await session.reset({"seed": 3})
            with pytest.raises(RecoverableProtocolError) as caught:
                await session.step({"arm": 99})
            assert caught.value.error.code is ErrorCode.EXECUTION_ERROR
            assert caught.value.error.recoverable
            pulled = await session.step({"arm": 1})
            assert pulled.reward.kind == "integer"
            assert session.usable

    run(scenario())


def test_validation_error_for_a_bad_math_answer(servers: dict[str, ServerHandle]) -> None:
    async def scenario() -> None:
        async with (
            OpenEnvClient(servers["measure"].base_url) as client,
            await client.open_session() as session,
        ):
            await session.reset({"seed": 5})
            with pytest.raises(RecoverableProtocolError) as caught:
                await session.step({"answer": 7})
            assert caught.value.error.code is ErrorCode.VALIDATION_ERROR
            assert isinstance(caught.value.error.errors, list)
            assert session.usable
            await session.state()

    run(scenario())


def test_one_request_in_flight(start: Start) -> None:
    handle = start("counter", faults=["delay-step=0.3"])

    async def scenario() -> None:
        async with (
            OpenEnvClient(handle.base_url) as client,
            await client.open_session() as session,
        ):
            await session.reset()
            slow = asyncio.ensure_future(session.step({"amount": 1}))
            await asyncio.sleep(0.05)
            with pytest.raises(SessionBusy):
                await session.state()
            assert (await slow).observation["total"] == 1
            assert session.usable

    run(scenario())


def test_capacity_wait_and_backoff(start: Start) -> None:
    handle = start("counter", max_sessions=1)

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url) as client:
            first = await client.open_session_with_capacity(1.0)
            assert first.retries == 0
            started = time.monotonic()
            with pytest.raises(CapacityExhausted, match="retries"):
                await client.open_session_with_capacity(0.6)
            assert 0.5 <= time.monotonic() - started < 3.0

            async def release() -> None:
                await asyncio.sleep(0.4)
                await first.session.close()

            releaser = asyncio.ensure_future(release())
            second = await client.open_session_with_capacity(5.0, reset_data={"seed": 1})
            await releaser
            assert second.retries >= 1
            assert second.observation is not None
            await second.session.close()

    run(scenario())


def test_capacity_reached_is_terminal_on_first_use(start: Start) -> None:
    handle = start("counter", max_sessions=1)

    async def scenario() -> None:
        async with (
            OpenEnvClient(handle.base_url) as client,
            await client.open_session() as holder,
        ):
            await holder.reset()
            refused = await client.open_session()
            with pytest.raises(TerminalProtocolError) as caught:
                await refused.reset()
            assert caught.value.error.code is ErrorCode.CAPACITY_REACHED
            assert caught.value.error.max_sessions == 1
            assert not refused.usable
            await refused.close()

    run(scenario())


def test_flaky_capacity_retries_are_counted(start: Start) -> None:
    handle = start("counter", faults=["flaky-capacity=2"])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url) as client:
            first = await client.open_session_with_capacity(5.0)
            second = await client.open_session_with_capacity(5.0)
            assert (first.retries, second.retries) == (0, 1)
            await first.session.close()
            await second.session.close()

    run(scenario())


def test_factory_error_is_terminal(start: Start) -> None:
    handle = start("counter", faults=["factory-error"])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url) as client:
            session = await client.open_session()
            with pytest.raises(TerminalProtocolError) as caught:
                await session.reset()
            assert caught.value.error.code is ErrorCode.FACTORY_ERROR
            await session.close()

    run(scenario())


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("drop-after-steps=1", EnvironmentTransport),
        ("binary-frame", ProtocolViolation),
        ("oversized-frame", ProtocolViolation),
        ("wrong-response-type", UnexpectedResponse),
    ],
)
def test_faults_poison_the_session(start: Start, fault: str, error: type[Exception]) -> None:
    handle = start("counter", faults=[fault])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url) as client:
            session = await client.open_session()
            await session.reset()
            if fault.startswith("drop"):
                await session.step({"amount": 1})
            with pytest.raises(error):
                await session.step({"amount": 1})
            assert session.poisoned
            with pytest.raises(SessionPoisoned):
                await session.state()
            await session.close()

    run(scenario())


def test_timeout_poisons_and_the_late_answer_is_never_read(start: Start) -> None:
    handle = start("counter", faults=["delay-step=0.6"])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url, request_timeout=0.25) as client:
            session = await client.open_session()
            await session.reset()
            with pytest.raises(EnvironmentTimeout):
                await session.step({"amount": 1})
            await asyncio.sleep(0.8)  # the late reply has certainly been sent by now
            with pytest.raises(SessionPoisoned, match="environment_timeout"):
                await session.state()
            with pytest.raises(SessionPoisoned):
                await session.step({"amount": 1})
            await session.close()

    run(scenario())


def test_keep_alive_returns_the_result_and_keeps_the_session(
    servers: dict[str, ServerHandle],
) -> None:
    assert keep_alive_interval(60.0) == 10.0
    assert keep_alive_interval(0.001) == 0.01
    assert keep_alive_interval(1.0) == 0.25

    async def think() -> str:
        await asyncio.sleep(0.3)
        return "action"

    async def scenario() -> None:
        async with (
            OpenEnvClient(servers["counter"].base_url, request_timeout=0.2) as client,
            await client.open_session() as session,
        ):
            await session.reset()
            assert await session.keep_alive_while(think()) == "action"
            assert (await session.step({"amount": 1})).observation["total"] == 1

    run(scenario())


class StateCountingCounter(CounterEnvironment):
    """The counter oracle, recording when the server answers each ``state`` request."""

    lock: ClassVar[threading.Lock] = threading.Lock()
    state_times: ClassVar[list[float]] = []

    def _extra_state(self) -> JsonObject:
        with self.lock:
            self.state_times.append(time.monotonic())
        return super()._extra_state()


def _state_calls() -> list[float]:
    with StateCountingCounter.lock:
        return list(StateCountingCounter.state_times)


def test_keep_alive_sends_periodic_state_while_waiting(start: Start) -> None:
    handle = start("counter", environment=StateCountingCounter)
    request_timeout = 0.2
    interval = keep_alive_interval(request_timeout)
    assert interval == 0.05
    pump_s = 0.6

    async def think() -> str:
        await asyncio.sleep(pump_s)
        return "action"

    async def scenario() -> None:
        async with (
            OpenEnvClient(handle.base_url, request_timeout=request_timeout) as client,
            await client.open_session() as session,
        ):
            await session.reset()
            await session.step({"amount": 1})
            before = len(_state_calls())
            started = time.monotonic()
            assert await session.keep_alive_while(think()) == "action"
            ended = time.monotonic()
            during = [t for t in _state_calls()[before:] if started <= t <= ended]
            # one state exchange per interval while the awaitable runs; never a busy loop
            assert 4 <= len(during) <= pump_s / interval + 1, during
            assert len(_state_calls()) - before == len(during)
            # read-only: the episode is where it was before the pump
            state = await session.state()
            assert state["step_count"] == 1
            assert state["total"] == 1
            assert (await session.step({"amount": 1})).observation["total"] == 2

    run(scenario())


def test_keep_alive_answers_server_pings(start: Start, caplog: pytest.LogCaptureFixture) -> None:
    """Pings are answered during the pump even when no state exchange is due."""
    handle = start(
        "counter", environment=StateCountingCounter, ping_interval=0.05, ping_timeout=0.5
    )
    caplog.set_level(logging.DEBUG, logger="websockets.client")
    pump_s = 1.2  # > ping_interval + ping_timeout: an unanswered ping would end the session

    async def think() -> str:
        await asyncio.sleep(pump_s)
        return "action"

    async def scenario() -> None:
        # request_timeout 60 s: the keep-alive interval is 10 s, so only pings are exchanged
        async with (
            OpenEnvClient(handle.base_url, request_timeout=60.0) as client,
            await client.open_session() as session,
        ):
            await session.reset()
            before = len(_state_calls())
            assert await session.keep_alive_while(think()) == "action"
            assert len(_state_calls()) == before
            assert session.usable
            assert (await session.step({"amount": 1})).observation["total"] == 1
            assert (await session.state())["step_count"] == 1

    run(scenario())
    pings = [r for r in caplog.records if r.getMessage().startswith("< PING")]
    pongs = [r for r in caplog.records if r.getMessage().startswith("> PONG")]
    assert len(pings) >= 5, [r.getMessage() for r in caplog.records][:20]
    assert len(pongs) >= len(pings)


def test_unsolicited_frame_fails_keep_alive_closed(start: Start) -> None:
    handle = start("counter", faults=["unsolicited-frame=0.1"])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url) as client:
            session = await client.open_session()
            await session.reset()
            cancelled = asyncio.Event()

            async def think() -> str:
                try:
                    await asyncio.sleep(5)
                except asyncio.CancelledError:
                    cancelled.set()
                    raise
                return "never"

            with pytest.raises(SessionPoisoned, match="no request was in flight"):
                await session.keep_alive_while(think())
            await asyncio.sleep(0)
            assert cancelled.is_set()
            await session.close()

    run(scenario())


def test_unsolicited_frame_between_requests_is_never_a_reply(start: Start) -> None:
    """No reader runs between requests: the frame waits in the connection, and the next
    exchange refuses it before sending instead of taking it as its reply."""
    handle = start("counter", faults=["unsolicited-frame=0.1"])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url) as client:
            session = await client.open_session()
            await session.reset()
            await asyncio.sleep(0.5)  # the copy of the reset reply has arrived by now
            with pytest.raises(SessionPoisoned, match="no request was in flight"):
                await session.step({"amount": 1})
            assert session.poisoned
            with pytest.raises(SessionPoisoned):
                await session.state()
            await session.close()

    run(scenario())


def test_a_close_between_requests_ends_the_session(start: Start) -> None:
    handle = start("counter")

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url) as client:
            session = await client.open_session()
            await session.reset()
            await session._ws.close()  # as if the server had closed it
            with pytest.raises(SessionClosed, match="session_closed"):
                await session.step({"amount": 1})
            assert not session.usable
            assert not session.poisoned
            await session.close()

    run(scenario())


def test_reflected_credential_poisons(start: Start, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_TEST_TOKEN", SECRET)
    handle = start("counter", faults=["reflect-authorization"])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url, credential_env="KILN_TEST_TOKEN") as client:
            session = await client.open_session()
            with pytest.raises(CredentialReflected) as caught:
                await session.reset()
            assert SECRET not in str(caught.value)
            with pytest.raises(SessionPoisoned):
                await session.state()
            await session.close()

    run(scenario())


def test_bearer_required(start: Start, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_TEST_TOKEN", SECRET)
    handle = start("counter", faults=["require-bearer=KILN_TEST_TOKEN"])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url) as client:
            with pytest.raises(EnvironmentHttpStatus, match="401"):
                await client.inspect()
        async with OpenEnvClient(handle.base_url, credential_env="KILN_TEST_TOKEN") as client:
            inspection = await client.inspect()
            assert inspection.identity.authentication == "bearer"
            assert SECRET not in inspection.identity.model_dump_json()
            async with await client.open_session() as session:
                assert (await session.reset()).observation["total"] == 0

    run(scenario())


# --- the request timeout (one timer per session, asyncio.timeout semantics) -----------------


def test_request_timeout_spans_each_exchange_not_the_session(start: Start) -> None:
    """The timer armed by an earlier exchange re-arms at the current exchange's deadline
    when it fires early, and one firing between exchanges does nothing."""
    handle = start("counter", faults=["delay-step=0.5"])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url, request_timeout=1.0) as client:
            session = await client.open_session()
            await session.reset()  # arms the timer about 1.0 s from now
            await asyncio.sleep(0.6)
            # in flight when the reset's deadline passes; its own ends 0.5 s after it
            assert (await session.step({"amount": 1})).observation["total"] == 1
            await asyncio.sleep(1.2)  # the re-armed timer fires with nothing in flight
            assert session.usable
            await session.state()
            await session.close()

    run(scenario())


def test_cancelling_an_exchange_is_not_a_timeout(start: Start) -> None:
    """A cancellation from outside stays a cancellation (the task's own request), and the
    session is poisoned because a reply may still come."""
    handle = start("counter", faults=["delay-step=0.6"])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url, request_timeout=5.0) as client:
            session = await client.open_session()
            await session.reset()
            step = asyncio.ensure_future(session.step({"amount": 1}))
            await asyncio.sleep(0.1)
            step.cancel()
            with pytest.raises(asyncio.CancelledError):
                await step
            assert session.poisoned
            with pytest.raises(SessionPoisoned, match="cancelled while in flight"):
                await session.state()
            await session.close()

    run(scenario())


def test_a_timeout_inside_a_caller_timeout_belongs_to_the_session(start: Start) -> None:
    """Nested deadlines behave as with ``asyncio.timeout``: the session's (shorter) one
    fires first and is reported as the environment's timeout; the caller's own longer
    deadline is untouched."""
    handle = start("counter", faults=["delay-step=0.6"])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url, request_timeout=0.2) as client:
            session = await client.open_session()
            await session.reset()
            async with asyncio.timeout(5.0):
                with pytest.raises(EnvironmentTimeout):
                    await session.step({"amount": 1})
            await session.close()
        async with OpenEnvClient(handle.base_url, request_timeout=5.0) as client:
            session = await client.open_session()
            await session.reset()
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await session.step({"amount": 1})
            assert session.poisoned  # cancelled in flight by the caller's deadline
            await session.close()

    run(scenario())


def test_a_lowered_request_timeout_applies_to_the_next_exchange(start: Start) -> None:
    handle = start("counter", faults=["delay-step=0.6"])

    async def scenario() -> None:
        async with OpenEnvClient(handle.base_url, request_timeout=30.0) as client:
            session = await client.open_session()
            await session.reset()  # arms the timer 30 s out
            session.request_timeout = 0.2
            with pytest.raises(EnvironmentTimeout, match=r"within 0\.2 s"):
                await session.step({"amount": 1})
            await session.close()

    run(scenario())
