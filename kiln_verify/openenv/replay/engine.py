"""Exact live replay of a verified bundle (contract §7.1): :func:`replay_bundle`.

1. full offline verification (:func:`kiln_verify.openenv.verify.verify_bundle`); the
   replay manifest is then read again and must still have the verified SHA-256;
2. credential slots: none, or exactly one per captured environment (``None`` = public);
3. per environment, complete rediscovery compared with the captured identity, schemas
   and discovery digest (token rotation is invisible: the token is never recorded);
4. groups in order; a group's candidates concurrently (at most ``min(concurrency, group
   size)`` at once), each by :func:`~kiln_verify.openenv.replay.candidate.replay_candidate`;
   every candidate of a group finishes before the group's first failure (by candidate
   index) is raised, so the reported drift does not depend on scheduling;
5. every environment is rediscovered once more after the last group: a server whose
   identity changed *during* the replay (a redeploy under it) is drift as well;
6. the ``kiln.openenv-replay-run.v1`` report.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from kiln_verify.core.digest import canonical_digest, sha256_bytes
from kiln_verify.errors import (
    BundleReplayDigestMismatch,
    FileAccessError,
    LimitExceeded,
    UsageError,
)
from kiln_verify.limits import MAX_CAPACITY_WAIT_S, MAX_CONCURRENCY, MAX_OPENENV_REPLAY_BYTES
from kiln_verify.openenv.client import OpenEnvClient
from kiln_verify.openenv.identity import compare_identities
from kiln_verify.openenv.records.common import EnvironmentInspection
from kiln_verify.openenv.records.replay import ReplayGroup, ReplayManifest, read_replay
from kiln_verify.openenv.records.reports import REPLAY_RUN_SCHEMA, ReplayRunReport
from kiln_verify.openenv.replay.candidate import (
    CandidateOutcome,
    ReplayTarget,
    drift_error,
    replay_candidate,
)
from kiln_verify.openenv.replay.compare import Difference, render
from kiln_verify.openenv.verify import verify_bundle

__all__ = ["DEFAULT_CAPACITY_WAIT_S", "DEFAULT_CONCURRENCY", "replay_bundle", "replay_manifest"]

DEFAULT_CONCURRENCY = 4
DEFAULT_CAPACITY_WAIT_S = 300


def _check_options(concurrency: int, capacity_wait_seconds: float) -> None:
    if (
        isinstance(concurrency, bool)
        or not isinstance(concurrency, int)
        or not (1 <= concurrency <= MAX_CONCURRENCY)
    ):
        raise UsageError(f"--concurrency must be an integer in 1..{MAX_CONCURRENCY}")
    if (
        isinstance(capacity_wait_seconds, bool)
        or not isinstance(capacity_wait_seconds, int | float)
        or not (0 <= capacity_wait_seconds <= MAX_CAPACITY_WAIT_S)
    ):
        raise UsageError(f"--capacity-wait-seconds must be a number in 0..{MAX_CAPACITY_WAIT_S:g}")


def _check_slots(slots: Sequence[str | None], environments: int) -> tuple[str | None, ...]:
    if slots and len(slots) != environments:
        raise UsageError(
            f"{len(slots)} --credential-env slots for {environments} captured environments",
            hint="give none, or repeat --credential-env once per captured environment in "
            "environment order ('-' for a public one)",
        )
    return tuple(slots) if slots else (None,) * environments


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


def _schema_parts(inspection: EnvironmentInspection) -> dict[str, Any]:
    schema = inspection.schema_
    return {"action": schema.action, "observation": schema.observation, "state": schema.state}


async def _revalidate(target: ReplayTarget, captured: EnvironmentInspection, when: str) -> None:
    """Complete rediscovery vs the captured identity; drift names the changed fields."""
    live = await target.client.inspect()
    expected = captured.identity.to_identity()
    expected_schema = _schema_parts(captured)
    actual_schema = live.environment_schema
    changed = compare_identities(
        expected, live.identity, expected_schema=expected_schema, actual_schema=actual_schema
    )
    if not changed:
        return

    def values(
        identity: dict[str, Any], other: dict[str, Any], schema: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Changed fields only; schema parts as digests, metadata as its changed keys."""
        out: dict[str, Any] = {}
        for name in changed:
            if name.startswith("schema."):
                out[name] = str(canonical_digest(schema.get(name.removeprefix("schema."))))
            elif name == "metadata":
                mine, theirs = identity.get(name) or {}, other.get(name) or {}
                keys = sorted(set(mine) | set(theirs))
                out[name] = {k: mine.get(k) for k in keys if mine.get(k) != theirs.get(k)}
            else:
                out[name] = identity.get(name)
        return out

    recorded, current = expected.to_json(), live.identity.to_json()
    difference = Difference(
        ", ".join(changed),
        render(values(recorded, current, expected_schema), sort_keys=False),
        render(values(current, recorded, actual_schema), sort_keys=False),
    )
    raise drift_error(target, "identity", difference, when=when)


async def _replay_group(
    target: ReplayTarget, group: ReplayGroup, *, concurrency: int, capacity_wait_seconds: float
) -> list[CandidateOutcome]:
    gate = asyncio.Semaphore(max(1, min(concurrency, len(group.candidates))))

    async def one(index: int) -> CandidateOutcome:
        async with gate:
            return await replay_candidate(
                target,
                group,
                group.candidates[index],
                capacity_wait_seconds=capacity_wait_seconds,
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
    credential_envs: Sequence[str | None] = (),
    concurrency: int = DEFAULT_CONCURRENCY,
    capacity_wait_seconds: float = DEFAULT_CAPACITY_WAIT_S,
    environ: Mapping[str, str] | None = None,
) -> ReplayRunReport:
    """Steps 2-6 for an already verified manifest (callers normally use :func:`replay_bundle`)."""
    _check_options(concurrency, capacity_wait_seconds)
    slots = _check_slots(credential_envs, len(manifest.environments))
    async with contextlib.AsyncExitStack() as stack:
        targets: list[ReplayTarget] = []
        for index, (captured, slot) in enumerate(zip(manifest.environments, slots, strict=True)):
            client = OpenEnvClient(captured.identity.base_url, credential_env=slot, environ=environ)
            stack.push_async_callback(client.aclose)
            targets.append(ReplayTarget(index, captured.identity.metadata.name, client))
        for target, captured in zip(targets, manifest.environments, strict=True):
            await _revalidate(target, captured, "before replay")
        outcomes: list[CandidateOutcome] = []
        for group in manifest.groups:
            outcomes.extend(
                await _replay_group(
                    targets[group.environment_index],
                    group,
                    concurrency=concurrency,
                    capacity_wait_seconds=capacity_wait_seconds,
                )
            )
        for target, captured in zip(targets, manifest.environments, strict=True):
            await _revalidate(target, captured, "after replay")
    return ReplayRunReport(
        schema=REPLAY_RUN_SCHEMA,
        replay_sha256=replay_sha256,
        environments=len(manifest.environments),
        groups=len(manifest.groups),
        rollouts=len(outcomes),
        environment_exchanges=sum(outcome.exchanges for outcome in outcomes),
        capacity_retries=sum(outcome.capacity_retries for outcome in outcomes),
        environment_prefix_only_rollouts=sum(1 for outcome in outcomes if outcome.prefix_only),
    )


def replay_bundle(
    summary_path: str | os.PathLike[str],
    *,
    dataset_path: str | os.PathLike[str] | None = None,
    replay_path: str | os.PathLike[str] | None = None,
    credential_envs: Sequence[str | None] = (),
    concurrency: int = DEFAULT_CONCURRENCY,
    capacity_wait_seconds: float = DEFAULT_CAPACITY_WAIT_S,
    environ: Mapping[str, str] | None = None,
) -> ReplayRunReport:
    """Verify the bundle offline, then replay it live; the report or a typed error.

    Errors: whatever offline verification raises; ``usage`` for bad options or a wrong
    number of credential slots; ``replay_drift`` for any live difference; the client's
    own codes for transport, timeout, HTTP status, reflection or capacity exhaustion.
    Must not be called from a running event loop (use :func:`replay_manifest` there).
    """
    _check_options(concurrency, capacity_wait_seconds)
    verification = verify_bundle(summary_path, dataset_path=dataset_path, replay_path=replay_path)
    manifest = _read_verified_replay(verification.replay_path, verification.replay_sha256)
    _check_slots(credential_envs, len(manifest.environments))
    return asyncio.run(
        replay_manifest(
            manifest,
            verification.replay_sha256,
            credential_envs=credential_envs,
            concurrency=concurrency,
            capacity_wait_seconds=capacity_wait_seconds,
            environ=environ,
        )
    )
