"""One candidate against its JSONL completion and summary record (kiln-openenv-contract §6.9).

* provenance (``kiln.openenv-rollout.v1``) mirrors the replay: return bits, steps, seed,
  termination, final error code, identity and schema digests, reset digest, behaviour
  policy;
* the trajectory has two segments per exchange (+2 for an invalid tail), ``text`` is the
  ``<TURN_BREAK>``-join of the action segments, each action segment parses to the recorded
  action, each result segment is the exact rendering of the recorded result;
* the summary record repeats the replay's outcome and accounting.

Deviations from Kiln's newest verifier: the invalid-action tail accepts all three harness
codes, including ``ACTION_SCHEMA_VALIDATION_FAILED``, which Kiln's own collector writes
(reference §17.1); and the tail is re-derived from the recorded model text with the
collector's rule, so its code and message must be exactly what the collector writes
(:mod:`kiln_verify.openenv.verify.tails`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kiln_verify.core.jsonenc import dumps_canonical, parsed_text
from kiln_verify.core.jsonio import loads
from kiln_verify.errors import (
    BundleProvenanceMismatch,
    BundleRecordMismatch,
    BundleReturnMismatch,
    BundleTrajectoryMismatch,
    KilnError,
)
from kiln_verify.limits import MAX_OPENENV_DATASET_BYTES
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.prompt import (
    THINK_CLOSE,
    observation_content,
    observation_json_text,
    parse_model_action,
    protocol_error_content,
)
from kiln_verify.openenv.records.replay import (
    ObservationResult,
    ProtocolErrorResult,
    ReplayCandidate,
)
from kiln_verify.openenv.records.rollout import TURN_BREAK, OpenEnvRolloutProvenance, ScoredRollout
from kiln_verify.openenv.verify.observer import HarnessError
from kiln_verify.openenv.verify.replay_checks import where
from kiln_verify.openenv.verify.summary_pass import SummaryRecord
from kiln_verify.openenv.verify.tails import TailRules
from kiln_verify.records import BehaviorPolicyIdentity, TurnSegment, bits_equal

__all__ = ["CandidateContext", "check_candidate", "final_error_code", "parse_action_text"]


@dataclass(frozen=True, slots=True)
class CandidateContext:
    """What one group's candidates are checked against (computed once per group)."""

    group: int
    seed: int
    inspection: EnvironmentInspection
    action_schema_sha256: str
    reset_sha256: str
    behavior_policy: BehaviorPolicyIdentity | None
    check_behavior_policy: bool
    dataset_shown: str
    summary_shown: str
    line: int
    thinking: bool
    tail_rules: TailRules


def final_error_code(candidate: ReplayCandidate) -> str | None:
    """The code of the non-continued error that ended the candidate, if any."""
    if candidate.exchanges:
        last = candidate.exchanges[-1].result
        if isinstance(last, ProtocolErrorResult) and not last.continued:
            return last.error.code
    return None


def parse_action_text(content: str) -> Any:
    """The action a segment's text stands for: the collector's rule
    (:func:`~kiln_verify.openenv.records.prompt.parse_model_action`) applied to what follows
    the FIRST ``</think>``; ``ValueError`` carries the reason it is not one."""
    _, found, answer = content.partition(THINK_CLOSE)
    parsed = parse_model_action(answer if found else content, max_bytes=MAX_OPENENV_DATASET_BYTES)
    if isinstance(parsed, str):
        raise ValueError(parsed)
    return parsed


def _json_content(content: str) -> Any:
    try:
        return loads(content.encode("utf-8"), max_bytes=MAX_OPENENV_DATASET_BYTES)
    except KilnError:
        return None


def _provenance_expected(
    prov: OpenEnvRolloutProvenance, candidate: ReplayCandidate, ctx: CandidateContext
) -> tuple[tuple[str, Any], ...]:
    """(``openenv`` field, the value the replay / inspection gives it), in the order the
    first difference is named: the one declaration of what provenance must mirror."""
    identity = ctx.inspection.identity
    expected: tuple[tuple[str, Any], ...] = (
        ("steps", len(candidate.exchanges)),
        ("seed", ctx.seed),
        ("termination", candidate.termination),
        ("terminal_done", candidate.terminal_done),
        ("protocol_error_code", final_error_code(candidate)),
        ("environment_name", identity.metadata.name),
        ("environment_base_url", identity.base_url),
        ("openapi_version", identity.openapi_version),
        ("environment_schema_sha256", identity.schema_sha256),
        ("action_schema_sha256", ctx.action_schema_sha256),
        ("reset_sha256", ctx.reset_sha256),
    )
    if prov.discovery_sha256 is not None:  # optional in the record: compared when present
        expected += (("discovery_sha256", identity.discovery_sha256),)
    if ctx.check_behavior_policy:
        expected += (("behavior_policy", ctx.behavior_policy),)
    return expected


def _check_provenance(
    completion: ScoredRollout, candidate: ReplayCandidate, ctx: CandidateContext
) -> None:
    prov = completion.openenv
    if not bits_equal(completion.reward, candidate.episode_return) or not bits_equal(
        prov.episode_return, candidate.episode_return
    ):
        raise BundleReturnMismatch(
            "completion reward / openenv.episode_return differ bit-wise from the replay "
            "return (§6.9)",
            path=ctx.dataset_shown,
            line=ctx.line,
            location=where(ctx.group, candidate.candidate_index),
        )
    for name, wanted in _provenance_expected(prov, candidate, ctx):
        found = getattr(prov, name)
        if found != wanted or type(found) is not type(wanted):
            raise BundleProvenanceMismatch(
                f"openenv.{name} differs from the replay / inspection (§6.9)",
                path=ctx.dataset_shown,
                line=ctx.line,
                location=where(ctx.group, candidate.candidate_index),
            )


def _segment_fail(
    ctx: CandidateContext, candidate: int, step: int | None, rule: str
) -> BundleTrajectoryMismatch:
    return BundleTrajectoryMismatch(
        rule + " (§6.9)",
        path=ctx.dataset_shown,
        line=ctx.line,
        location=where(ctx.group, candidate, step),
    )


def _check_action_segment(segment: TurnSegment) -> bool:
    return (
        segment.role == "assistant"
        and segment.kind == "action"
        and segment.tool_call_id is None
        and segment.warning_prefix_len is None
    )


def _is_result_segment(segment: TurnSegment) -> bool:
    return segment.role == "tool" and segment.kind == "observation" and segment.tool_call_id is None


def _full_warning(segment: TurnSegment) -> bool:
    return segment.warning_prefix_len == len(segment.content.encode("utf-8"))


def _check_trajectory(
    completion: ScoredRollout, candidate: ReplayCandidate, ctx: CandidateContext
) -> HarnessError | None:
    """The §6.9 trajectory checks; the invalid-action tail's harness error, if any."""
    index = candidate.candidate_index
    segments = completion.trajectory
    invalid = candidate.termination == "invalid_model_action"
    if len(segments) != 2 * (len(candidate.exchanges) + int(invalid)):
        raise _segment_fail(
            ctx, index, None, f"{len(segments)} trajectory segments break the layout"
        )
    if completion.text != TURN_BREAK.join(s.content for s in segments if s.kind == "action"):
        raise _segment_fail(ctx, index, None, "text is not the <TURN_BREAK>-join of the actions")
    for step, exchange in enumerate(candidate.exchanges):
        action, result = segments[2 * step], segments[2 * step + 1]
        if not _check_action_segment(action):
            raise _segment_fail(ctx, index, step, "action segment has the wrong role/kind/keys")
        sent = parsed_text(exchange.action, canonical=True)
        _, found_close, answer = action.content.partition(THINK_CLOSE)
        if (answer if found_close else action.content).strip() != sent:
            # not the canonical spelling: parse it as the collector did
            try:
                parsed = parse_action_text(action.content)
            except (KilnError, ValueError):
                raise _segment_fail(
                    ctx, index, step, "action segment is not one JSON object"
                ) from None
            if parsed_text(parsed, canonical=True) != sent:
                raise _segment_fail(ctx, index, step, "action segment differs from the sent action")
        if not _is_result_segment(result):
            raise _segment_fail(ctx, index, step, "result segment has the wrong role/kind/keys")
        outcome = exchange.result
        if isinstance(outcome, ObservationResult):
            observation = outcome.observation
            # the rendered text, or else the observation's compact JSON (rendered lazily)
            if result.warning_prefix_len is not None or (
                result.content != observation_content("step result", observation, parsed=True)
                and result.content != observation_json_text(observation)
            ):
                raise _segment_fail(ctx, index, step, "observation segment differs from the replay")
        else:
            if result.content != protocol_error_content(
                outcome.error, outcome.continued, parsed=True
            ):
                wanted = {
                    "openenv_error": outcome.error.to_json(),
                    "recoverable": outcome.continued,
                    "done": not outcome.continued,
                }
                found = _json_content(result.content)  # same JSON, another spelling?
                if found is None or dumps_canonical(found) != dumps_canonical(wanted):
                    raise _segment_fail(ctx, index, step, "protocol-error segment differs")
            if not _full_warning(result):
                raise _segment_fail(ctx, index, step, "error segment needs a full warning prefix")
    if invalid:
        step = len(candidate.exchanges)
        action, tail = segments[-2], segments[-1]
        if not _check_action_segment(action) or not _is_result_segment(tail):
            raise _segment_fail(ctx, index, step, "invalid-action tail has the wrong role/kind")
        if not _full_warning(tail):
            raise _segment_fail(ctx, index, step, "invalid-action tail is not a harness error")
        refusal = ctx.tail_rules.refusal(action.content, tail.content, thinking=ctx.thinking)
        if refusal is not None:
            raise _segment_fail(ctx, index, step, refusal)
        # the tail is now exactly what the collector writes: one harness-error object
        harness = _json_content(tail.content)["openenv_harness_error"]
        return HarnessError(harness["code"], harness["message"])
    return None


def _float_bits_equal(found: Any, wanted: float) -> bool:
    return type(found) is float and bits_equal(found, wanted)


def _check_record(record: SummaryRecord, candidate: ReplayCandidate, ctx: CandidateContext) -> None:
    """``record``: the summary record pass 2 read (:class:`SummaryRecord`, the object pass
    1 validated); what it must repeat of the replay, declared once, in the order the first
    difference is named. A changed file's value compares unequal and never raises."""
    identity = ctx.inspection.identity
    expected: tuple[tuple[str, Any], ...] = (
        ("group_index", ctx.group),
        ("candidate_index", candidate.candidate_index),
        ("environment_name", identity.metadata.name),
        ("environment_url", identity.base_url),
        ("seed", ctx.seed),
        ("steps", len(candidate.exchanges)),
        ("termination", candidate.termination),
        ("terminal_done", candidate.terminal_done),
        ("protocol_error_code", final_error_code(candidate)),
        ("recoverable_protocol_errors", candidate.recoverable_protocol_errors),
        ("capacity_retries", candidate.capacity_retries),
        ("model_tokens", candidate.model_tokens),
    )
    for name, wanted in expected:
        if getattr(record, name) != wanted:
            raise BundleRecordMismatch(
                f"rollouts[].{name} differs from the replay (§6.9)",
                path=ctx.summary_shown,
                location=where(ctx.group, candidate.candidate_index),
            )
    if not _float_bits_equal(record.episode_return, candidate.episode_return):
        raise BundleReturnMismatch(
            "rollouts[].episode_return differs bit-wise from the replay (§6.9)",
            path=ctx.summary_shown,
            location=where(ctx.group, candidate.candidate_index),
        )
    if not _float_bits_equal(record.model_latency_ms, candidate.model_latency_ms):
        raise BundleRecordMismatch(
            "rollouts[].model_latency_ms differs bit-wise from the replay (§6.9)",
            path=ctx.summary_shown,
            location=where(ctx.group, candidate.candidate_index),
        )


def check_candidate(
    completion: ScoredRollout,
    candidate: ReplayCandidate,
    record: SummaryRecord,
    ctx: CandidateContext,
) -> HarnessError | None:
    """All of §6.9 for one candidate (``record`` as :func:`_check_record` takes it); the
    harness error of its invalid-action tail, if it has one."""
    _check_provenance(completion, candidate, ctx)
    harness = _check_trajectory(completion, candidate, ctx)
    _check_record(record, candidate, ctx)
    return harness
