"""Checking the summary ``stats`` against the rule in :mod:`kiln_verify.openenv.records.stats`
(kiln-openenv-contract §6.10). The comparison is exact (floats bit for bit).
"""

from __future__ import annotations

from collections.abc import Sequence

from kiln_verify.errors import BundleStatsMismatch
from kiln_verify.openenv.records.stats import StatsAccumulator, compute_stats
from kiln_verify.openenv.records.summary import RolloutRecord, RolloutStats
from kiln_verify.records import bits_equal

__all__ = ["StatsAccumulator", "check_stats", "compute_stats"]


def _same(left: object, right: object) -> bool:
    if isinstance(left, float) and isinstance(right, float):
        return bits_equal(left, right)
    return type(left) is type(right) and left == right


def check_stats(
    stats: RolloutStats, records: Sequence[RolloutRecord] | RolloutStats, *, shown: str
) -> None:
    """Raise ``bundle_stats_mismatch`` naming the first field that differs.

    ``records``: the rollout records, or the statistics already recomputed from them.
    """
    expected = records if isinstance(records, RolloutStats) else compute_stats(records)
    for name in RolloutStats.model_fields:
        found, wanted = getattr(stats, name), getattr(expected, name)
        if not _same(found, wanted):
            raise BundleStatsMismatch(
                f"stats.{name} = {found!r} differs from the recomputed {wanted!r} (§6.10)",
                path=shown,
                location="stats",
            )
