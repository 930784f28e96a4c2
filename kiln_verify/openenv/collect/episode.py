"""One candidate episode: the asyncio driver of :class:`~.machine.EpisodeMachine`.

The machine decides everything of kiln-openenv-contract §5.4 and the outcome table §7.3
without I/O; this driver only performs what it asks for, on one capacity-aware session
opened with the group's exact reset payload:

* :class:`~.machine.AskPolicy`: the policy call, awaited in this task under the
  session's keep-alive (:meth:`Session.keep_alive_while`: the call never changes task, a
  pump task beside it keeps the session alive, and an answer that needs no waiting
  starts no pump at all);
* :class:`~.machine.SendStep`: one ``step``; its observation, or the protocol error it
  was answered with, is fed back;
* :data:`~.machine.READ_STATE`: the final ``state``;
* :data:`~.machine.FINISHED`: close the session, then assemble the records (:mod:`.assemble`).

With ``--grpo-output`` each model call's :class:`TokenProvenance` and final content are
retained (charged to the retained-representation budget) for the GRPO corpus, and each
request after the first carries the previous call's provenance (``prior``) so the policy
continues one token stream (kiln_verify.tokens.stream); a response without provenance is
``policy_provenance_missing``. Without it they are dropped at once.

Under the group's hidden-state check, one read-only ``state`` right after reset is
compared across the group (``collect.groupcheck``) before the first policy call, and
never recorded. Every other client error (transport, timeout, poisoned session,
reflection, policy failure) propagates and aborts the whole collection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kiln_verify.errors import KilnError, RecoverableProtocolError, TerminalProtocolError
from kiln_verify.openenv.collect.assemble import EpisodeResult, episode_result
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.environment import EnvironmentContext
from kiln_verify.openenv.collect.groupcheck import state_read_failed
from kiln_verify.openenv.collect.machine import (
    FINISHED,
    READ_STATE,
    AskPolicy,
    EpisodeMachine,
    Generation,
    SendStep,
)
from kiln_verify.openenv.collect.plan import GroupPlan, RetainedBudget
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.records.observation import ObservationRecord
from kiln_verify.records import BehaviorPolicyIdentity, ChatMessage

__all__ = ["Arrival", "EnvironmentContext", "EpisodeResult", "Generation", "run_episode"]

#: ``(candidate_index, initial messages, reset observation, state read right after reset)``
#: -> whether the candidate may act (the group's hidden-state check, ``collect.groupcheck``).
Arrival = Callable[[int, list[ChatMessage], ObservationRecord, Any], bool]


async def run_episode(
    env: EnvironmentContext,
    group: GroupPlan,
    candidate_index: int,
    *,
    controls: CollectionControls,
    policy: Policy,
    behavior: BehaviorPolicyIdentity,
    budget: RetainedBudget,
    arrival: Arrival | None = None,
) -> EpisodeResult | None:
    """Run one candidate to its end and build its corpus, replay and summary entries.

    With ``arrival`` (the group's hidden-state check) the session's read-only ``state`` is
    read once after reset, before the first policy call, and handed over with the
    candidate's start; when the check says stop, the session is closed and ``None`` is
    returned without acting (the group is failing: its last arrival raises).
    """
    acquisition = await env.client.open_session_with_capacity(
        controls.options.capacity_wait_seconds, reset_data=group.reset_payload
    )
    session = acquisition.session
    machine = EpisodeMachine(env, group, candidate_index, controls=controls, budget=budget)
    try:
        assert acquisition.observation is not None
        machine.reset(acquisition.observation)
        if arrival is not None:
            try:
                state_after_reset = await session.state()
            except KilnError as exc:
                url = env.inspection.identity.base_url
                raise state_read_failed(exc, group, url, candidate_index) from None
            if not arrival(
                candidate_index, machine.messages, machine.reset_observation, state_after_reset
            ):
                return None
        while True:
            command = machine.next_command()
            if type(command) is AskPolicy:
                # The policy's answer is recorded by the machine: the one place a model
                # call's result (text, tokens, provenance) enters the episode.
                response = await session.keep_alive_while(policy.act(command.request))
                machine.policy_answered(response)
            elif type(command) is SendStep:
                try:
                    observation = await session.step(command.action)
                except (RecoverableProtocolError, TerminalProtocolError) as exc:
                    if exc.error is None:
                        raise
                    machine.step_refused(exc.error)
                else:
                    machine.step_answered(observation)
            elif command is READ_STATE:
                machine.final_state(await session.state())
            else:
                assert command is FINISHED
                break
    finally:
        await session.close()
    return episode_result(
        env,
        group,
        candidate_index,
        machine.outcome(),
        behavior=behavior,
        capacity_retries=acquisition.retries,
    )
