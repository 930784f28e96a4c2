"""Run one admitted run with the library's own collector, then publish and bind its bundle.

Phases and the run's visible state: ``discovering`` (the collector inspects every
environment), ``collecting`` (groups in plan order; progress counts groups and
finished episodes), ``revalidating`` (the collector re-inspects every environment and
requires identical identity), then publication, still ``revalidating`` until the
manifest is bound and the run becomes ``rollout_ready``.

Publication (§12, the seed's "A pathname is not publication"): the three files are
published together into the run directory with the collector's own all-or-nothing
publication, each published file is then re-read as a regular, non-symlink file with a
bounded streaming hash, and dataset and replay are cross-checked against what the summary
binds; only then is the artifacts manifest written into ``run.json``. A crash before that
write leaves files no route serves. Publication runs in a worker thread and is never
interrupted by a cancellation (a run asked to stop while publishing ends published).

The collector is reached through one small function (:func:`_collect`), so a change to
how collection is combined touches one place. The controls come from the route's admission
(:mod:`kiln_verify.control.kinds.rollout`); a run restored from disk has none and is admitted
again here, under the configuration of the running server.

Every run journals its finished groups into ``<run>/journal`` (kiln-verify's own, never
an artifact; docs/resume-and-shards.md): a run interrupted by a restart still fails with
``run_interrupted``, and the resume route (:mod:`kiln_verify.control.resume`) hands its
journal to a new run, which continues it here with ``--resume``'s checks.

Any error ends the run ``failed`` with the record of :func:`kiln_verify.control.failures.
classify` for the phase it happened in; a cancellation ends it ``cancelled``; a server
shutdown records nothing, so the next start fails it with ``run_interrupted``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kiln_verify.control import failures
from kiln_verify.control.admission import check_run_request
from kiln_verify.control.kind import ArtifactFile, ArtifactTable
from kiln_verify.control.layout import RUN_JOURNAL_DIR
from kiln_verify.control.registry import CANCELLED_WHILE_ACTIVE, RunRegistry
from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.control.status import FailureStage, RunArtifact, RunProgress
from kiln_verify.core.digest import hash_file
from kiln_verify.core.publisher import OUTPUT, publish_files
from kiln_verify.errors import PublishFailed
from kiln_verify.limits import (
    MAX_OPENENV_DATASET_BYTES,
    MAX_OPENENV_REPLAY_BYTES,
    MAX_OPENENV_SUMMARY_BYTES,
)
from kiln_verify.openenv.collect import (
    DEFAULT_DATASET,
    DEFAULT_REPLAY,
    DEFAULT_SUMMARY,
    Collection,
    CollectionControls,
    ProgressEvent,
    build_bundle,
)
from kiln_verify.openenv.collect.journaled import collect_journaled
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.policy.registry import build_policy
from kiln_verify.openenv.records.environment import EnvironmentIdentityRecord
from kiln_verify.openenv.records.summary import RolloutStats, RolloutSummary

__all__ = [
    "ARTIFACTS",
    "Published",
    "artifact_url",
    "bind_bundle",
    "execute_run",
    "manifest_entries",
    "publish_collection",
    "rollout_progress",
]

ARTIFACTS: dict[str, ArtifactFile] = {
    "dataset": ArtifactFile(DEFAULT_DATASET, MAX_OPENENV_DATASET_BYTES, "application/x-ndjson"),
    "replay": ArtifactFile(DEFAULT_REPLAY, MAX_OPENENV_REPLAY_BYTES, "application/json"),
    "summary": ArtifactFile(DEFAULT_SUMMARY, MAX_OPENENV_SUMMARY_BYTES, "application/json"),
}
"""The rollout kind's artifact table: the three bundle files, in manifest order."""

PROGRESS_PERSIST_INTERVAL_MS = 500
"""Progress counts are written to ``run.json`` at most this often (state changes always)."""


def artifact_url(run_id: str, kind: str) -> str:
    return f"/v1/openenv/runs/{run_id}/artifacts/{kind}"


def rollout_progress(request: OpenEnvRunRequest) -> RunProgress:
    """A rollout run's first progress: nothing finished of its groups and rollouts."""
    return RunProgress(
        groups_completed=0,
        groups_total=request.groups,
        rollouts_completed=0,
        rollouts_total=request.groups * request.group_size,
    )


@dataclass(frozen=True, slots=True)
class Published:
    """What a publication bound: the manifest, the statistics and the identities."""

    artifacts: list[RunArtifact]
    stats: RolloutStats
    environments: list[EnvironmentIdentityRecord]
    rollouts: int


def publish_collection(collection: Collection, run_dir: Path, run_id: str) -> Published:
    """Build the bundle, publish it into ``run_dir`` and bind the manifest (blocking)."""
    bundle = build_bundle(collection)
    publish_files(
        [
            (run_dir / DEFAULT_DATASET, bundle.dataset),
            (run_dir / DEFAULT_REPLAY, bundle.replay),
            (run_dir / DEFAULT_SUMMARY, bundle.summary),
        ],
        wording=OUTPUT,
    )
    return bind_bundle(bundle.record, run_dir, run_id)


def bind_bundle(record: RolloutSummary, run_dir: Path, run_id: str) -> Published:
    """The rollout manifest of a bundle just published in ``run_dir``: each file hashed as
    it lies there, the dataset and the replay required to be what the summary binds."""
    bound = {
        "dataset": (str(record.dataset_sha256), record.dataset_bytes),
        "replay": (str(record.replay_sha256), record.replay_bytes),
    }
    return Published(
        manifest_entries(run_dir, run_id, ARTIFACTS, bound),
        record.stats,
        [inspection.identity for inspection in record.environments],
        record.rollout_count,
    )


def manifest_entries(
    run_dir: Path,
    run_id: str,
    table: ArtifactTable,
    bound: Mapping[str, tuple[str, int]] | None = None,
) -> list[RunArtifact]:
    """One manifest entry per artifact of ``table``, hashed from its file in ``run_dir``;
    a kind in ``bound`` must have exactly that (digest, size), else ``PublishFailed``."""
    entries: list[RunArtifact] = []
    for kind, entry in table.items():
        digest = hash_file(run_dir / entry.name, max_bytes=entry.max_bytes)
        if kind in (bound or {}) and (str(digest.sha256), digest.size_bytes) != (bound or {})[kind]:
            raise PublishFailed(
                f"the published {kind} differs from what the summary binds",
                path=run_dir / entry.name,
            )
        entries.append(
            RunArtifact(
                kind=kind,  # type: ignore[arg-type]
                url=artifact_url(run_id, kind),
                sha256=str(digest.sha256),
                bytes=digest.size_bytes,
            )
        )
    return entries


_STATES: dict[str, FailureStage] = {
    "discovering": "discovery",
    "collecting": "collection",
    "revalidating": "identity_verification",
}


class _Progress:
    """The collector's progress hook: state changes, counts, and the phase for failures."""

    def __init__(self, registry: RunRegistry, run_id: str) -> None:
        self.registry = registry
        self.run_id = run_id
        self.stage: FailureStage = "discovery"
        self._last_persist = 0

    def __call__(self, event: ProgressEvent) -> None:
        registry, run_id = self.registry, self.run_id
        current = registry.get(run_id)
        progress = current.progress
        if event.stage in _STATES:
            self.stage = _STATES[event.stage]
            if current.state != event.stage:
                registry.update(run_id, state=event.stage)
        else:
            field = "groups_completed" if event.stage == "group" else "rollouts_completed"
            now = registry.clock()
            persist = now - self._last_persist >= PROGRESS_PERSIST_INTERVAL_MS
            if persist:
                self._last_persist = now
            registry.update(
                run_id,
                persist=persist,
                progress=progress.model_copy(update={field: event.completed}),
            )


async def _resident_policy(registry: RunRegistry, adapter: str) -> Policy | None:
    if registry.config.model is None:
        return None  # the resident model's modules load the HF half: only when configured
    from kiln_verify.control.resident.serving import served_policy

    return await served_policy(registry.config, adapter)


async def _collect(
    registry: RunRegistry,
    request: OpenEnvRunRequest,
    controls: CollectionControls,
    hook: _Progress,
    journal: Path,
) -> Collection:
    """The collection of one run: the adapter's policy (the resident model's, when it plays
    the adapter: docs/resident-model.md) and the library's journaled collector. Every run
    journals its groups into ``journal`` (``<run>/journal``) and continues whatever whole
    entries it finds there (put there by the resume route, :mod:`kiln_verify.control.
    resume`), with ``--resume``'s checks; the bundle is built from the same groups either
    way, so its bytes do not depend on the journal."""
    policy = await _resident_policy(registry, request.adapter)
    if policy is None:
        spec = registry.config.policies[request.adapter]
        policy = build_policy(spec.policy, spec.options)
    try:
        done = await collect_journaled(controls, policy, journal, resume=True, progress=hook)
    finally:
        await policy.aclose()
    if done.collection is None:  # the whole plan is always journaled here
        raise RuntimeError("the journaled collection did not cover the whole plan")
    return done.collection


async def execute_run(
    registry: RunRegistry, run_id: str, controls: CollectionControls | None = None
) -> None:
    """Collect, publish and bind one admitted run; always ends in a terminal state."""
    hook = _Progress(registry, run_id)
    handle = registry.active(run_id)
    try:
        status = registry.get(run_id)
        if controls is None:
            # restored from disk: the configuration may have changed since admission
            controls = check_run_request(status.request, registry.config)
        journal = registry.store.run_dir(run_id) / RUN_JOURNAL_DIR
        collection = await _collect(registry, status.request, controls, hook, journal)
        if handle is not None:
            if handle.cancel_requested:
                raise asyncio.CancelledError
            handle.publishing = True
        hook.stage = "artifact_publication"
        run_dir = registry.store.run_dir(run_id)
        published = await asyncio.shield(
            asyncio.to_thread(publish_collection, collection, run_dir, run_id)
        )
        registry.metrics.published(published.stats, published.rollouts)
        total = status.progress
        registry.finish(
            run_id,
            "rollout_ready",
            progress=total.model_copy(
                update={
                    "groups_completed": total.groups_total,
                    "rollouts_completed": total.rollouts_total,
                }
            ),
            rollout_stats=published.stats,
            environments=published.environments,
            artifacts=published.artifacts,
        )
    except asyncio.CancelledError:
        if registry.shutting_down:
            raise
        registry.finish(run_id, "cancelled", error=CANCELLED_WHILE_ACTIVE)
    except Exception as exc:
        failure = failures.classify(exc, hook.stage, registry.clock())
        registry.finish(run_id, "failed", failure=failure, error=failure.message)
