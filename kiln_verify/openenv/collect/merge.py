"""Shards into one bundle: ``kiln-verify openenv merge S1 S2 ... --output-dir DIR``.

A shard is a sealed journal of a group range (``openenv rollout --groups-range A:B
--journal DIR``; :mod:`.journaled`). :func:`read_shard` verifies one on its own: every
entry's framing, digest and link to the one before (:func:`~.journal.read_journal`), the
seal closing the whole range, the recorded controls valid, and every entry exactly the
group the plan gives that index (seed ``seed_start + g``, environment ``g mod n``, reset
payload, candidate count and numbering). :func:`merge_shards` verifies every shard first,
then refuses shards of different controls, plans, environment identities or policies
(``shard_mismatch``, naming the fields), overlapping ranges (``shard_overlap``) and a
plan not covered from group 0 to the last (``shard_gap``); the groups, in plan order, build
the bundle through the same :func:`~.bundle.build_bundle` as one collection of the whole
plan, so the bytes are the single-host bundle's. Nothing is published unless all of it
holds.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kiln_verify.errors import (
    ShardGap,
    ShardIncomplete,
    ShardMismatch,
    ShardOverlap,
    UsageError,
)
from kiln_verify.limits import MAX_RETAINED_BYTES
from kiln_verify.openenv.collect.bundle import Bundle, build_bundle
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.engine import CollectedGroup, Collection
from kiln_verify.openenv.collect.journal import JournalFiles, entry_name, read_journal
from kiln_verify.openenv.collect.journal_records import (
    collected_group,
    differing_fields,
    header_controls,
    planned_groups,
)
from kiln_verify.openenv.collect.plan import ResetPlan, RetainedBudget
from kiln_verify.openenv.collect.publish import publish_together

__all__ = ["Shard", "merge_shards", "merged_paths", "publish_merged", "read_shard"]


@dataclass(frozen=True, slots=True, repr=False)
class Shard:
    """A verified shard: its journal, its controls and its groups in plan order."""

    files: JournalFiles
    controls: CollectionControls
    groups: tuple[CollectedGroup, ...]

    @property
    def range(self) -> range:
        return range(self.files.header.groups_start, self.files.header.groups_stop)


def read_shard(path: str | os.PathLike[str], budget: RetainedBudget | None = None) -> Shard:
    """One shard, verified on its own (module text), or the typed refusal."""
    files = read_journal(path, budget)
    if files.seal is None:
        raise ShardIncomplete(
            f"the journal holds {len(files.groups)} of its range's "
            f"{files.header.groups_stop - files.header.groups_start} groups and is not sealed",
            path=str(files.path),
        )
    controls = header_controls(files.header)
    header = files.header
    size = controls.options.group_size
    if header.groups_stop > controls.options.groups:
        raise ShardMismatch(
            f"the shard's range ends at group {header.groups_stop}, beyond the plan's "
            f"{controls.options.groups} groups",
            path=str(files.path),
            fields=("groups_range",),
        )
    plans = planned_groups(controls, range(header.groups_start, header.groups_stop))
    groups = tuple(
        collected_group(entry, plan, size, str(files.path / entry_name(plan.group_index)))
        for entry, plan in zip(files.groups, plans, strict=True)
    )
    return Shard(files, controls, groups)


def _same_collection(first: Shard, other: Shard) -> None:
    fields = differing_fields(first.controls, other.controls)
    a, b = first.files.header, other.files.header
    if a.behavior_policy != b.behavior_policy:
        fields.append("policy")
    if a.environment_inspections != b.environment_inspections:
        fields.append("environment_identity")
    if fields:
        raise ShardMismatch(
            f"shard {other.files.path} and shard {first.files.path} are not parts of one "
            "collection; changed: " + ", ".join(f"`{name}`" for name in fields),
            fields=tuple(fields),
        )


def _check_cover(shards: Sequence[Shard], total: int) -> None:
    at = 0
    for shard in shards:
        span = shard.range
        if span.start < at:
            raise ShardOverlap(
                f"shard {shard.files.path} starts at group {span.start}, inside a range "
                f"already given (up to group {at - 1})"
            )
        if span.start > at:
            raise ShardGap(f"no shard covers groups {at}..{span.start - 1}")
        at = span.stop
    if at != total:
        raise ShardGap(f"no shard covers groups {at}..{total - 1} (the plan has {total})")


def merge_shards(paths: Sequence[str | os.PathLike[str]]) -> tuple[CollectionControls, Bundle]:
    """Verify every shard, check that they are one collection's whole plan, build it."""
    if not paths:
        raise ShardGap("no shard given")
    budget = RetainedBudget(MAX_RETAINED_BYTES)  # all shards together, as one collection
    shards = [read_shard(path, budget) for path in paths]
    for shard in shards[1:]:
        _same_collection(shards[0], shard)
    shards.sort(key=lambda shard: (shard.range.start, shard.range.stop))
    controls = shards[0].controls
    _check_cover(shards, controls.options.groups)
    header = shards[0].files.header
    collection = Collection(
        controls,
        ResetPlan.from_templates(controls.reset_templates),
        list(header.environment_inspections),
        header.behavior_policy,
        [group for shard in shards for group in shard.groups],
    )
    return controls, build_bundle(collection)


def merged_paths(controls: CollectionControls, output_dir: str | os.PathLike[str]) -> list[Path]:
    """Where the merged files go: ``output_dir`` / the base name each shard recorded (the
    summary keeps the recorded paths; the offline verifier finds files beside it by name)."""
    root = Path(output_dir)
    names = [
        os.path.basename(name)
        for name in (controls.output, controls.replay_output, controls.summary_output)
    ]
    if len(set(names)) != len(names) or not all(names):
        raise UsageError(
            "the shards' `output`, `replay_output` and `summary_output` do not have three "
            "distinct file names to write into `output_dir`",
            fields=("output_dir",),
        )
    return [root / name for name in names]


def publish_merged(
    controls: CollectionControls,
    bundle: Bundle,
    output_dir: str | os.PathLike[str],
    *,
    force: bool = False,
) -> list[Path]:
    """Publish the merged bundle's three files together into ``output_dir``."""
    paths = merged_paths(controls, output_dir)
    publish_together(
        list(zip(paths, (bundle.dataset, bundle.replay, bundle.summary), strict=True)),
        force=force,
    )
    return paths
