"""One candidate episode (kiln-openenv-contract §5.4, outcome table §7.3).

Capacity-aware session + reset with the group's exact payload, the two initial messages,
under the group's hidden-state check one read-only ``state`` (compared across the group by
``collect.groupcheck``, never recorded), then up to ``max_steps`` model turns. Each turn
the policy runs inside the session's keep-alive pump; its final content is parsed
(:func:`parse_model_action`) and validated against the discovered action schema before
anything reaches the wire:

=================================  ================  ===========  =====  ==============
event                              termination       return       step   exchange
=================================  ================  ===========  =====  ==============
observation, done=false            (continue)        + reward     yes    observation
observation, done=true             ``done``          + reward     yes    observation
recoverable error, budget left     (continue)        + penalty    yes    continued=true
recoverable error, budget spent    ``protocol_error``+ penalty    yes    continued=false
terminal-code error                ``protocol_error``+ penalty    yes    continued=false
no final content / not one JSON    ``invalid_model_  + penalty    no     none
object / fails the action schema   action``          (last)
horizon exhausted                  ``max_steps``
=================================  ================  ===========  =====  ==============

With ``--grpo-output`` each model call's :class:`TokenProvenance` and final content are
retained (charged to the retained-representation budget) for the GRPO corpus, and each
request after the first carries the previous call's provenance (``prior``) so the policy
continues one token stream (kiln_verify.tokens.stream); a response without provenance is
``policy_provenance_missing``. Without it they are dropped at once.

Every other client error (transport, timeout, poisoned session, reflection, policy
failure) propagates and aborts the whole collection. The return is summed in exchange
order with the invalid-action penalty last, exactly as the verifier recomputes it.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kiln_verify.errors import (
    KilnError,
    PolicyProvenanceMissing,
    ProtocolViolation,
    RecoverableProtocolError,
    ResetDone,
    TerminalProtocolError,
)
from kiln_verify.limits import MAX_ACTION_CHECK_CACHE_ENTRIES, MAX_ACTION_CHECK_CACHE_KEY_CHARS
from kiln_verify.openenv.action_schema import ActionSchema
from kiln_verify.openenv.client import OpenEnvClient
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.fastrecords import (
    action_segment,
    observation_exchange,
    observation_record,
    observation_turn,
)
from kiln_verify.openenv.collect.groupcheck import state_read_failed
from kiln_verify.openenv.collect.plan import GroupPlan, RetainedBudget
from kiln_verify.openenv.policy.base import (
    Policy,
    PolicyRequest,
    PolicyResponse,
    TokenProvenance,
)
from kiln_verify.openenv.records.common import (
    BehaviorPolicyIdentity,
    EnvironmentInspection,
    EpisodeTermination,
    ObservationRecord,
    ProtocolErrorRecord,
)
from kiln_verify.openenv.records.prompt import (
    harness_error_segment,
    initial_messages,
    judge_model_reply,
    observation_content,
    parse_model_action,
    protocol_error_segment,
    system_prompt,
)
from kiln_verify.openenv.records.replay import (
    ProtocolErrorResult,
    ReplayCandidate,
    ReplayExchange,
)
from kiln_verify.openenv.records.rollout import (
    ROLLOUT_SCHEMA,
    TURN_BREAK,
    ChatMessage,
    OpenEnvRolloutProvenance,
    ScoredRollout,
    TurnSegment,
)
from kiln_verify.openenv.records.serialize import action_schema_sha256
from kiln_verify.openenv.records.summary import RolloutRecord
from kiln_verify.openenv.session import Session
from kiln_verify.openenv.wire import ProtocolError

__all__ = ["Arrival", "EnvironmentContext", "EpisodeResult", "Generation", "run_episode"]

_FENCE = "```"
_SCALARS = frozenset({str, int, float, bool, type(None)})
T = TypeVar("T")

#: ``(candidate_index, initial messages, reset observation, state read right after reset)``
#: -> whether the candidate may act (the group's hidden-state check, ``collect.groupcheck``).
Arrival = Callable[[int, list[ChatMessage], ObservationRecord, Any], bool]


@dataclass(frozen=True, slots=True)
class EnvironmentContext:
    """One discovered environment as every episode against it needs it."""

    index: int
    client: OpenEnvClient
    inspection: EnvironmentInspection
    action_schema: ActionSchema
    # Computed once here rather than once per episode (the inspection is frozen).
    action_schema_sha256: str = field(init=False, repr=False, compare=False)
    system_prompt: str = field(init=False, repr=False, compare=False)
    # Model output text -> why its action violates the schema ("" when it does not).
    _verdicts: dict[str, str] = field(init=False, repr=False, compare=False)
    # Model output text -> its parsed flat action object, or why it is not one.
    _actions: dict[str, dict[str, Any] | str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        digest = str(action_schema_sha256(self.inspection.schema_.action))
        object.__setattr__(self, "action_schema_sha256", digest)
        object.__setattr__(self, "system_prompt", system_prompt(self.inspection))
        object.__setattr__(self, "_verdicts", {})
        object.__setattr__(self, "_actions", {})

    def parse_action(self, output: str) -> dict[str, Any] | str:
        """:func:`parse_model_action` of ``output``: the action object or why it is not one.

        A pure function of the text, remembered like the schema verdicts (same bounds) for
        refusals and for objects whose values are all scalars, which a fresh shallow copy
        per call reproduces exactly (same keys in the same order, equal immutable values):
        scripted and sampled policies repeat a few outputs, and the strict parse was a
        fixed cost of every step.
        """
        actions = self._actions
        known = actions.get(output)
        if known is not None:
            return dict(known) if type(known) is dict else known
        parsed = parse_model_action(output)
        if (
            len(output) <= MAX_ACTION_CHECK_CACHE_KEY_CHARS
            and len(actions) < MAX_ACTION_CHECK_CACHE_ENTRIES
            and (isinstance(parsed, str) or all(type(v) in _SCALARS for v in parsed.values()))
        ):
            actions[output] = parsed if isinstance(parsed, str) else dict(parsed)
        return parsed

    def schema_violation(self, output: str, parsed: dict[str, Any]) -> str:
        """Why ``parsed`` (the action parsed from ``output``) fails the schema, or "".

        Scripted and sampled policies repeat the same few actions, and jsonschema was the
        largest per-step cost left in the loop, so verdicts are remembered (bounded by
        MAX_ACTION_CHECK_CACHE_ENTRIES / MAX_ACTION_CHECK_CACHE_KEY_CHARS). The key is the
        model's output text rather than the action: the action is a pure function of it
        (:func:`parse_model_action`), so equal keys mean equal actions, with no encoding
        step on a hit; the schema is fixed for the environment's lifetime.
        """
        verdicts = self._verdicts
        known = verdicts.get(output)
        if known is not None:
            return known
        reason = self.action_schema.violation(parsed)
        if (
            len(output) <= MAX_ACTION_CHECK_CACHE_KEY_CHARS
            and len(verdicts) < MAX_ACTION_CHECK_CACHE_ENTRIES
        ):
            verdicts[output] = reason
        return reason

    @property
    def name(self) -> str:
        return self.inspection.identity.metadata.name


@dataclass(frozen=True, slots=True)
class Generation:
    """One model call as a GRPO completion needs it: its final content and exact tokens."""

    text: str
    provenance: TokenProvenance


@dataclass(frozen=True, slots=True)
class EpisodeResult:
    """One candidate's three representations plus what group integrity compares.

    ``generations`` holds one entry per model call when token provenance is retained
    (``--grpo-output``), else it is empty.
    """

    candidate_index: int
    messages: list[ChatMessage]
    reset_observation: ObservationRecord
    rollout: ScoredRollout
    replay: ReplayCandidate
    record: RolloutRecord
    generations: tuple[Generation, ...] = ()


def _retain(response: PolicyResponse, budget: RetainedBudget, where: str) -> Generation:
    """Keep one response's provenance, charged at its compact-JSON size like other data."""
    provenance = response.provenance
    if provenance is None:
        raise PolicyProvenanceMissing(
            f"{where}: the policy returned no token provenance, so no GRPO completion can be "
            "built; nothing was published"
        )
    budget.charge(
        list(provenance.prompt_token_ids),
        list(provenance.completion_token_ids),
        list(provenance.behavior_logprobs),
        response.text,
        what="token provenance",
    )
    return Generation(response.text, provenance)


async def _act(session: Session, policy: Policy, request: PolicyRequest) -> PolicyResponse:
    """The policy's answer, with the session kept alive while it takes time.

    The call is stepped once in place: a policy that answers without waiting (scripted,
    random) is done then and costs no task, no loop turn and no keep-alive machinery. A
    call that suspends continues in a task (exactly where it stopped) under the keep-alive.
    """
    call = policy.act(request)
    if type(call) is not types.CoroutineType:
        return await session.keep_alive_while(call)
    try:
        yielded = call.send(None)
    except StopIteration as finished:
        response: PolicyResponse = finished.value
        return response
    return await session.keep_alive_while(_resume(call, yielded))


@types.coroutine
def _resume(call: Coroutine[Any, Any, T], yielded: Any) -> Generator[Any, Any, T]:
    """Continue a coroutine that has already yielded ``yielded``, as ``await`` would."""
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            call.close()
            raise
        except BaseException as exc:
            try:
                yielded = call.throw(exc)
            except StopIteration as finished:
                result: T = finished.value
                return result
        else:
            try:
                yielded = call.send(sent)
            except StopIteration as finished:
                result = finished.value
                return result


def _finite(total: float) -> float:
    if not math.isfinite(total):
        raise ProtocolViolation("the episode return is no longer a finite number")
    return total


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
        controls.capacity_wait_seconds, reset_data=group.reset_payload
    )
    session = acquisition.session
    try:
        reset = acquisition.observation
        assert reset is not None
        if reset.done:
            raise ResetDone(
                f"environment {env.index} ({env.name!r}) answered reset(seed={group.seed}) "
                "with done: true"
            )
        reset_record = observation_record(reset)
        budget.charge_parsed(reset.observation, reset.metadata, what="a reset observation")
        messages = initial_messages(env.inspection, reset_record, system=env.system_prompt)
        if arrival is not None:
            try:
                state_after_reset = await session.state()
            except KilnError as exc:
                url = env.inspection.identity.base_url
                raise state_read_failed(exc, group, url, candidate_index) from None
            if not arrival(candidate_index, messages, reset_record, state_after_reset):
                return None
        chat: list[dict[str, Any]] = [{"role": m.role, "content": m.content} for m in messages]
        trajectory: list[TurnSegment] = []
        exchanges: list[ReplayExchange] = []
        total = 0.0
        steps = recoverable = tokens = 0
        latency = 0.0
        termination: EpisodeTermination = "max_steps"
        error_code: str | None = None
        ended_by_terminal_code = False
        invalid = False
        latest: Any = reset.observation
        penalty = controls.protocol_error_reward
        retain = controls.grpo_output is not None
        generations: list[Generation] = []

        def add(*segments: TurnSegment) -> None:
            trajectory.extend(segments)
            chat.extend({"role": s.role, "content": s.content} for s in segments)

        for step_index in range(controls.max_steps):
            request = PolicyRequest.for_step(
                messages=list(chat),
                action_schema=env.inspection.schema_.action,
                seed=group.seed,
                candidate_index=candidate_index,
                step_index=step_index,
                temperature=controls.temperature,
                max_action_tokens=controls.max_action_tokens,
                thinking=controls.thinking,
                observation=latest,
                environment_name=env.name,
                thinking_budget_tokens=controls.thinking_budget_tokens,
                # recording: the policy continues the token stream of the previous turn
                prior=generations[-1].provenance if generations else None,
            )
            response = await _act(session, policy, request)
            if retain:
                where = f"group {group.group_index} candidate {candidate_index} step {step_index}"
                generations.append(_retain(response, budget, where))
            tokens += response.total_tokens
            latency += response.latency_ms
            reply = judge_model_reply(
                response.text, response.reasoning, thinking=controls.thinking, rules=env
            )
            text = reply.text
            budget.charge_bytes(len(text.encode("utf-8")), "a model action")
            parsed = reply.action
            if parsed is None:
                assert reply.code is not None
                assert reply.message is not None
                add(action_segment(text), harness_error_segment(reply.code, reply.message))
                invalid = True
                break
            steps += 1
            error: ProtocolError | None = None
            try:
                observation = await session.step(parsed)
            except (RecoverableProtocolError, TerminalProtocolError) as exc:
                if exc.error is None:
                    raise
                error = exc.error
            if error is None:
                obs_record = observation_record(observation)
                budget.charge_parsed(
                    observation.observation, observation.metadata, what="an observation"
                )
                total = _finite(total + observation.reward.training_value)
                add(
                    action_segment(text),
                    observation_turn(observation_content("step result", obs_record)),
                )
                exchanges.append(observation_exchange(step_index, parsed, obs_record))
                latest = observation.observation
                if observation.done:
                    termination = "done"
                    break
                continue
            error_record = ProtocolErrorRecord.from_wire(error)
            budget.charge_parsed(error.message, error.errors, what="a protocol error")
            continued = error.recoverable and recoverable < controls.max_recoverable_errors
            if error.recoverable:
                recoverable += 1
            total = _finite(total + penalty)
            add(action_segment(text), protocol_error_segment(error_record, continued))
            exchanges.append(
                ReplayExchange(
                    step_index=step_index,
                    action=parsed,
                    result=ProtocolErrorResult(error=error_record, continued=continued),
                )
            )
            if not continued:
                termination = "protocol_error"
                error_code = error_record.code
                ended_by_terminal_code = not error.recoverable
                break
        if invalid:
            termination = "invalid_model_action"
            total = _finite(total + penalty)
        state_kwargs: dict[str, Any] = {}
        if not ended_by_terminal_code:
            final_state = await session.state()
            budget.charge_parsed(final_state, what="a final state")
            state_kwargs["final_state"] = final_state
    finally:
        await session.close()

    done = termination == "done"
    replay = ReplayCandidate(
        candidate_index=candidate_index,
        exchanges=exchanges,
        **state_kwargs,
        episode_return=total,
        terminal_done=done,
        termination=termination,
        recoverable_protocol_errors=recoverable,
        capacity_retries=acquisition.retries,
        model_tokens=tokens,
        model_latency_ms=latency,
    )
    identity = env.inspection.identity
    provenance = OpenEnvRolloutProvenance(
        schema=ROLLOUT_SCHEMA,
        environment_name=identity.metadata.name,
        environment_base_url=identity.base_url,
        openapi_version=identity.openapi_version,
        discovery_sha256=identity.discovery_sha256,
        environment_schema_sha256=identity.schema_sha256,
        action_schema_sha256=env.action_schema_sha256,
        behavior_policy=behavior,
        reset_sha256=str(group.reset_sha256),
        seed=group.seed,
        steps=steps,
        episode_return=total,
        terminal_done=done,
        termination=termination,
        protocol_error_code=error_code,
    )
    rollout = ScoredRollout(
        text=TURN_BREAK.join(s.content for s in trajectory if s.kind == "action"),
        reward=total,
        trajectory=trajectory,
        openenv=provenance,
    )
    record = RolloutRecord(
        group_index=group.group_index,
        candidate_index=candidate_index,
        environment_name=identity.metadata.name,
        environment_url=identity.base_url,
        seed=group.seed,
        steps=steps,
        episode_return=total,
        terminal_done=done,
        termination=termination,
        recoverable_protocol_errors=recoverable,
        capacity_retries=acquisition.retries,
        model_tokens=tokens,
        model_latency_ms=latency,
        protocol_error_code=error_code,
    )
    return EpisodeResult(
        candidate_index, messages, reset_record, rollout, replay, record, tuple(generations)
    )
