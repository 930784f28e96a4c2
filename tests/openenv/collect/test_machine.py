"""The episode state machine driven directly, without sockets: every row of the outcome
table (kiln-openenv-contract §7.3), the reset rules, the return's finiteness, misuse, the
GRPO provenance rule, and the driver's share of the last row (a client error aborts)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import pytest

from kiln_verify.errors import (
    EnvironmentTimeout,
    PolicyProvenanceMissing,
    ProtocolViolation,
    RecoverableProtocolError,
    ResetDone,
    TerminalProtocolError,
)
from kiln_verify.openenv.collect import CollectionControls, CollectionOptions
from kiln_verify.openenv.collect.assemble import episode_result
from kiln_verify.openenv.collect.environment import EnvironmentContext
from kiln_verify.openenv.collect.episode import run_episode
from kiln_verify.openenv.collect.machine import (
    FINISHED,
    READ_STATE,
    AskPolicy,
    EpisodeMachine,
    EpisodeOutcome,
    SendStep,
)
from kiln_verify.openenv.collect.plan import GroupPlan, RetainedBudget
from kiln_verify.openenv.policy.base import PolicyRequest, PolicyResponse
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.openenv.protocol.action_schema import ActionSchema
from kiln_verify.openenv.protocol.client import OpenEnvClient
from kiln_verify.openenv.protocol.wire import ErrorCode, Observation, ProtocolError, Reward
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.records import BehaviorPolicyIdentity, SamplingParameters, TokenProvenance
from tests.openenv.records.fixtures import ACTION_SCHEMA, BEHAVIOR, inspection

PENALTY = -1.0
STATE = {"pulls": 3}


def _env() -> EnvironmentContext:
    return EnvironmentContext(
        0,
        cast(OpenEnvClient, None),  # the machine never touches the client
        EnvironmentInspection.from_json(inspection()),
        ActionSchema(ACTION_SCHEMA),
    )


def _group() -> GroupPlan:
    return GroupPlan(0, 0, 7, {"seed": 7})


def _controls(**options: Any) -> CollectionControls:
    settings = {"max_steps": 3, "max_recoverable_errors": 1, "thinking": False, **options}
    return CollectionControls.create(["http://127.0.0.1:1"], options=CollectionOptions(**settings))


def _observation(reward: Any = 1, *, done: bool = False) -> Observation:
    return Observation({"pulls": 1}, Reward.from_json(reward), done, None)


def _error(code: ErrorCode) -> ProtocolError:
    return ProtocolError(code, "refused")


def _machine(**options: Any) -> EpisodeMachine:
    machine = EpisodeMachine(
        _env(), _group(), 1, controls=_controls(**options), budget=RetainedBudget()
    )
    machine.reset(_observation(None))
    return machine


def _act(machine: EpisodeMachine, text: str = '{"arm": 1}') -> Any:
    command = machine.next_command()
    assert type(command) is AskPolicy
    machine.policy_answered(PolicyResponse(text=text, prompt_tokens=2, completion_tokens=3))
    return machine.next_command()


def _finish(machine: EpisodeMachine, *, read_state: bool = True) -> EpisodeOutcome:
    if read_state:
        assert machine.next_command() is READ_STATE
        machine.final_state(STATE)
    assert machine.next_command() is FINISHED
    outcome = machine.outcome()
    # the records the driver hands out are valid contract records
    result = episode_result(
        _env(),
        _group(),
        1,
        outcome,
        behavior=BehaviorPolicyIdentity.from_json(BEHAVIOR),
        capacity_retries=0,
    )
    assert result.rollout.reward == outcome.episode_return
    assert result.replay.has_final_state == read_state
    assert len(result.replay.exchanges) == len(outcome.exchanges)
    return outcome


def _kinds(outcome: EpisodeOutcome) -> list[str]:
    return [segment.kind for segment in outcome.trajectory]


def test_the_first_request_is_built_from_the_reset() -> None:
    machine = _machine()
    command = machine.next_command()
    assert type(command) is AskPolicy
    request: PolicyRequest = command.request
    assert (request.seed, request.candidate_index, request.step_index) == (7, 1, 0)
    assert [m["role"] for m in request.messages] == ["system", "user"]
    assert request.observation == {"pulls": 1}
    assert machine.messages[1].content == request.messages[1]["content"]


def test_observation_not_done_continues() -> None:
    machine = _machine()
    assert _act(machine) == SendStep({"arm": 1})
    machine.step_answered(_observation(2))
    command = machine.next_command()
    assert type(command) is AskPolicy
    assert command.request.step_index == 1
    assert [m["role"] for m in command.request.messages][2:] == ["assistant", "tool"]


def test_observation_done_ends_with_done_and_reads_the_state() -> None:
    machine = _machine()
    _act(machine)
    machine.step_answered(_observation(2))
    _act(machine)
    machine.step_answered(_observation(0.5, done=True))
    outcome = _finish(machine)
    assert outcome.termination == "done"
    assert outcome.episode_return == 2.5
    assert (outcome.steps, len(outcome.exchanges)) == (2, 2)
    assert (outcome.final_state, outcome.model_tokens) == (STATE, 10)
    assert _kinds(outcome) == ["action", "observation"] * 2


def test_recoverable_error_within_budget_continues_on_the_same_socket() -> None:
    machine = _machine()
    _act(machine)
    machine.step_refused(_error(ErrorCode.EXECUTION_ERROR))
    assert type(machine.next_command()) is AskPolicy
    _act(machine)
    machine.step_answered(_observation(1, done=True))
    outcome = _finish(machine)
    first = outcome.exchanges[0]
    assert (first.continued, first.error is not None) == (True, True)
    assert outcome.recoverable_protocol_errors == 1
    assert outcome.episode_return == PENALTY + 1
    assert _kinds(outcome) == ["action", "warning", "action", "observation"]


def test_recoverable_error_past_the_budget_ends_with_its_code_and_state() -> None:
    machine = _machine(max_recoverable_errors=0)
    _act(machine)
    machine.step_refused(_error(ErrorCode.VALIDATION_ERROR))
    outcome = _finish(machine)  # not a terminal code: the state is read
    assert outcome.termination == "protocol_error"
    assert outcome.protocol_error_code == "VALIDATION_ERROR"
    assert outcome.recoverable_protocol_errors == 1  # max + 1
    assert (outcome.steps, outcome.exchanges[0].continued) == (1, False)
    assert outcome.episode_return == PENALTY


@pytest.mark.parametrize(
    "code", [ErrorCode.CAPACITY_REACHED, ErrorCode.FACTORY_ERROR, ErrorCode.SESSION_ERROR]
)
def test_terminal_error_ends_without_a_final_state(code: ErrorCode) -> None:
    machine = _machine()
    _act(machine)
    machine.step_answered(_observation(3))
    _act(machine)
    machine.step_refused(_error(code))
    outcome = _finish(machine, read_state=False)
    assert outcome.termination == "protocol_error"
    assert outcome.protocol_error_code == code.value
    assert (outcome.has_final_state, outcome.recoverable_protocol_errors) == (False, 0)
    assert outcome.episode_return == 3 + PENALTY
    assert outcome.exchanges[-1].continued is False


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("pull arm 1", "INVALID_MODEL_ACTION"),
        ("[1]", "INVALID_MODEL_ACTION"),
        ('{"arm": "one"}', "ACTION_SCHEMA_VALIDATION_FAILED"),
        ("   ", "MODEL_ACTION_NO_OUTPUT"),
    ],
)
def test_invalid_replies_end_the_episode_off_the_wire(text: str, code: str) -> None:
    machine = _machine()
    _act(machine)
    machine.step_answered(_observation(1))
    assert _act(machine, text) is READ_STATE  # nothing is sent
    outcome = _finish(machine)
    assert outcome.termination == "invalid_model_action"
    assert (outcome.steps, len(outcome.exchanges)) == (1, 1)  # the tail is not a step
    assert outcome.episode_return == 1 + PENALTY  # the penalty comes last
    assert _kinds(outcome) == ["action", "observation", "action", "warning"]
    assert f'"code":"{code}"' in outcome.trajectory[-1].content


def test_horizon_exhausted_ends_with_max_steps() -> None:
    machine = _machine(max_steps=2)
    for _ in range(2):
        _act(machine)
        machine.step_answered(_observation(1))
    outcome = _finish(machine)
    assert outcome.termination == "max_steps"
    assert (outcome.steps, len(outcome.exchanges)) == (2, 2)
    assert [e.step_index for e in outcome.exchanges] == [0, 1]


def test_a_done_reset_is_refused() -> None:
    machine = EpisodeMachine(_env(), _group(), 0, controls=_controls(), budget=RetainedBudget())
    with pytest.raises(ResetDone):
        machine.reset(_observation(None, done=True))


def test_a_return_that_stops_being_finite_is_a_protocol_violation() -> None:
    machine = _machine()
    _act(machine)
    machine.step_answered(_observation(1.7e308))  # finite so far
    _act(machine)
    with pytest.raises(ProtocolViolation):
        machine.step_answered(_observation(1.7e308))  # the sum overflows to infinity


def test_feeding_what_the_machine_does_not_wait_for_is_a_bug() -> None:
    machine = EpisodeMachine(_env(), _group(), 0, controls=_controls(), budget=RetainedBudget())
    with pytest.raises(RuntimeError):
        machine.next_command()
    machine.reset(_observation(None))
    with pytest.raises(RuntimeError):
        machine.step_answered(_observation(1))
    with pytest.raises(RuntimeError):
        machine.final_state(STATE)
    with pytest.raises(RuntimeError):
        machine.outcome()


def test_grpo_output_needs_token_provenance() -> None:
    machine = EpisodeMachine(
        _env(),
        _group(),
        1,
        controls=CollectionControls.create(
            ["http://127.0.0.1:1"],
            options=CollectionOptions(max_steps=1, group_size=2, thinking=False),
            grpo_output="grpo.jsonl",
        ),
        budget=RetainedBudget(),
    )
    machine.reset(_observation(None))
    with pytest.raises(PolicyProvenanceMissing, match="group 0 candidate 1 step 0"):
        _act(machine)


def test_grpo_output_keeps_one_generation_per_call() -> None:
    machine = EpisodeMachine(
        _env(),
        _group(),
        1,
        controls=CollectionControls.create(
            ["http://127.0.0.1:1"],
            options=CollectionOptions(max_steps=1, group_size=2, thinking=False),
            grpo_output="grpo.jsonl",
        ),
        budget=RetainedBudget(),
    )
    machine.reset(_observation(None))
    provenance = TokenProvenance(
        prompt_token_ids=(1,), completion_token_ids=(2,), behavior_logprobs=(-0.5,),
        sources=("sampled",), seed=7, sampling=SamplingParameters(temperature=1.0, max_tokens=8),
    )  # fmt: skip
    machine.policy_answered(PolicyResponse(text='{"arm": 1}', provenance=provenance))
    machine.step_answered(_observation(1, done=True))
    outcome = _finish(machine)
    assert [g.provenance for g in outcome.generations] == [provenance]


# -- the driver: the last row of the table (a client error aborts; the session closes) --


class _Session:
    def __init__(self, replies: Sequence[Any]) -> None:
        self.replies = list(replies)
        self.closed = False

    async def keep_alive_while(self, awaitable: Any) -> Any:
        return await awaitable

    async def step(self, action: Any) -> Observation:
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        assert isinstance(reply, Observation)
        return reply

    async def state(self) -> Any:
        return STATE

    async def close(self) -> None:
        self.closed = True


class _Acquisition:
    def __init__(self, session: _Session) -> None:
        self.session = session
        self.observation = _observation(None)
        self.retries = 0


class _Client:
    def __init__(self, session: _Session) -> None:
        self.session = session

    async def open_session_with_capacity(self, wait: float, *, reset_data: Any) -> Any:
        return _Acquisition(self.session)


def _drive(replies: Sequence[Any]) -> tuple[Any, _Session]:
    session = _Session(replies)
    env = EnvironmentContext(
        0,
        cast(OpenEnvClient, _Client(session)),
        EnvironmentInspection.from_json(inspection()),
        ActionSchema(ACTION_SCHEMA),
    )
    policy = ScriptedPolicy(lambda request: '{"arm": 1}', name="t")
    result = asyncio.run(
        run_episode(
            env,
            _group(),
            0,
            controls=_controls(),
            policy=policy,
            behavior=BehaviorPolicyIdentity.from_json(BEHAVIOR),
            budget=RetainedBudget(),
        )
    )
    return result, session


def test_the_driver_feeds_replies_and_errors_to_the_machine() -> None:
    recoverable = RecoverableProtocolError("x")
    recoverable.error = _error(ErrorCode.EXECUTION_ERROR)
    terminal = TerminalProtocolError("x")
    terminal.error = _error(ErrorCode.SESSION_ERROR)
    result, session = _drive([_observation(1), recoverable, terminal])
    assert session.closed
    assert result.replay.termination == "protocol_error"
    assert not result.replay.has_final_state
    assert result.record.recoverable_protocol_errors == 1


def test_a_client_error_aborts_and_closes_the_session() -> None:
    with pytest.raises(EnvironmentTimeout):
        _drive([_observation(1), EnvironmentTimeout("no reply")])
