"""One candidate episode as a Sans-I/O state machine (kiln-openenv-contract §5.4, §7.3).

Modelled on websockets' protocol objects: :class:`EpisodeMachine` does no I/O and never
awaits. The driver (:func:`kiln_verify.openenv.collect.episode.run_episode`) feeds it what
happened -- the reset observation, each policy response, each step's observation or
protocol error, the final state -- and asks it what to do next (:meth:`EpisodeMachine.
next_command`): ask the policy, send a step, read the final state, or nothing (finished).
So every row of the outcome table is decided here, and tests drive it without sockets:

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

``final_state`` is read after every ending except a terminal-code error. Transport,
timeout, poisoning and reflection failures never reach the machine: the driver's session
raises them and the whole collection aborts (the table's last row).

The per-step facts are kept as frozen slotted dataclasses (:class:`Segment`,
:class:`Exchange`): built without validation by construction, from values the wire
decoder and this module produced. Pydantic records are built where bytes entered (the
observation and error records of each reply) and where the episode's records leave the
engine (:mod:`.assemble`). Every retained value is charged to the collection's
:class:`~kiln_verify.openenv.collect.plan.RetainedBudget` as it arrives, in the order the
reference loop charged it. With ``--grpo-output`` each model call's token provenance is
kept (:class:`Generation`); a response without it is ``policy_provenance_missing``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Final, Literal

from kiln_verify.errors import PolicyProvenanceMissing, ProtocolViolation, ResetDone
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.environment import EpisodeEnvironment
from kiln_verify.openenv.collect.plan import GroupPlan, RetainedBudget
from kiln_verify.openenv.policy.base import PolicyRequest, PolicyResponse
from kiln_verify.openenv.protocol.wire import Observation, ProtocolError
from kiln_verify.openenv.records.observation import (
    EpisodeTermination,
    ObservationRecord,
    ProtocolErrorRecord,
)
from kiln_verify.openenv.records.prompt import (
    harness_error_content,
    initial_messages,
    judge_model_reply,
    observation_content,
    protocol_error_content,
)
from kiln_verify.records import ChatMessage, TokenProvenance

__all__ = [
    "FINISHED",
    "READ_STATE",
    "AskPolicy",
    "Command",
    "EpisodeMachine",
    "EpisodeOutcome",
    "Exchange",
    "Generation",
    "Segment",
    "SendStep",
]


@dataclass(frozen=True, slots=True)
class AskPolicy:
    """Call the policy with ``request`` (under the session's keep-alive)."""

    request: PolicyRequest


@dataclass(frozen=True, slots=True)
class SendStep:
    """Send ``step(action)``; feed back its observation or protocol error."""

    action: dict[str, Any]


class _Order(enum.Enum):
    READ_STATE = "read_state"
    FINISHED = "finished"


READ_STATE: Final = _Order.READ_STATE
"""Read the session's ``state`` once and feed it to :meth:`EpisodeMachine.final_state`."""
FINISHED: Final = _Order.FINISHED
"""Nothing left to do: close the session and take :meth:`EpisodeMachine.outcome`."""

Command = AskPolicy | SendStep | Literal[_Order.READ_STATE, _Order.FINISHED]


@dataclass(frozen=True, slots=True)
class Generation:
    """One model call as a GRPO completion needs it: its final content and exact tokens."""

    text: str
    provenance: TokenProvenance


@dataclass(frozen=True, slots=True)
class Segment:
    """One trajectory segment: an action, an observation, or a whole-content warning (a
    protocol-error or harness-error result)."""

    kind: Literal["action", "observation", "warning"]
    content: str

    @property
    def role(self) -> str:
        return "assistant" if self.kind == "action" else "tool"


@dataclass(frozen=True, slots=True)
class Exchange:
    """One ``step`` that reached the wire: the action and what came back."""

    step_index: int
    action: dict[str, Any]
    observation: ObservationRecord | None = None
    error: ProtocolErrorRecord | None = None
    continued: bool = False


@dataclass(frozen=True, slots=True)
class EpisodeOutcome:
    """Everything the episode's records are assembled from (:mod:`.assemble`)."""

    messages: list[ChatMessage]
    reset_observation: ObservationRecord
    trajectory: tuple[Segment, ...]
    exchanges: tuple[Exchange, ...]
    termination: EpisodeTermination
    episode_return: float
    steps: int
    recoverable_protocol_errors: int
    model_tokens: int
    model_latency_ms: float
    protocol_error_code: str | None
    has_final_state: bool
    final_state: Any
    generations: tuple[Generation, ...]


def _finite(total: float) -> float:
    if not math.isfinite(total):
        raise ProtocolViolation("the episode return is no longer a finite number")
    return total


class EpisodeMachine:
    """The §7.3 outcome table of one candidate; see the module docstring."""

    def __init__(
        self,
        env: EpisodeEnvironment,
        group: GroupPlan,
        candidate_index: int,
        *,
        controls: CollectionControls,
        budget: RetainedBudget,
    ) -> None:
        self._env = env
        self._group = group
        self._candidate = candidate_index
        self._options = controls.options
        self._budget = budget
        self._retain = controls.grpo_output is not None
        self._next: Command | None = None  # None: waiting for the reset observation
        self.messages: list[ChatMessage] = []
        self._reset: ObservationRecord | None = None
        self._chat: list[dict[str, Any]] = []
        self._trajectory: list[Segment] = []
        self._exchanges: list[Exchange] = []
        self._generations: list[Generation] = []
        self._latest: Any = None
        self._step_index = 0
        self._text = ""
        self._total = 0.0
        self._steps = self._recoverable = self._tokens = 0
        self._latency = 0.0
        self._termination: EpisodeTermination = "max_steps"
        self._error_code: str | None = None
        self._has_state = False
        self._state: Any = None

    # -- what to do next -------------------------------------------------------------------

    def next_command(self) -> Command:
        """The driver's next job; the same until the event it waits for is fed back."""
        if self._next is None:
            raise RuntimeError("the episode has not been reset")
        return self._next

    def _expect(self, kind: type[AskPolicy] | type[SendStep] | _Order) -> None:
        pending = self._next
        if (pending is not kind) if isinstance(kind, _Order) else (type(pending) is not kind):
            raise RuntimeError(f"the episode is not waiting for that (it waits for {pending!r})")

    def _ask(self) -> None:
        """The request for the model turn ``self._step_index``."""
        env, options, group = self._env, self._options, self._group
        self._next = AskPolicy(
            PolicyRequest.for_step(
                messages=list(self._chat),
                action_schema=env.inspection.schema_.action,
                seed=group.seed,
                candidate_index=self._candidate,
                step_index=self._step_index,
                temperature=options.temperature,
                max_action_tokens=options.max_action_tokens,
                thinking=options.thinking,
                observation=self._latest,
                environment_name=env.name,
                thinking_budget_tokens=options.thinking_budget_tokens,
                # recording: the policy continues the token stream of the previous turn
                prior=self._generations[-1].provenance if self._generations else None,
            )
        )

    def _end(self, termination: EpisodeTermination, *, read_state: bool = True) -> None:
        self._termination = termination
        self._next = READ_STATE if read_state else FINISHED

    def _add(self, *segments: Segment) -> None:
        self._trajectory.extend(segments)
        self._chat.extend({"role": s.role, "content": s.content} for s in segments)

    # -- events ----------------------------------------------------------------------------

    @property
    def last_segment(self) -> Segment | None:
        """The newest trajectory segment: what the model is shown as the answer to its last
        action (an observation, a protocol error or a harness error); ``None`` before any.
        A tool-calling front end (:mod:`kiln_verify.trl`) returns exactly this text."""
        return self._trajectory[-1] if self._trajectory else None

    @property
    def reset_observation(self) -> ObservationRecord:
        if self._reset is None:
            raise RuntimeError("the episode has not been reset")
        return self._reset

    def reset(self, observation: Observation) -> None:
        """The reset observation: the prompt is built from it (``reset_done`` if done)."""
        if self._next is not None or self._reset is not None:
            raise RuntimeError("the episode was already reset")
        env, group = self._env, self._group
        if observation.done:
            raise ResetDone(
                f"environment {env.index} ({env.name!r}) answered reset(seed={group.seed}) "
                "with done: true"
            )
        record = self._reset = ObservationRecord.from_wire(observation)
        self._budget.charge_parsed(
            observation.observation, observation.metadata, what="a reset observation"
        )
        self.messages = initial_messages(env.inspection, record, system=env.system_prompt)
        self._chat = [{"role": m.role, "content": m.content} for m in self.messages]
        self._latest = observation.observation
        self._ask()

    def policy_answered(self, response: PolicyResponse) -> None:
        """The policy's reply to the pending :class:`AskPolicy`: an action to send, or the
        invalid-action tail that ends the episode (no exchange, penalty last)."""
        self._expect(AskPolicy)
        budget, options = self._budget, self._options
        if self._retain:
            self._generations.append(self._retained(response))
        self._tokens += response.total_tokens
        self._latency += response.latency_ms
        reply = judge_model_reply(
            response.text, response.reasoning, thinking=options.thinking, rules=self._env
        )
        text = self._text = reply.text
        budget.charge_bytes(len(text.encode("utf-8")), "a model action")
        if reply.action is None:
            assert reply.code is not None
            assert reply.message is not None
            self._add(
                Segment("action", text),
                Segment("warning", harness_error_content(reply.code, reply.message)),
            )
            self._total = _finite(self._total + options.protocol_error_reward)
            self._end("invalid_model_action")
            return
        self._steps += 1
        self._next = SendStep(reply.action)

    def step_answered(self, observation: Observation) -> None:
        """The observation answering the pending :class:`SendStep`."""
        self._expect(SendStep)
        assert isinstance(self._next, SendStep)
        action = self._next.action
        record = ObservationRecord.from_wire(observation)
        self._budget.charge_parsed(
            observation.observation, observation.metadata, what="an observation"
        )
        self._total = _finite(self._total + observation.reward.training_value)
        self._add(
            Segment("action", self._text),
            Segment("observation", observation_content("step result", record)),
        )
        self._exchanges.append(Exchange(self._step_index, action, observation=record))
        self._latest = observation.observation
        if observation.done:
            self._end("done")
        else:
            self._advance()

    def step_refused(self, error: ProtocolError) -> None:
        """The protocol error answering the pending :class:`SendStep`: the episode goes on
        on the same socket only for a recoverable code within the budget."""
        self._expect(SendStep)
        assert isinstance(self._next, SendStep)
        action = self._next.action
        options = self._options
        record = ProtocolErrorRecord.from_wire(error)
        self._budget.charge_parsed(error.message, error.errors, what="a protocol error")
        continued = error.recoverable and self._recoverable < options.max_recoverable_errors
        if error.recoverable:
            self._recoverable += 1  # also the error that exhausts the budget (max + 1)
        self._total = _finite(self._total + options.protocol_error_reward)
        self._add(
            Segment("action", self._text),
            Segment("warning", protocol_error_content(record, continued)),
        )
        exchange = Exchange(self._step_index, action, error=record, continued=continued)
        self._exchanges.append(exchange)
        if continued:
            self._advance()
            return
        self._error_code = record.code
        # a terminal-code error has closed the session: no final state
        self._end("protocol_error", read_state=error.recoverable)

    def final_state(self, state: Any) -> None:
        """The session's ``state`` after the episode ended (the pending :data:`READ_STATE`)."""
        self._expect(READ_STATE)
        self._budget.charge_parsed(state, what="a final state")
        self._has_state, self._state = True, state
        self._next = FINISHED

    def _advance(self) -> None:
        self._step_index += 1
        if self._step_index < self._options.max_steps:
            self._ask()
        else:
            self._end("max_steps")

    def _retained(self, response: PolicyResponse) -> Generation:
        """Keep one response's provenance, charged at its compact-JSON size like other data."""
        provenance = response.provenance
        if provenance is None:
            where = (
                f"group {self._group.group_index} candidate {self._candidate} "
                f"step {self._step_index}"
            )
            raise PolicyProvenanceMissing(
                f"{where}: the policy returned no token provenance, so no GRPO completion "
                "can be built; nothing was published"
            )
        self._budget.charge(
            list(provenance.prompt_token_ids),
            list(provenance.completion_token_ids),
            list(provenance.behavior_logprobs),
            response.text,
            what="token provenance",
        )
        return Generation(response.text, provenance)

    # -- the result ------------------------------------------------------------------------

    def outcome(self) -> EpisodeOutcome:
        """The finished episode (only once :meth:`next_command` is :data:`FINISHED`)."""
        self._expect(FINISHED)
        return EpisodeOutcome(
            messages=self.messages,
            reset_observation=self.reset_observation,
            trajectory=tuple(self._trajectory),
            exchanges=tuple(self._exchanges),
            termination=self._termination,
            episode_return=self._total,
            steps=self._steps,
            recoverable_protocol_errors=self._recoverable,
            model_tokens=self._tokens,
            model_latency_ms=self._latency,
            protocol_error_code=self._error_code,
            has_final_state=self._has_state,
            final_state=self._state,
            generations=tuple(self._generations),
        )
