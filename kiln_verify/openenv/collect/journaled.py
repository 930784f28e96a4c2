"""A collection that survives a crash: the steps of :mod:`.steps` with a journal.

``--journal DIR`` writes each group to the journal (:mod:`.journal`) the moment it passes
integrity, before the next group starts; once the range is finished and every
environment revalidated, the journal is sealed. ``--resume`` reads the journal back
(every entry checked), refuses other controls, another plan, another policy or changed
environments, and collects only the groups after the last whole entry: a group in flight
at the crash left no entry and is collected again from scratch. The groups read back are
the Kiln records the bundle holds, so the bundle is built from them byte for byte as from
groups just collected.

With ``--groups-range A:B`` the journal collects groups ``A..B-1`` of the whole plan and a
sealed journal is a *shard* (``openenv merge``); without it, the whole plan is collected,
built and published, and the sealed journal stays behind (it is the one-shard form of the
same collection). A resume that finds the bundle already published with exactly the
journal's bytes (a kill after publication, before exit) reports it published; a resume of
a journal never started (no header: a kill before it was durable) starts it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kiln_verify.errors import JournalInvalid, TargetExists, UsageError
from kiln_verify.openenv.collect.bundle import Bundle, WrittenGroup, build_bundle
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.engine import (
    CollectedGroup,
    Collection,
    ProgressEvent,
    ProgressHook,
    Reinspection,
    behavior_identity,
    check_unchanged,
)
from kiln_verify.openenv.collect.journal import (
    HEADER,
    EntryDirectory,
    JournalFiles,
    JournalWriter,
    only_leftovers,
    read_journal,
)
from kiln_verify.openenv.collect.journal_records import (
    check_environments,
    check_header,
    collected_group,
    journal_group,
    journal_header,
    planned_groups,
)
from kiln_verify.openenv.collect.plan import ResetPlan, RetainedBudget
from kiln_verify.openenv.collect.run import check_outputs, output_paths
from kiln_verify.openenv.collect.steps import (
    Environments,
    assemble_collection,
    inspect_environments,
    publish_bundle,
    run_groups,
)
from kiln_verify.openenv.policy.base import Policy

__all__ = ["JournaledCollection", "collect_journaled", "groups_range", "run_journaled"]


def groups_range(controls: CollectionControls, groups: range | None) -> range:
    """``groups`` checked against the plan (``None``: the whole plan)."""
    total = controls.options.groups
    if groups is None:
        return range(total)
    if groups.step != 1 or not 0 <= groups.start < groups.stop <= total:
        raise UsageError(
            f"`groups_range` must be A:B with 0 <= A < B <= {total} (the plan's groups)",
            fields=("groups_range",),
        )
    return groups


@dataclass(frozen=True, slots=True, repr=False)
class JournaledCollection:
    """A journaled range, finished and sealed; ``collection`` only for the whole plan."""

    journal: Path
    groups: range
    resumed: int
    """Groups read back from the journal rather than collected by this run."""
    collection: Collection | None
    written: tuple[WrittenGroup | None, ...] = ()
    """The groups this run wrote, aligned with ``collection.groups`` (``None``: a group
    read back from the journal), for :func:`build_bundle`."""


def _started(journal: Path) -> bool:
    """Whether a journal was started here: its header exists (a collector killed before
    writing it leaves at most the directory and a ``.partial`` file, and journaled
    nothing)."""
    return journal.is_dir() and not journal.is_symlink() and (journal / HEADER).exists()


def _read(journal: Path, resume: bool) -> JournalFiles | None:
    if resume and _started(journal):
        return read_journal(journal)
    if journal.exists() or journal.is_symlink():
        if not journal.is_dir() or journal.is_symlink() or not only_leftovers(journal):
            raise UsageError(
                "the `journal` directory exists and is not empty; pass `resume` to continue it",
                path=str(journal),
                fields=("journal", "resume"),
            )
    elif not journal.parent.is_dir():
        raise JournalInvalid("the journal's parent directory does not exist", path=str(journal))
    return None


class _Background:
    """The journal's file writes, off the event loop: each entry is framed and chained
    here, from the group as the bundle writes it (:class:`WrittenGroup`: its corpus line
    and replay tree, kept for the bundle, so the journal adds about 0.15 ms of CPU per
    group, not a second writing of the group), and one worker thread, doing only system
    calls in one held directory, writes the entries in order (a new journal's header
    first) while the collection goes on (the two fsyncs of an entry no longer hold it up).
    A group whose entry is still queued at a crash has no entry and is collected again,
    like a group in flight; a failed write fails the collection at the next group or at
    the end."""

    def __init__(self, writer: JournalWriter) -> None:
        self._writer = writer
        self._directory = EntryDirectory(writer.path)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kiln-journal")
        self._pending: list[Future[None]] = []
        self.written: list[WrittenGroup] = []
        """Each group as its entry was written from it, in order, for the bundle."""

    def store(self, name: str, data: bytes) -> None:
        """Queue one framed entry behind every entry queued before it."""
        while self._pending and self._pending[0].done():
            self._pending.pop(0).result()  # raises a failed write's error
        self._pending.append(self._pool.submit(self._directory.store, name, data))

    def submit(self, group: CollectedGroup) -> None:
        written = WrittenGroup.of(group)
        self.written.append(written)
        self.store(*self._writer.prepare(*journal_group(group, written, str(self._writer.last))))

    async def drain(self) -> None:
        """Every queued entry written (durable), or the first write's error."""
        for future in self._pending:
            await asyncio.wrap_future(future)
        self._pending.clear()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._directory.close()


async def _reinspect_while_draining(
    found: Environments, background: _Background
) -> list[Reinspection]:
    """Revalidation (network round trips) while the last entries' fsyncs finish: the seal
    needs both, neither needs the other. A failed revalidation stops waiting for the
    writes (the caller's ``close`` still lets them end); a failed write fails the range."""
    drained = asyncio.ensure_future(background.drain())
    try:
        again = await found.reinspect()
    except BaseException:
        drained.cancel()
        drained.add_done_callback(lambda done: done.cancelled() or done.exception())
        raise
    await drained
    return again


async def collect_journaled(
    controls: CollectionControls,
    policy: Policy,
    journal: str | os.PathLike[str],
    *,
    resume: bool = False,
    groups: range | None = None,
    environ: Mapping[str, str] | None = None,
    progress: ProgressHook | None = None,
) -> JournaledCollection:
    """Collect (or finish) a journaled range; refusals come before any network contact
    where they can (controls, plan, policy, the journal's own checks)."""
    notify = progress or (lambda event: None)
    planned = groups_range(controls, groups)
    if controls.grpo_output is not None:
        raise UsageError(
            "`grpo_output` cannot be journaled (the token provenance is not kept in the journal)",
            fields=("grpo_output", "journal"),
        )
    root = Path(journal)
    reset_plan = ResetPlan.from_templates(controls.reset_templates)
    budget = RetainedBudget()
    for template in reset_plan.templates:
        budget.charge(template, what="a reset template")
    behavior = behavior_identity(policy)
    files = _read(root, resume)
    if files is not None:
        check_header(files.header, controls, planned, behavior)
    async with inspect_environments(controls, environ=environ, progress=progress) as found:
        current = [context.inspection for context in found.contexts]
        done: list[CollectedGroup] = []
        header: tuple[str, bytes] | None = None
        if files is None:
            writer, header = JournalWriter.begin(
                root, journal_header(controls, planned, behavior, current)
            )
            sealed = False
        else:
            check_environments(files.header, current)
            writer = JournalWriter.resume(files)
            sealed = files.seal is not None
            size = controls.options.group_size
            for entry, plan in zip(files.groups, planned_groups(controls, planned), strict=False):
                source = str(root / f"group-{plan.group_index:08d}.entry")
                done.append(collected_group(entry, plan, size, source))
        again = found.first
        new: list[CollectedGroup] = []
        written: list[WrittenGroup] = []
        if not sealed:
            background = _Background(writer)
            try:
                if header is not None:
                    background.store(*header)
                remaining = range(planned.start + len(done), planned.stop)
                new = await run_groups(
                    found,
                    controls,
                    policy,
                    remaining,
                    behavior=behavior,
                    budget=budget,
                    progress=progress,
                    on_group=background.submit,
                )
                notify(ProgressEvent("revalidating"))
                again = await _reinspect_while_draining(found, background)
                written = background.written
            finally:
                background.close()
            check_unchanged(found.first, again)
            writer.seal(planned.start, planned.stop)
        collection = None
        if planned == range(controls.options.groups):
            collection = assemble_collection(controls, found, behavior, [*done, *new], again)
        return JournaledCollection(
            root, planned, len(done), collection, (*([None] * len(done)), *written)
        )


def _already_published(controls: CollectionControls, bundle: Bundle) -> bool:
    """Whether every output holds exactly the bundle's bytes (published before a kill)."""
    expected = (bundle.dataset, bundle.replay, bundle.summary)
    for path, data in zip(output_paths(controls), expected, strict=True):
        try:
            if os.path.getsize(path) != len(data) or Path(path).read_bytes() != data:
                return False
        except OSError:
            return False
    return True


async def run_journaled(
    controls: CollectionControls,
    policy: Policy,
    journal: str | os.PathLike[str],
    *,
    resume: bool = False,
    groups: range | None = None,
    environ: Mapping[str, str] | None = None,
    progress: ProgressHook | None = None,
) -> tuple[JournaledCollection, Bundle | None]:
    """:func:`collect_journaled`, then (whole plan) build and publish the bundle."""
    notify = progress or (lambda event: None)
    whole = groups_range(controls, groups) == range(controls.options.groups)
    if whole:
        try:
            check_outputs(controls)  # before any network contact
        except TargetExists:
            if not resume:  # a resumed run may have published just before it was killed
                raise
    done = await collect_journaled(
        controls, policy, journal, resume=resume, groups=groups, environ=environ, progress=progress
    )
    if done.collection is None:
        return done, None
    bundle = build_bundle(done.collection, written=done.written)
    try:
        check_outputs(controls)  # recovers what a killed publication left, then checks
    except TargetExists:
        if not resume or not _already_published(controls, bundle):
            raise
        notify(ProgressEvent("published"))
        return done, bundle
    notify(ProgressEvent("publishing"))
    publish_bundle(
        bundle,
        controls.output,
        controls.replay_output,
        controls.summary_output,
        force=controls.force,
    )
    notify(ProgressEvent("published"))
    return done, bundle
