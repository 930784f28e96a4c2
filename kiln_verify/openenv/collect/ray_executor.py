"""``openenv rollout --executor ray``: a plan's group ranges collected by Ray workers.

The plan is split into ``N`` contiguous ranges (:func:`split_plan`). Each range is one Ray
task running the shard path of :mod:`.journaled` (``--groups-range A:B``: the same
collector, the same environments, a policy built on the worker by the same factory) into a
journal in the worker's temporary directory; the task returns the sealed journal's entry
files as bytes through Ray's object store and removes its directory. The driver lands the
shards in a temporary directory of its own, merges them through :func:`~.merge.merge_shards`
(every shard verified, one collection, the whole plan covered) and publishes the bundle, byte
for byte the bundle one process would have published, with the publisher of a
single-process run. Nothing is published unless every range came back whole.

A worker that dies (its process killed, its node lost) makes Ray run the range again from
scratch, up to ``retries`` times: the range's groups are planned, so a recollected range is
the same records, exactly as a group recollected on ``--resume``. Beyond that the run fails
with ``executor_worker_failed`` and nothing is published. A refusal of the collector on a
worker (an environment that fails, a credential missing) is not retried: it comes back as
its own code and fails the run; the other ranges are cancelled.

Credentials never travel through Ray: the controls carry only the names of the credential
variables, and each worker reads them from its own process environment (docs/ray.md).
Ray is imported here only, and only on this path (the ``ray`` extra).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kiln_verify.errors import (
    ERROR_CLASSES,
    ExecutorUnavailable,
    ExecutorWorkerFailed,
    Interrupted,
    KilnError,
    UsageError,
)
from kiln_verify.limits import MAX_EXECUTOR_RETRIES, MAX_EXECUTOR_WORKERS
from kiln_verify.openenv.collect.bundle import Bundle
from kiln_verify.openenv.collect.controls import CollectionControls
from kiln_verify.openenv.collect.journaled import collect_journaled
from kiln_verify.openenv.collect.merge import merge_shards
from kiln_verify.openenv.collect.run import check_outputs
from kiln_verify.openenv.collect.steps import publish_bundle
from kiln_verify.openenv.policy.base import Policy

__all__ = ["RaySettings", "collect_range", "import_ray", "run_ray", "split_plan"]

PolicyFactory = Callable[[], Policy]
_ENTRY = re.compile(r"(header|seal|group-[0-9]{8})\.entry")
_Outcome = tuple[str, Any]


@dataclass(frozen=True, slots=True)
class RaySettings:
    """Where and how wide: ``address`` for ``ray.init`` (``None``: a cluster of this
    machine's CPUs started for the run; ignored when Ray is already initialised in this
    process), ``workers`` ranges (``None``: the cluster's CPUs, at most the plan's groups),
    ``retries`` per range whose worker died."""

    address: str | None = None
    workers: int | None = None
    retries: int = 1

    def check(self, groups: int) -> None:
        workers = self.workers
        if workers is not None and not 1 <= workers <= min(groups, MAX_EXECUTOR_WORKERS):
            raise UsageError(
                f"`workers` must be 1..{min(groups, MAX_EXECUTOR_WORKERS)} (at most one "
                "range per group)",
                fields=("workers",),
            )
        if not 0 <= self.retries <= MAX_EXECUTOR_RETRIES:
            raise UsageError(
                f"`ray_retries` must be 0..{MAX_EXECUTOR_RETRIES}", fields=("ray_retries",)
            )


def split_plan(groups: int, workers: int) -> list[range]:
    """``workers`` contiguous ranges covering ``range(groups)``, sizes within one."""
    bounds = [index * groups // workers for index in range(workers + 1)]
    return [range(a, b) for a, b in itertools.pairwise(bounds)]


def import_ray() -> ModuleType:
    """The ``ray`` module, or ``executor_unavailable`` (a usage error naming the extra)."""
    try:
        import ray
    except ImportError:
        raise ExecutorUnavailable(
            "`executor` ray needs Ray, which is not installed", fields=("executor",)
        ) from None
    return ray


def collect_range(
    controls: CollectionControls, factory: PolicyFactory, start: int, stop: int
) -> _Outcome:
    """On a worker: collect groups ``start..stop-1`` into a sealed journal and return its
    entry files (name to bytes), or the collector's refusal as plain values (its code,
    rule, path, hint and fields: a refusal crosses Ray as data, never as a pickled
    exception). The journal's directory is removed either way (a killed worker leaves it
    in the node's temporary directory: Kiln records only, no credential)."""
    root = Path(tempfile.mkdtemp(prefix="kiln-verify-range-"))
    try:
        journal = root / "shard"
        try:
            policy = factory()

            async def main() -> None:
                try:
                    await collect_journaled(controls, policy, journal, groups=range(start, stop))
                finally:
                    await policy.aclose()

            asyncio.run(main())
        except KilnError as exc:
            return "refused", (exc.code, exc.rule, exc.path, exc.hint, exc.fields)
        return "shard", {entry.name: entry.read_bytes() for entry in sorted(journal.iterdir())}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _refusal(code: str, rule: str, path: str | None, hint: str | None, fields: Any) -> KilnError:
    """The worker's refusal as its own error class (a subclass's extra attributes, which no
    front end reads, are not carried)."""
    cls = ERROR_CLASSES.get(code)
    if cls is None or getattr(cls, "_abstract", True):
        return ExecutorWorkerFailed(f"a worker refused with an unknown code: {rule}")
    error = cls.__new__(cls)
    KilnError.__init__(error, rule, path=path, hint=hint, fields=tuple(fields))
    return error


def _outcome(ray: ModuleType, ref: Any, span: range, retries: int) -> dict[str, bytes]:
    where = f"groups {span.start}..{span.stop - 1}"
    try:
        kind, value = ray.get(ref)
    except ray.exceptions.RayTaskError as exc:  # raised outside the collector's refusals
        raise ExecutorWorkerFailed(
            f"the worker collecting {where} failed: {type(exc.cause).__name__}: "
            f"{str(exc.cause)[:200]}"
        ) from None
    except ray.exceptions.RayError as exc:  # its process, its node or the cluster died
        raise ExecutorWorkerFailed(
            f"the worker collecting {where} died ({type(exc).__name__}) and the range was "
            f"retried {retries} times; nothing was published"
        ) from None
    if kind != "shard":
        raise _refusal(*value)
    return dict(value)


def _gather(
    ray: ModuleType, refs: Mapping[Any, range], retries: int
) -> list[tuple[range, dict[str, bytes]]]:
    """Every range's files, in plan order; the first failure cancels the others."""
    pending = list(refs)
    done: dict[int, tuple[range, dict[str, bytes]]] = {}
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                span = refs[ref]
                done[span.start] = (span, _outcome(ray, ref, span, retries))
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    return [done[start] for start in sorted(done)]


def _land(root: Path, span: range, files: Mapping[str, bytes]) -> Path:
    """A returned shard written into ``root`` (only names a journal writes)."""
    shard = root / f"groups-{span.start:08d}-{span.stop:08d}"
    shard.mkdir()
    for name, data in files.items():
        if not isinstance(name, str) or not _ENTRY.fullmatch(name) or not isinstance(data, bytes):
            raise ExecutorWorkerFailed(
                f"the worker collecting groups {span.start}..{span.stop - 1} returned a "
                "file a journal never holds"
            )
        with open(shard / name, "xb") as stream:
            stream.write(data)
    return shard


def _start(ray: ModuleType, address: str | None) -> bool:
    """``ray.init`` unless this process already initialised Ray; whether it was started."""
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report from a CLI run
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,  # worker logs stay in the Ray session directory
            logging_level=logging.WARNING,
        )
    except ConnectionError as exc:  # Ray's own: no cluster answers at the address
        raise ExecutorWorkerFailed(
            f"cannot reach the Ray cluster at {str(address)[:200]!r}: {str(exc)[:300]}",
            hint=(
                "check --ray-address (the head's HOST:PORT, ray://HOST:10001 or auto), that "
                "the head advertises an address this machine reaches (`ray start --head "
                "--node-ip-address`) and, for a head with token authentication (`ray start`'s "
                "default in Ray 2.60), RAY_AUTH_MODE=token with the cluster's token "
                "(~/.ray/auth_token or RAY_AUTH_TOKEN) here; nothing was collected"
            ),
            fields=("ray_address",),
        ) from None
    return True


def run_ray(
    controls: CollectionControls, factory: PolicyFactory, settings: RaySettings | None = None
) -> Bundle:
    """Collect the whole plan on Ray workers, merge, verify and publish (module text)."""
    settings = settings or RaySettings()
    total = controls.options.groups
    settings.check(total)
    if controls.grpo_output is not None:
        raise UsageError(
            "`grpo_output` cannot be collected by Ray workers (shards do not keep the token "
            "provenance)",
            fields=("grpo_output", "executor"),
        )
    check_outputs(controls)  # before a cluster is started or a server contacted
    ray = import_ray()
    started = _start(ray, settings.address)
    try:
        workers = settings.workers
        if workers is None:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            workers = max(1, min(total, cpus, MAX_EXECUTOR_WORKERS))
        task = ray.remote(num_cpus=1, max_retries=settings.retries, retry_exceptions=False)(
            collect_range
        )
        spans = split_plan(total, workers)
        refs = {task.remote(controls, factory, span.start, span.stop): span for span in spans}
        try:
            shards = _gather(ray, refs, settings.retries)
        except KeyboardInterrupt:
            raise Interrupted(
                "interrupted: the ranges were cancelled and nothing was published"
            ) from None
        return _merge_and_publish(controls, shards)
    finally:
        if started:
            ray.shutdown()


def _merge_and_publish(
    controls: CollectionControls, shards: Sequence[tuple[range, dict[str, bytes]]]
) -> Bundle:
    with tempfile.TemporaryDirectory(prefix="kiln-verify-shards-") as tmp:
        paths = [_land(Path(tmp), span, files) for span, files in shards]
        _, bundle = merge_shards(paths)
    check_outputs(controls)
    publish_bundle(
        bundle,
        controls.output,
        controls.replay_output,
        controls.summary_output,
        force=controls.force,
    )
    return bundle
