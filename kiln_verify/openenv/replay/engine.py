"""Exact live replay of a verified bundle (contract §7.1): :func:`replay_bundle`.

1. full offline verification (:func:`kiln_verify.openenv.verify.verify_bundle`); the
   replay manifest is then read again and must still have the verified SHA-256;
2. credential slots (:class:`~kiln_verify.openenv.protocol.access.EnvironmentAccess`, with
   the concurrency and the capacity wait): none, or exactly one per captured environment
   (``None`` = public);
   remaps (``--environment-url OLD=NEW``, or those of an environment provider such as
   the embedded oracle) must each name a recorded base URL;
3. per environment, complete rediscovery compared with the captured identity (moved to
   the remapped URL, if any), schemas and discovery digest; a difference here stops the
   replay at once: nothing is replayed against a different build;
4. groups in order; a group's candidates concurrently (at most ``min(concurrency, group
   size)`` at once), each by :func:`~kiln_verify.openenv.replay.candidate.replay_candidate`,
   which replays every exchange and collects its drifts; a client failure (transport,
   timeout, capacity) is raised once the group's candidates have finished, the first by
   candidate index;
5. every environment is rediscovered once more after the last group: a server whose
   identity changed *during* the replay (a redeploy under it) is drift as well;
6. any drift is raised as one ``replay_drift`` with the first drift in detail, the
   totals and every drifted exchange kept for the report
   (:class:`~kiln_verify.openenv.replay.tally.Tally`); otherwise a
   :class:`~kiln_verify.openenv.records.reports.ReplayRunResult`: Kiln's exact
   ``kiln.openenv-replay-run.v1`` report and, beside it, our
   ``kiln-verify.replay-run-notes.v1`` (the volatile state fields and the remaps).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.errors import (
    BundleReplayDigestMismatch,
    FileAccessError,
    LimitExceeded,
    UsageError,
)
from kiln_verify.limits import MAX_OPENENV_REPLAY_BYTES
from kiln_verify.openenv.protocol.access import (
    DEFAULT_CAPACITY_WAIT_S,
    DEFAULT_CONCURRENCY,
    EnvironmentAccess,
)
from kiln_verify.openenv.protocol.identity import EnvironmentIdentity
from kiln_verify.openenv.records.replay import ReplayGroup, ReplayManifest, read_replay
from kiln_verify.openenv.records.reports import (
    REPLAY_NOTES_SCHEMA,
    REPLAY_RUN_SCHEMA,
    ReplayRunNotes,
    ReplayRunReport,
    ReplayRunResult,
)
from kiln_verify.openenv.replay.candidate import CandidateOutcome, ReplayTarget, replay_candidate
from kiln_verify.openenv.replay.detail import ReplayContext
from kiln_verify.openenv.replay.rediscovery import rediscover
from kiln_verify.openenv.replay.remap import UrlRemap, plan_remaps
from kiln_verify.openenv.replay.tally import Tally
from kiln_verify.openenv.verify import verify_bundle

__all__ = [
    "DEFAULT_CAPACITY_WAIT_S",
    "DEFAULT_CONCURRENCY",
    "EnvironmentAccess",
    "EnvironmentProvider",
    "replay_bundle",
    "replay_manifest",
]

EnvironmentProvider = Callable[
    [Sequence[EnvironmentIdentity]], AbstractContextManager[Sequence[UrlRemap]]
]
"""Serves environments for a bundle's captured identities (in environment order) while
the context is open and yields the remaps to them (the embedded oracle, for one)."""


def _check_slots(slots: Sequence[str | None], environments: int) -> None:
    if slots and len(slots) != environments:
        raise UsageError(
            f"{len(slots)} --credential-env slots for {environments} captured environments",
            hint="give none, or repeat --credential-env once per captured environment in "
            "environment order ('-' for a public one)",
        )


def _read_verified_replay(path: str, expected_sha256: str) -> ReplayManifest:
    """Read the manifest again and insist on the bytes verification just accepted."""
    try:
        with open(path, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size > MAX_OPENENV_REPLAY_BYTES:
                raise LimitExceeded(
                    "the replay manifest",
                    limit="MAX_OPENENV_REPLAY_BYTES",
                    bound=MAX_OPENENV_REPLAY_BYTES,
                    observed=size,
                    path=path,
                )
            data = stream.read(MAX_OPENENV_REPLAY_BYTES + 1)
    except OSError as exc:
        raise FileAccessError(
            f"cannot read the replay manifest: {exc.strerror}", path=path
        ) from None
    if len(data) > MAX_OPENENV_REPLAY_BYTES or str(sha256_bytes(data)) != expected_sha256:
        raise BundleReplayDigestMismatch(
            "the replay manifest changed after offline verification", path=path
        )
    return read_replay(data, path)


async def _replay_group(
    target: ReplayTarget,
    group: ReplayGroup,
    *,
    concurrency: int,
    capacity_wait_seconds: float,
    strict_state: bool,
) -> list[CandidateOutcome]:
    gate = asyncio.Semaphore(max(1, min(concurrency, len(group.candidates))))

    async def one(index: int) -> CandidateOutcome:
        async with gate:
            return await replay_candidate(
                target,
                group,
                group.candidates[index],
                capacity_wait_seconds=capacity_wait_seconds,
                strict_state=strict_state,
            )

    results = await asyncio.gather(
        *(one(index) for index in range(len(group.candidates))), return_exceptions=True
    )
    outcomes: list[CandidateOutcome] = []
    for result in results:
        if isinstance(result, BaseException):
            raise result
        outcomes.append(result)
    return outcomes


async def replay_manifest(
    manifest: ReplayManifest,
    replay_sha256: str,
    *,
    access: EnvironmentAccess | None = None,
    remaps: Sequence[UrlRemap] = (),
    strict_state: bool = False,
) -> ReplayRunResult:
    """Steps 2-6 for an already verified manifest (callers normally use :func:`replay_bundle`)."""
    access = EnvironmentAccess() if access is None else access
    _check_slots(access.credential_envs, len(manifest.environments))
    urls, entries = plan_remaps(manifest.environments, remaps)
    remap_of = {entry.environment_index: entry for entry in entries}
    context = ReplayContext(
        replay_sha256, len(manifest.environments), len(manifest.groups), tuple(entries)
    )
    tally = Tally(context, strict_state=strict_state)
    async with contextlib.AsyncExitStack() as stack:
        targets: list[ReplayTarget] = []
        for index, (captured, url) in enumerate(zip(manifest.environments, urls, strict=True)):
            client = access.client(index, url)
            stack.push_async_callback(client.aclose)
            targets.append(ReplayTarget(index, captured.identity.metadata.name, client))
        for target, captured in zip(targets, manifest.environments, strict=True):
            found = await rediscover(target, captured, "before replay", remap_of.get(target.index))
            if found is not None:
                raise tally.before_replay(found)
        for group in manifest.groups:
            target = targets[group.environment_index]
            outcomes = await _replay_group(
                target,
                group,
                concurrency=access.concurrency,
                capacity_wait_seconds=access.capacity_wait_seconds,
                strict_state=strict_state,
            )
            tally.add_group(target, group, outcomes)
        for target, captured in zip(targets, manifest.environments, strict=True):
            found = await rediscover(target, captured, "after replay", remap_of.get(target.index))
            if found is not None:
                tally.identities.append(found)
    tally.check()
    outcomes = tally.outcomes()
    report = ReplayRunReport(
        schema=REPLAY_RUN_SCHEMA,
        replay_sha256=replay_sha256,
        environments=len(manifest.environments),
        groups=len(manifest.groups),
        rollouts=len(outcomes),
        environment_exchanges=sum(outcome.exchanges for outcome in outcomes),
        capacity_retries=sum(outcome.capacity_retries for outcome in outcomes),
        environment_prefix_only_rollouts=sum(1 for outcome in outcomes if outcome.prefix_only),
    )
    notes = ReplayRunNotes(
        schema=REPLAY_NOTES_SCHEMA, volatile=tally.volatile(), environment_remaps=list(entries)
    )
    return ReplayRunResult(report=report, kiln_verify=notes)


def replay_bundle(
    summary_path: str | os.PathLike[str],
    *,
    dataset_path: str | os.PathLike[str] | None = None,
    replay_path: str | os.PathLike[str] | None = None,
    access: EnvironmentAccess | None = None,
    environment_urls: Sequence[UrlRemap] = (),
    environment_provider: EnvironmentProvider | None = None,
    strict_state: bool = False,
) -> ReplayRunResult:
    """Verify the bundle offline, then replay it live; the result or a typed error.

    The result holds Kiln's exact ``kiln.openenv-replay-run.v1`` report (``.report``) and
    our ``kiln-verify.replay-run-notes.v1`` beside it (``.notes``: volatile state fields
    and remaps).

    ``access``: credential slots (none, or one per captured environment), the variables
    they are read from, the capacity wait and the concurrency (default: all public, 300 s,
    4). ``environment_urls`` moves recorded base URLs (``--environment-url OLD=NEW``);
    ``environment_provider`` serves the environments itself (``--oracle``) and yields its
    remaps; the two exclude each other. ``strict_state`` compares volatile state fields
    (``State.episode_id``) exactly too.

    Errors: whatever offline verification raises; ``usage`` for bad options, a wrong
    number of credential slots or a remap naming no recorded base URL; ``replay_drift``
    for any live difference (after the whole replay, with totals); the client's own codes
    for transport, timeout, HTTP status, reflection or capacity exhaustion. Must not be
    called from a running event loop (use :func:`replay_manifest` there).
    """
    access = EnvironmentAccess() if access is None else access
    if environment_urls and environment_provider is not None:
        raise UsageError(
            "--environment-url and --oracle exclude each other",
            hint="--oracle already replays every captured environment at the oracle's address",
        )
    verification = verify_bundle(summary_path, dataset_path=dataset_path, replay_path=replay_path)
    manifest = _read_verified_replay(verification.replay_path, verification.replay_sha256)
    _check_slots(access.credential_envs, len(manifest.environments))
    plan_remaps(manifest.environments, environment_urls)  # before anything is started
    provided: AbstractContextManager[Sequence[UrlRemap]] = contextlib.nullcontext(())
    if environment_provider is not None:
        provided = environment_provider(
            [captured.identity.to_identity() for captured in manifest.environments]
        )
    with provided as served:
        return asyncio.run(
            replay_manifest(
                manifest,
                verification.replay_sha256,
                access=access,
                remaps=[*environment_urls, *served],
                strict_state=strict_state,
            )
        )
