"""One TRL rollout as one collector episode: the episode machine driven by tool calls.

The collector's :class:`~kiln_verify.openenv.collect.machine.EpisodeMachine` decides every
row of the contract's outcome table; here TRL plays the policy. ``start`` resets the
environment with the group's exact reset payload on the session the instance kept from its
previous episode (a reset starts a new episode on a session, as OpenEnv's own clients use
it; :meth:`Session.ready` first reads whatever arrived while it was idle, and a session
the server closed meanwhile is replaced), or on one new capacity-aware session (the
client's acquisition, keep-alive, poisoning, bearer and reflection checks, unchanged; no
``/health`` per session: the run inspected the server and re-inspects it after every
recorded batch). Each tool call is one policy answer: its arguments, written as canonical
JSON, are judged by the collector's own rule (``judge_model_reply``: the action schema
decides), then sent as one ``step``; the tool returns exactly the trajectory segment the
collector records for the answer (the observation text, the protocol error, or the harness
error of an action the schema refuses). ``finish`` ends the episode: a rollout whose model
stopped calling the tool while the episode was still open is a reply without an action
(``MODEL_ACTION_NO_OUTPUT``, the contract's penalty), then the final state is read and the
three records assembled (:func:`~kiln_verify.openenv.collect.assemble.episode_result`), so
a rollout's records are the collector's, byte for byte. The session then waits for the
instance's next episode (:meth:`Episode.release`).

The final state read is sent as soon as the episode ends and waited for only by
``finish``: an episode the environment ended during a tool call reads it while TRL goes on
generating, and :meth:`Episode.end` (the factory calls it for every rollout of the batch
at the first ``get_reward``, when TRL has generated the whole batch) sends the reads of
the others together, so the batch waits about one round trip instead of one per rollout.
A failed read fails the episode at ``finish``, as any client failure does.

Any client failure (transport, timeout, poisoned session, reflection) closes the session
(on the loop, without waiting: :meth:`OpenEnvRun.close_later`) and is remembered by the
run: TRL turns a tool's exception into text for the model, so the failure is raised again
when TRL asks for the reward, and the step fails with nothing published.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from kiln_verify.core.jsonenc import dumps_canonical
from kiln_verify.errors import (
    CapacityExhausted,
    EnvironmentTransport,
    KilnError,
    ProtocolViolation,
    RecoverableProtocolError,
    SessionClosed,
    TerminalProtocolError,
    TrlBatchOverCapacity,
    TrlEpisodeFailed,
    TrlRewardNotFinite,
)
from kiln_verify.limits import TRL_EPISODE_TIMEOUT_S
from kiln_verify.openenv.collect.assemble import EpisodeResult, episode_result
from kiln_verify.openenv.collect.machine import (
    FINISHED,
    READ_STATE,
    AskPolicy,
    EpisodeMachine,
    EpisodeOutcome,
)
from kiln_verify.openenv.collect.plan import RetainedBudget
from kiln_verify.openenv.policy.base import PolicyResponse
from kiln_verify.openenv.protocol.client import CapacityAcquisition
from kiln_verify.openenv.protocol.session import Session
from kiln_verify.openenv.protocol.wire import Observation
from kiln_verify.records import BehaviorPolicyIdentity
from kiln_verify.trl.run import OpenEnvRun, Slot

__all__ = ["ENDED_TEXT", "Episode"]

T = TypeVar("T")

ENDED_TEXT = '{"openenv_episode_over":true,"done":true}'
"""What a tool call after the episode ended returns (no step is sent; the OpenEnv files
record the episode as it ended, the GRPO corpus records the call and this answer)."""


async def _reset_if_ready(session: Session, payload: Mapping[str, Any]) -> Observation | None:
    """Reset on a kept session, unless what arrived while it was idle ended it (``None``):
    one hop to the loop instead of two."""
    if not await session.ready():
        return None
    return await session.reset(payload)


class Episode:
    """One rollout's episode (see the module text); not thread-safe, like TRL's loop."""

    def __init__(self, run: OpenEnvRun, slot: Slot) -> None:
        self._run = run
        self.slot = slot
        self._machine = EpisodeMachine(
            run.context,
            slot.plan,
            slot.candidate,
            controls=run.controls,
            budget=RetainedBudget(),
        )
        self._session: Session | None = None
        self._state: concurrent.futures.Future[Any] | None = None
        self._retries = 0
        self.outcome: EpisodeOutcome | None = None
        self.failure: KilnError | None = None

    # -- driving ---------------------------------------------------------------------------

    def _call(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        if self.failure is not None:
            raise TrlEpisodeFailed(f"the episode already failed: {self.failure.code}")
        try:
            return self._run.loop.run(make())
        except KilnError as exc:
            self._fail(exc)
            raise

    def _final_state(self) -> None:
        """Wait for the final state read :meth:`_advance` sent, and hand it to the machine."""
        pending, self._state = self._state, None
        assert pending is not None
        try:
            state = pending.result(TRL_EPISODE_TIMEOUT_S)
        except KilnError as exc:
            self._fail(exc)
            raise
        except BaseException:
            pending.cancel()
            raise
        self._machine.final_state(state)

    def _fail(self, exc: KilnError) -> None:
        self.failure = exc
        self._run.fail(exc)
        self._close()

    def _close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            self._run.close_later(session)

    def start(self, kept: Session | None = None) -> str:
        """Reset on ``kept`` (the instance's session from its previous episode) or on a new
        capacity-aware session; the user content to show."""
        plan = self.slot.plan
        observation = None
        if kept is not None:
            self._session = kept
            observation = self._call(lambda: _reset_if_ready(kept, plan.reset_payload))
            if observation is None:
                cause = kept.ended
                assert cause is not None
                if not isinstance(cause, SessionClosed | EnvironmentTransport):
                    self._fail(cause)  # it sent something unsolicited while idle
                    raise cause
                self._close()  # the server closed it, or the connection dropped, while idle
        if observation is None:
            observation = self._acquire(plan.reset_payload)
        try:
            self._machine.reset(observation)
        except KilnError as exc:
            self._fail(exc)
            raise
        return self._machine.messages[-1].content

    def _acquire(self, payload: Mapping[str, Any]) -> Observation:
        options = self._run.options
        try:
            acquired: CapacityAcquisition = self._call(
                lambda: self._run.client.open_session_with_capacity(
                    options.capacity_wait_seconds, reset_data=payload, health=False
                )
            )
        except CapacityExhausted as exc:
            raise TrlBatchOverCapacity(
                f"rollout {len(self._run.batch) - 1} of the batch found no free session "
                f"within {options.capacity_wait_seconds} s: {exc.rule}"
            ) from None
        self._session, self._retries = acquired.session, acquired.retries
        assert acquired.observation is not None
        return acquired.observation

    @property
    def open(self) -> bool:
        """Whether the episode still waits for an action."""
        return self.outcome is None and type(self._machine.next_command()) is AskPolicy

    def act(self, arguments: dict[str, Any]) -> str:
        """One tool call: judge, step, and the segment the model is shown."""
        if self.failure is not None:
            raise TrlEpisodeFailed(f"the environment failed: {self.failure.code}")
        if not self.open:
            return ENDED_TEXT
        text = dumps_canonical(arguments).decode("utf-8")
        self._machine.policy_answered(PolicyResponse(text=text))
        self._advance()
        segment = self._machine.last_segment
        assert segment is not None
        return segment.content

    def _advance(self) -> None:
        """Perform what the machine asks until it waits for the policy or is finished."""
        machine = self._machine
        while True:
            command = machine.next_command()
            if type(command) is AskPolicy or command is FINISHED:
                return
            session = self._session
            assert session is not None
            if command is READ_STATE:  # sent now, waited for by finish (see the module text)
                if self._state is None:
                    self._state = self._run.loop.submit(session.state())
                return
            action = command.action  # type: ignore[union-attr]
            try:
                observation = self._run.loop.run(session.step(action))
            except (RecoverableProtocolError, TerminalProtocolError) as exc:
                if exc.error is None:
                    self._fail(exc)
                    raise
                machine.step_refused(exc.error)
            except KilnError as exc:
                self._fail(exc)
                raise
            else:
                try:
                    machine.step_answered(observation)
                except ProtocolViolation as exc:  # the machine's one: the return overflowed
                    refused = TrlRewardNotFinite(f"the episode return overflowed: {exc.rule}")
                    self._fail(refused)
                    raise refused from None

    def end(self) -> None:
        """End a still-open episode as a reply without an action, without waiting for its
        final state (see the module text); nothing for an ended or failed one."""
        if self.outcome is None and self.failure is None and self.open:
            self._machine.policy_answered(PolicyResponse(text=""))
            self._advance()

    def finish(self) -> EpisodeOutcome:
        """End the episode (a still-open one as a reply without an action); its outcome."""
        if self.outcome is not None:
            return self.outcome
        if self.failure is not None:
            raise TrlEpisodeFailed(
                f"an episode of the batch failed ({self.failure.code}: {self.failure.rule}); "
                "the step publishes nothing"
            ) from self.failure
        self.end()
        if self._machine.next_command() is READ_STATE:
            self._final_state()
        self.outcome = self._machine.outcome()
        return self.outcome

    def records(self, behavior: BehaviorPolicyIdentity) -> EpisodeResult:
        """The finished episode's three records under the batch's behaviour identity."""
        return episode_result(
            self._run.context,
            self.slot.plan,
            self.slot.candidate,
            self.finish(),
            behavior=behavior,
            capacity_retries=self._retries,
        )

    def release(self) -> Session | None:
        """The session, for the instance's next episode, once this one finished cleanly;
        otherwise it is closed and ``None`` returned."""
        if self.outcome is None or self.failure is not None:
            self._close()
            return None
        session, self._session = self._session, None
        return session

    def abandon(self) -> None:
        """Close the session (an episode TRL never finished, or the factory closing)."""
        self._close()
