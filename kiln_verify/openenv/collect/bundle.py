"""The three files' bytes from a finished collection (kiln-openenv-contract §3, §2.7, §2.5).

Order (§5.6): corpus lines through :class:`DatasetHasher` (digest and cap as they are
built) → replay manifest bound to the corpus digest → statistics → summary v5 binding
both files by SHA-256 and byte count. Every byte comes from
:mod:`kiln_verify.openenv.records.serialize`; nothing here spells JSON itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.openenv.collect.engine import CollectedGroup, Collection
from kiln_verify.openenv.records.replay import REPLAY_SCHEMA, ReplayGroup, ReplayManifest
from kiln_verify.openenv.records.rollout import AgenticGroup
from kiln_verify.openenv.records.serialize import (
    DatasetHasher,
    replay_bytes,
    replay_group_tree,
    rollout_line_bytes,
    summary_bytes,
)
from kiln_verify.openenv.records.stats import compute_stats
from kiln_verify.openenv.records.summary import (
    SUMMARY_SCHEMA,
    RolloutSummary,
)

__all__ = [
    "LOCAL_KILN_URL",
    "Bundle",
    "WrittenGroup",
    "build_bundle",
    "corpus_group",
    "replay_group",
]

LOCAL_KILN_URL: Final = "kiln-verify:local"
"""``kiln_url`` of a bundle collected by this tool (no Kiln server served the policy)."""


@dataclass(frozen=True, slots=True, repr=False)
class Bundle:
    """The exact bytes of the three files, and the summary record they describe."""

    dataset: bytes
    replay: bytes
    summary: bytes
    record: RolloutSummary
    grpo: bytes | None = None
    """The ``--grpo-output`` corpus (:mod:`.grpo_corpus`), when one was requested."""

    def __repr__(self) -> str:  # short: see Collection.__repr__
        return (
            f"Bundle(dataset={len(self.dataset)} B, replay={len(self.replay)} B, "
            f"summary={len(self.summary)} B)"
        )


def corpus_group(group: CollectedGroup) -> AgenticGroup:
    """The group's corpus line as a record: the shared prompt and every completion."""
    return AgenticGroup(
        messages=group.messages, completions=[episode.rollout for episode in group.episodes]
    )


def replay_group(group: CollectedGroup) -> ReplayGroup:
    """The group's entry in the replay manifest."""
    plan = group.plan
    return ReplayGroup(
        group_index=plan.group_index,
        environment_index=plan.environment_index,
        seed=plan.seed,
        reset_payload=plan.reset_payload,
        reset_observation=group.reset_observation,
        candidates=[episode.replay for episode in group.episodes],
    )


@dataclass(frozen=True, slots=True, repr=False)
class WrittenGroup:
    """A group as the bundle writes it, done once, ahead of the bundle: the journal writes
    each group's entry from these as the group ends and hands them on, so no group is
    written twice."""

    corpus: AgenticGroup
    replay: ReplayGroup
    corpus_line: bytes
    """The group's corpus line (``rollout_line_bytes``)."""
    replay_tree: Any | None
    """The replay group laid out as the manifest holds it (``replay_group_tree``)."""

    @classmethod
    def of(cls, group: CollectedGroup) -> WrittenGroup:
        corpus, replay = corpus_group(group), replay_group(group)
        return cls(corpus, replay, rollout_line_bytes(corpus), replay_group_tree(replay))


def build_bundle(
    collection: Collection,
    *,
    kiln_url: str = LOCAL_KILN_URL,
    written: Sequence[WrittenGroup | None] = (),
) -> Bundle:
    """Build (and cap-check) the corpus, replay manifest and summary bytes.

    ``written``: the first groups as :class:`WrittenGroup` already wrote them, in order
    (a ``None`` or a missing one is written here).
    """
    controls = collection.controls
    given = [*written, *([None] * (len(collection.groups) - len(written)))]
    hasher = DatasetHasher()
    lines = [
        hasher.add(corpus_group(group)) if done is None else hasher.add_line(done.corpus_line)
        for group, done in zip(collection.groups, given, strict=True)
    ]
    dataset = b"".join(lines)
    manifest = ReplayManifest(
        schema=REPLAY_SCHEMA,
        dataset_sha256=str(hasher.sha256),
        protocol_error_reward=controls.options.protocol_error_reward,
        max_steps=controls.options.max_steps,
        environments=collection.environments,
        groups=[replay_group(group) for group in collection.groups],
    )
    replay = replay_bytes(manifest, [None if done is None else done.replay_tree for done in given])
    records = [episode.record for group in collection.groups for episode in group.episodes]
    summary = RolloutSummary(
        schema=SUMMARY_SCHEMA,
        kiln_url=kiln_url,
        adapter=None,
        adapter_label="base",
        behavior_policy=collection.behavior,
        environments=collection.environments,
        groups=controls.options.groups,
        group_size=controls.options.group_size,
        rollout_count=len(records),
        seed_start=controls.options.seed_start,
        max_steps=controls.options.max_steps,
        concurrency=controls.options.concurrency,
        max_action_tokens=controls.options.max_action_tokens,
        thinking_budget_tokens=controls.options.thinking_budget_tokens,
        temperature=controls.options.temperature,
        thinking=controls.options.thinking,
        protocol_error_reward=controls.options.protocol_error_reward,
        max_recoverable_errors=controls.options.max_recoverable_errors,
        capacity_wait_seconds=controls.options.capacity_wait_seconds,
        reset_plan_sha256=str(collection.reset_plan.sha256),
        output_path=controls.output,
        replay_output_path=controls.replay_output,
        summary_output_path=controls.summary_output,
        dataset_sha256=str(hasher.sha256),
        dataset_bytes=hasher.size,
        replay_sha256=str(sha256_bytes(replay)),
        replay_bytes=len(replay),
        stats=compute_stats(records),
        rollouts=records,
    )
    return Bundle(dataset, replay, summary_bytes(summary), summary)
