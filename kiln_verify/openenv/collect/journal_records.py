"""Between a collection's live records and its journal records, and the journal's rules.

:func:`journal_header` records the controls, policy, environments and group range a
journal starts with; :func:`check_header` refuses a header that another plan
(``journal_plan_mismatch``) or other controls (``journal_controls_changed``) wrote, naming
every field that differs; :func:`check_environments` refuses environments that no longer
equal the header's inspection (``journal_environment_changed``). :func:`journal_group`
and :func:`collected_group` turn a finished group into its entry and back: the entry holds
exactly the Kiln records the bundle holds for the group, so a group read back builds the
same bytes as the group collected.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from kiln_verify.errors import (
    JournalControlsChanged,
    JournalEntryTampered,
    JournalEnvironmentChanged,
    JournalPlanMismatch,
)
from kiln_verify.openenv.collect.bundle import WrittenGroup
from kiln_verify.openenv.collect.controls import OPTION_NAMES, CollectionControls, CollectionOptions
from kiln_verify.openenv.collect.engine import CollectedGroup
from kiln_verify.openenv.collect.episode import EpisodeResult
from kiln_verify.openenv.collect.plan import GroupPlan, ResetPlan, group_plan
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.journal import (
    JOURNAL_GROUP_SCHEMA,
    JOURNAL_SCHEMA,
    JournalGroup,
    JournalHeader,
)
from kiln_verify.records import BehaviorPolicyIdentity

__all__ = [
    "PLAN_FIELDS",
    "check_environments",
    "check_header",
    "collected_group",
    "header_controls",
    "journal_group",
    "journal_header",
    "planned_groups",
]

PLAN_FIELDS = ("environments", "reset_templates", "groups", "group_size", "seed_start")
"""The controls that fix the group plan; a difference in any is another plan."""


def journal_header(
    controls: CollectionControls,
    groups: range,
    behavior: BehaviorPolicyIdentity,
    inspections: Sequence[EnvironmentInspection],
) -> JournalHeader:
    """The header of a journal collecting ``groups`` of ``controls``' plan."""
    options = controls.options
    return JournalHeader(
        schema=JOURNAL_SCHEMA,
        groups_start=groups.start,
        groups_stop=groups.stop,
        environments=list(controls.environments),
        reset_templates=[dict(template) for template in controls.reset_templates],
        credential_envs=list(controls.credential_envs),
        options={name: getattr(options, name) for name in OPTION_NAMES},
        output_path=controls.output,
        replay_output_path=controls.replay_output,
        summary_output_path=controls.summary_output,
        reset_plan_sha256=str(ResetPlan.from_templates(controls.reset_templates).sha256),
        behavior_policy=behavior,
        environment_inspections=list(inspections),
    )


def header_controls(header: JournalHeader) -> CollectionControls:
    """The controls a header recorded (``force`` and ``grpo_output`` are not recorded)."""
    unknown = set(header.options) ^ set(OPTION_NAMES)
    if unknown:
        raise JournalPlanMismatch(
            f"the journal's options are not this version's ({', '.join(sorted(unknown))})",
            fields=tuple(sorted(unknown)),
        )
    return CollectionControls.create(
        header.environments,
        reset_templates=header.reset_templates,
        credential_envs=header.credential_envs,
        options=CollectionOptions(**header.options),
        output=header.output_path,
        replay_output=header.replay_output_path,
        summary_output=header.summary_output_path,
    )


def _values(controls: CollectionControls) -> dict[str, Any]:
    values: dict[str, Any] = {
        "environments": list(controls.environments),
        "reset_templates": [dict(template) for template in controls.reset_templates],
        "credential_envs": list(controls.credential_envs),
        "output": controls.output,
        "replay_output": controls.replay_output,
        "summary_output": controls.summary_output,
    }
    for name in OPTION_NAMES:
        value = getattr(controls.options, name)
        # a float compared by its bits: -0.0 is not 0.0, as it is not in the bundle
        values[name] = (type(value), repr(value)) if isinstance(value, float) else value
    return values


def differing_fields(left: CollectionControls, right: CollectionControls) -> list[str]:
    """The control fields whose values differ (plan fields first)."""
    a, b = _values(left), _values(right)
    names = [name for name in a if a[name] != b[name]]
    return sorted(names, key=lambda name: (name not in PLAN_FIELDS, name))


def check_header(
    header: JournalHeader,
    controls: CollectionControls,
    groups: range,
    behavior: BehaviorPolicyIdentity,
    *,
    what: str = "the journal",
) -> None:
    """``controls``, ``groups`` and ``behavior`` are the header's, or the typed refusal."""
    recorded = header_controls(header)
    changed = differing_fields(recorded, controls)
    plan = [name for name in changed if name in PLAN_FIELDS]
    if not plan and (header.groups_start, header.groups_stop) != (groups.start, groups.stop):
        plan.append("groups_range")
    if plan:
        raise JournalPlanMismatch(
            f"{what} was written for another plan (groups [{header.groups_start}, "
            f"{header.groups_stop}) recorded); changed: {', '.join(f'`{n}`' for n in plan)}",
            fields=tuple(plan),
        )
    if header.behavior_policy != behavior:
        changed.append("policy")
    if changed:
        raise JournalControlsChanged(
            f"{what} was started with other controls; changed: "
            + ", ".join(f"`{name}`" for name in changed),
            fields=tuple(changed),
        )


def check_environments(
    header: JournalHeader, found: Sequence[EnvironmentInspection], *, what: str = "the journal"
) -> None:
    """Every environment inspected now equals the header's inspection of it."""
    problems: list[str] = []
    for index, (recorded, now) in enumerate(
        zip(header.environment_inspections, found, strict=True)
    ):
        if recorded == now:
            continue
        old, new = recorded.to_json(), now.to_json()
        keys = [
            f"{part}.{key}"
            for part in ("identity", "schema")
            for key in sorted(set(old[part]) | set(new[part]))
            if old[part].get(key) != new[part].get(key)
        ]
        problems.append(f"environment {index} ({now.identity.base_url}): {', '.join(keys)}")
    if problems:
        raise JournalEnvironmentChanged(
            f"an environment differs from the one {what} recorded; nothing was published: "
            + "; ".join(problems)
        )


def planned_groups(controls: CollectionControls, groups: range) -> Iterator[GroupPlan]:
    """The plan's groups ``groups`` (seeds and rotation as the whole plan gives them)."""
    reset_plan = ResetPlan.from_templates(controls.reset_templates)
    return group_plan(reset_plan, groups.stop, controls.options.seed_start, first=groups.start)


def journal_group(
    group: CollectedGroup, written: WrittenGroup, previous: str
) -> tuple[JournalGroup, dict[str, Any]]:
    """The entry of a finished group, linked to the entry before it, and its members the
    bundle's writing already wrote (``frame``'s ``given``: the corpus line's JSON and the
    replay group's tree), so that framing the entry walks only its rollouts."""
    entry = JournalGroup(
        schema=JOURNAL_GROUP_SCHEMA,
        group_index=group.plan.group_index,
        previous_sha256=previous,
        corpus=written.corpus,
        replay=written.replay,
        rollouts=[episode.record for episode in group.episodes],
    )
    given: dict[str, Any] = {"corpus": orjson.Fragment(written.corpus_line.removesuffix(b"\n"))}
    if written.replay_tree is not None:
        given["replay"] = written.replay_tree
    return entry, given


def collected_group(
    entry: JournalGroup, plan: GroupPlan, group_size: int, source: str
) -> CollectedGroup:
    """The group an entry holds, once it is group ``plan`` of the plan, whole."""
    replay = entry.replay
    completions = entry.corpus.completions
    sizes = {len(completions), len(replay.candidates), len(entry.rollouts)}
    if (
        (replay.group_index, replay.environment_index, replay.seed)
        != (plan.group_index, plan.environment_index, plan.seed)
        or replay.reset_payload != plan.reset_payload
        or sizes != {group_size}
        or any(
            (record.group_index, record.candidate_index, record.seed, candidate.candidate_index)
            != (plan.group_index, index, plan.seed, index)
            for index, (record, candidate) in enumerate(
                zip(entry.rollouts, replay.candidates, strict=True)
            )
        )
    ):
        raise JournalEntryTampered(
            f"the entry is not group {plan.group_index} of the plan (index, environment, seed, "
            "reset payload or candidates)",
            path=source,
        )
    messages = entry.corpus.messages
    reset = replay.reset_observation
    episodes = [
        EpisodeResult(index, messages, reset, rollout, candidate, record)
        for index, (rollout, candidate, record) in enumerate(
            zip(completions, replay.candidates, entry.rollouts, strict=True)
        )
    ]
    return CollectedGroup(plan, messages, reset, episodes)
