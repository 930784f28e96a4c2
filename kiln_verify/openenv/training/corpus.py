"""The ``kiln.openenv-training-data.v1`` lineage of a selected corpus (§3.3).

:func:`lineage_from_groups` walks the groups in order (1-based ``group_index``) and
enforces Kiln's semantic rules, each with its own code:

==========================================  ==============================================
rule                                        code
==========================================  ==============================================
every completion has ``openenv`` provenance  ``training_data_not_openenv``
``reward == openenv.episode_return`` (bits)  ``training_data_reward_mismatch``
a group's candidates share endpoint, schema  ``training_data_group_mismatch``
hashes, reset hash and seed
one base URL keeps one name and identity     ``training_data_environment_drift``
at most one behaviour-policy identity        ``training_data_behavior_policy_mixed``
at least one group                           ``training_data_empty``
totals consistent                            ``training_data_totals_inconsistent``
==========================================  ==============================================

``group_plan_sha256`` is SHA-256 over ``kiln.openenv-group-plan.v1`` + NUL, then per group
an 8-byte big-endian length and the compact JSON of the plan item (keys in Kiln's order,
``openapi_version``/``discovery_sha256`` written as ``null`` when absent), computed by the
one implementation of it, :func:`kiln_verify.openenv.records.serialize.group_plan_sha256`.
The environments are one entry per distinct base URL, sorted by URL.

:func:`lineage_from_corpus` reads JSONL bytes (the admitted corpus file): the provenance
and reward rules are checked on the parsed values first, so a corpus with a plain GRPO row
is ``training_data_not_openenv`` rather than a shape error.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any, Final

from kiln_verify.core.jsonio import iter_jsonl, iter_lines
from kiln_verify.errors import (
    TrainingDataBehaviorPolicyMixed,
    TrainingDataEmpty,
    TrainingDataEnvironmentDrift,
    TrainingDataGroupMismatch,
    TrainingDataNotOpenEnv,
    TrainingDataRewardMismatch,
)
from kiln_verify.limits import MAX_OPENENV_DATASET_BYTES
from kiln_verify.openenv.records.rollout import AgenticGroup, OpenEnvRolloutProvenance
from kiln_verify.openenv.records.serialize import group_plan_sha256
from kiln_verify.openenv.training.lineage import (
    TRAINING_DATA_SCHEMA,
    OpenEnvTerminationCountsV1,
    OpenEnvTrainingDataProvenanceV1,
    OpenEnvTrainingEnvironmentV1,
    check_lineage,
)
from kiln_verify.records import BehaviorPolicyIdentity, bits_equal, validate_record

__all__ = [
    "lineage_from_corpus",
    "lineage_from_groups",
]

_TASK_FIELDS: Final = (
    "environment_name",
    "environment_base_url",
    "openapi_version",
    "discovery_sha256",
    "environment_schema_sha256",
    "action_schema_sha256",
    "reset_sha256",
    "seed",
)
_ENDPOINT_FIELDS: Final = _TASK_FIELDS[:6]
_UNSET: Final = object()


def _plan_item(group_index: int, first: OpenEnvRolloutProvenance, rollouts: int) -> dict[str, Any]:
    """One group's item of the plan :func:`group_plan_sha256` hashes (``group_index`` 1-based)."""
    item: dict[str, Any] = {name: getattr(first, name) for name in _TASK_FIELDS}
    item.update(group_index=group_index, rollouts=rollouts)
    return item


class _Environment:
    __slots__ = ("first", "groups", "rollouts", "steps", "terminations")

    def __init__(self, first: OpenEnvRolloutProvenance) -> None:
        self.first = first
        self.groups = self.rollouts = self.steps = 0
        self.terminations = OpenEnvTerminationCountsV1.zero()

    def record(self) -> OpenEnvTrainingEnvironmentV1:
        first = self.first
        return OpenEnvTrainingEnvironmentV1(
            environment_name=first.environment_name,
            environment_base_url=first.environment_base_url,
            openapi_version=first.openapi_version,
            discovery_sha256=first.discovery_sha256,
            environment_schema_sha256=first.environment_schema_sha256,
            action_schema_sha256=first.action_schema_sha256,
            groups=self.groups,
            rollouts=self.rollouts,
            total_steps=self.steps,
            terminations=self.terminations,
        )


def _same(left: OpenEnvRolloutProvenance, right: OpenEnvRolloutProvenance, fields: Any) -> bool:
    return all(getattr(left, name) == getattr(right, name) for name in fields)


def lineage_from_groups(groups: Iterable[AgenticGroup]) -> OpenEnvTrainingDataProvenanceV1:
    """The lineage of ``groups`` (the selected corpus, in order); see the module rules."""
    plan: list[dict[str, Any]] = []
    environments: dict[str, _Environment] = {}
    behavior: BehaviorPolicyIdentity | object | None = _UNSET
    seeds: set[int] = set()
    terminations = OpenEnvTerminationCountsV1.zero()
    count = rollouts = steps = 0
    for count, group in enumerate(groups, start=1):
        first = group.completions[0].openenv
        for candidate, completion in enumerate(group.completions, start=1):
            provenance = completion.openenv
            where = f"group {count} candidate {candidate}"
            if not _same(first, provenance, _TASK_FIELDS):
                raise TrainingDataGroupMismatch(
                    f"{where} does not share the group's endpoint, schema, reset and seed"
                )
            if not bits_equal(completion.reward, provenance.episode_return):
                raise TrainingDataRewardMismatch(f"{where}: reward is not episode_return")
            if behavior is _UNSET:
                behavior = provenance.behavior_policy
            elif behavior != provenance.behavior_policy:
                raise TrainingDataBehaviorPolicyMixed(f"behaviour policy changed at {where}")
            steps += provenance.steps
            terminations = terminations.counted(provenance.termination)
        entry = environments.get(first.environment_base_url)
        if entry is None:
            entry = environments[first.environment_base_url] = _Environment(first)
        elif not _same(entry.first, first, _ENDPOINT_FIELDS):
            raise TrainingDataEnvironmentDrift(
                f"group {count}: endpoint {first.environment_base_url[:200]!r} changed name "
                "or schema identity within the corpus"
            )
        entry.groups += 1
        entry.rollouts += len(group.completions)
        for completion in group.completions:
            entry.steps += completion.openenv.steps
            entry.terminations = entry.terminations.counted(completion.openenv.termination)
        plan.append(_plan_item(count, first, len(group.completions)))
        rollouts += len(group.completions)
        seeds.add(first.seed)
    if count == 0:
        raise TrainingDataEmpty("the corpus has no group")
    lineage = OpenEnvTrainingDataProvenanceV1(
        schema=TRAINING_DATA_SCHEMA,
        groups=count,
        rollouts=rollouts,
        unique_seeds=len(seeds),
        seed_min=str(min(seeds)),
        seed_max=str(max(seeds)),
        total_steps=steps,
        terminations=terminations,
        group_plan_sha256=str(group_plan_sha256(plan)),
        behavior_policy=behavior if isinstance(behavior, BehaviorPolicyIdentity) else None,
        environments=[environments[url].record() for url in sorted(environments)],
    )
    check_lineage(lineage)
    return lineage


def _check_raw(value: Any, line: int) -> None:
    """The provenance and reward rules on a parsed line, before the record's own checks."""
    if not isinstance(value, dict):
        return  # the record reports the shape
    completions = value.get("completions", value.get("rollouts"))
    if not isinstance(completions, list):
        return
    for candidate, completion in enumerate(completions, start=1):
        if not isinstance(completion, dict):
            continue
        openenv = completion.get("openenv")
        if not isinstance(openenv, dict):
            raise TrainingDataNotOpenEnv(
                f"group {line} candidate {candidate} has no openenv provenance", line=line
            )
        reward, episode_return = completion.get("reward"), openenv.get("episode_return")
        if (
            type(reward) is float
            and type(episode_return) is float
            and not bits_equal(reward, episode_return)
        ):
            raise TrainingDataRewardMismatch(
                f"group {line} candidate {candidate}: reward is not episode_return", line=line
            )


def _groups(data: bytes, source: str | None) -> Iterable[AgenticGroup]:
    lines = iter_lines(io.BytesIO(data), max_line_bytes=MAX_OPENENV_DATASET_BYTES, source=source)
    for parsed in iter_jsonl(lines, max_line_bytes=MAX_OPENENV_DATASET_BYTES, source=source):
        _check_raw(parsed.value, parsed.number)
        yield validate_record(AgenticGroup, parsed.value, source=source, line=parsed.number)


def lineage_from_corpus(data: bytes, source: str | None = None) -> OpenEnvTrainingDataProvenanceV1:
    """The lineage of a corpus JSONL file's bytes (one ``AgenticGroup`` per line)."""
    return lineage_from_groups(_groups(data, source))
