"""A finished episode's three records, validated where they leave the engine.

The episode machine (:mod:`.machine`) keeps its per-step facts as plain dataclasses; here
they become the contract records every consumer reads (the bundle writer, the GRPO corpus,
group integrity): the corpus completion (:class:`ScoredRollout` with its
``kiln.openenv-rollout.v1`` provenance), the replay candidate and the summary record, all
through the pydantic models' own validating constructors, so the collector cannot hand a
writer a record the contract refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

from kiln_verify.openenv.collect.environment import EnvironmentContext
from kiln_verify.openenv.collect.machine import EpisodeOutcome, Exchange, Generation, Segment
from kiln_verify.openenv.collect.plan import GroupPlan
from kiln_verify.openenv.records.observation import ObservationRecord
from kiln_verify.openenv.records.replay import (
    ObservationResult,
    ProtocolErrorResult,
    ReplayCandidate,
    ReplayExchange,
)
from kiln_verify.openenv.records.rollout import (
    ROLLOUT_SCHEMA,
    TURN_BREAK,
    OpenEnvRolloutProvenance,
    ScoredRollout,
)
from kiln_verify.openenv.records.summary import RolloutRecord
from kiln_verify.records import BehaviorPolicyIdentity, ChatMessage, TurnSegment

__all__ = ["EpisodeResult", "episode_result"]


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


_SEGMENTS = {
    "action": TurnSegment.action,
    "observation": TurnSegment.observation,
    "warning": TurnSegment.full_warning,
}


def _segment(segment: Segment) -> TurnSegment:
    return _SEGMENTS[segment.kind](segment.content)


def _exchange(exchange: Exchange) -> ReplayExchange:
    if exchange.observation is not None:
        result: ObservationResult | ProtocolErrorResult = ObservationResult(
            observation=exchange.observation
        )
    else:
        assert exchange.error is not None
        result = ProtocolErrorResult(error=exchange.error, continued=exchange.continued)
    return ReplayExchange(step_index=exchange.step_index, action=exchange.action, result=result)


def episode_result(
    env: EnvironmentContext,
    group: GroupPlan,
    candidate_index: int,
    outcome: EpisodeOutcome,
    *,
    behavior: BehaviorPolicyIdentity,
    capacity_retries: int,
) -> EpisodeResult:
    """The validated records of one finished episode."""
    done = outcome.termination == "done"
    total = outcome.episode_return
    # ``final_state`` is given only when it was read: absent and null differ (§2.7).
    state = {"final_state": outcome.final_state} if outcome.has_final_state else {}
    replay = ReplayCandidate(
        candidate_index=candidate_index,
        exchanges=[_exchange(exchange) for exchange in outcome.exchanges],
        **state,
        episode_return=total,
        terminal_done=done,
        termination=outcome.termination,
        recoverable_protocol_errors=outcome.recoverable_protocol_errors,
        capacity_retries=capacity_retries,
        model_tokens=outcome.model_tokens,
        model_latency_ms=outcome.model_latency_ms,
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
        steps=outcome.steps,
        episode_return=total,
        terminal_done=done,
        termination=outcome.termination,
        protocol_error_code=outcome.protocol_error_code,
    )
    rollout = ScoredRollout(
        text=TURN_BREAK.join(s.content for s in outcome.trajectory if s.kind == "action"),
        reward=total,
        trajectory=[_segment(segment) for segment in outcome.trajectory],
        openenv=provenance,
    )
    record = RolloutRecord(
        group_index=group.group_index,
        candidate_index=candidate_index,
        environment_name=identity.metadata.name,
        environment_url=identity.base_url,
        seed=group.seed,
        steps=outcome.steps,
        episode_return=total,
        terminal_done=done,
        termination=outcome.termination,
        recoverable_protocol_errors=outcome.recoverable_protocol_errors,
        capacity_retries=capacity_retries,
        model_tokens=outcome.model_tokens,
        model_latency_ms=outcome.model_latency_ms,
        protocol_error_code=outcome.protocol_error_code,
    )
    return EpisodeResult(
        candidate_index,
        outcome.messages,
        outcome.reset_observation,
        rollout,
        replay,
        record,
        outcome.generations,
    )
