"""`openenv rollout --executor ray`: the command line's half of the Ray executor.

The flags (``--executor``, ``--ray-address``, ``--workers``, ``--ray-retries``) are
declared by ``openenv rollout``; this module checks how they combine with the others and
hands the controls and a policy factory to
:func:`kiln_verify.openenv.collect.ray_executor.run_ray`. The policy is built on each
worker by the factory (a model-backed policy loads there, not on the driver); its name and
options are checked here first, by building it once here (except the ``transformers``
policy, whose model only the workers load). Ray itself is imported by the executor, and
only on this path (docs/ray.md).
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass

from kiln_verify.errors import PolicyConfigInvalid, UsageError
from kiln_verify.openenv.collect import Bundle, CollectionControls
from kiln_verify.openenv.policy.registry import POLICY_NAMES, build_policy, parse_policy_options

__all__ = ["EXECUTORS", "ExecutorFlags", "collect_on_ray"]

EXECUTORS = ("local", "ray")
DEFAULT_RAY_RETRIES = 1


@dataclass(frozen=True, slots=True)
class ExecutorFlags:
    """The executor flags of one command line."""

    executor: str
    ray_address: str | None
    workers: int | None
    ray_retries: int

    @property
    def ray(self) -> bool:
        return self.executor == "ray"

    def check(self, *, environments: bool, journaled: bool) -> None:
        """Refuse flags that do not combine (``usage``, naming the flags)."""
        if self.executor not in EXECUTORS:
            raise UsageError(
                f"`executor` must be one of {', '.join(EXECUTORS)}, not {self.executor[:32]!r}",
                fields=("executor",),
            )
        if not self.ray:
            given = [
                name
                for name, value in (
                    ("ray_address", self.ray_address),
                    ("workers", self.workers),
                    ("ray_retries", None if self.ray_retries == DEFAULT_RAY_RETRIES else 1),
                )
                if value is not None
            ]
            if given:
                raise UsageError(
                    ", ".join(f"`{name}`" for name in given) + " need `executor` ray",
                    fields=(*given, "executor"),
                )
            return
        if journaled:
            raise UsageError(
                "`executor` ray collects its own shards; it does not take `journal`, `resume` "
                "or `groups_range` (collect shards with `groups_range` and `openenv merge`)",
                fields=("executor", "journal", "resume", "groups_range"),
            )
        if not environments:
            raise UsageError(
                "`executor` ray needs `environments`: the embedded oracle listens on this "
                "machine's loopback only, which Ray workers elsewhere cannot reach",
                fields=("executor", "environments"),
            )


def collect_on_ray(
    controls: CollectionControls,
    policy: str,
    policy_options: list[str] | None,
    flags: ExecutorFlags,
) -> Bundle:
    """The whole plan collected by Ray workers and published (or the typed refusal)."""
    from kiln_verify.openenv.collect.ray_executor import RaySettings, run_ray

    options = parse_policy_options(policy_options or [])
    if policy not in POLICY_NAMES:
        raise PolicyConfigInvalid(
            f"unknown policy {policy[:64]!r}; choose one of {', '.join(POLICY_NAMES)}"
        )
    if policy != "transformers":  # built once here to refuse bad options before Ray starts
        asyncio.run(build_policy(policy, options).aclose())  # (a model loads on workers only)
    factory = functools.partial(build_policy, policy, options)
    settings = RaySettings(flags.ray_address, flags.workers, flags.ray_retries)
    return run_ray(controls, factory, settings)
