"""Recomputing the summary ``stats`` from its ``rollouts`` (kiln-openenv-contract §2.3, §6.10).

Means are ``sum / len`` in f64 with the sums taken left to right from ``0.0`` in record
order (group-major, then candidate); min/max over the episode returns; counts by
termination; plain integer sums. The comparison is exact (floats bit for bit).
"""

from __future__ import annotations

from collections.abc import Sequence

from kiln_verify.errors import BundleStatsMismatch
from kiln_verify.openenv.records.common import bits_equal
from kiln_verify.openenv.records.summary import RolloutRecord, RolloutStats

__all__ = ["check_stats", "compute_stats"]


def compute_stats(records: Sequence[RolloutRecord]) -> RolloutStats:
    """The statistics a collector writes for ``records`` (at least one record)."""
    returns = [record.episode_return for record in records]
    total_return = 0.0
    for value in returns:
        total_return += value
    total_latency = 0.0
    for record in records:
        total_latency += record.model_latency_ms
    count = len(records)

    def terminated(kind: str) -> int:
        return sum(1 for record in records if record.termination == kind)

    return RolloutStats(
        mean_episode_return=total_return / count,
        min_episode_return=min(returns) if returns else None,
        max_episode_return=max(returns) if returns else None,
        done_count=terminated("done"),
        max_steps_count=terminated("max_steps"),
        invalid_model_action_count=terminated("invalid_model_action"),
        protocol_error_count=terminated("protocol_error"),
        recoverable_protocol_error_count=sum(r.recoverable_protocol_errors for r in records),
        capacity_retry_count=sum(r.capacity_retries for r in records),
        total_environment_steps=sum(r.steps for r in records),
        total_model_tokens=sum(r.model_tokens for r in records),
        mean_model_latency_ms=total_latency / count,
    )


def _same(left: object, right: object) -> bool:
    if isinstance(left, float) and isinstance(right, float):
        return bits_equal(left, right)
    return type(left) is type(right) and left == right


def check_stats(stats: RolloutStats, records: Sequence[RolloutRecord], *, shown: str) -> None:
    """Raise ``bundle_stats_mismatch`` naming the first field that differs."""
    expected = compute_stats(records)
    for name in RolloutStats.model_fields:
        found, wanted = getattr(stats, name), getattr(expected, name)
        if not _same(found, wanted):
            raise BundleStatsMismatch(
                f"stats.{name} = {found!r} differs from the recomputed {wanted!r} (§6.10)",
                path=shown,
                location="stats",
            )
