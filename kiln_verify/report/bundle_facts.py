"""What a bundle report shows, gathered while offline verification runs (one pass).

:func:`gather` runs :func:`~kiln_verify.openenv.verify.verify_bundle` with a
:class:`FactCollector` as its observer, so the report describes exactly what verification
accepted, from the objects verification already parsed. Every statistic is the contract's
own rule (:class:`~kiln_verify.openenv.records.stats.StatsAccumulator`, the code the
collector writes ``stats`` with and the verifier recomputes them with), applied to the
records of one environment or one group in record order; the all-environment figures are
the summary's verified ``stats``, and the per-record totals are checked against them
before anything is rendered. A bundle verification refuses yields no facts at all: the
verifier's error propagates unchanged.
"""

from __future__ import annotations

import math
import os
import sys
from collections import Counter
from dataclasses import dataclass, field

from kiln_verify.openenv.records.reports import VerificationReport
from kiln_verify.openenv.records.rollout import ScoredRollout
from kiln_verify.openenv.records.stats import StatsAccumulator
from kiln_verify.openenv.records.summary import RolloutStats, RolloutSummary
from kiln_verify.openenv.verify import verify_bundle
from kiln_verify.openenv.verify.observer import VerifiedCandidate
from kiln_verify.openenv.verify.stats import check_stats

__all__ = ["BundleFacts", "EnvironmentFacts", "FactCollector", "GroupFacts", "gather"]


@dataclass(frozen=True, slots=True)
class GroupFacts:
    """One group: its environment, seed and the contract statistics of its candidates."""

    group_index: int
    environment_index: int
    seed: int
    stats: RolloutStats
    candidates: int

    @property
    def spread(self) -> float:
        """max - min of the group's returns (the largest finite float if that overflows)."""
        high, low = self.stats.max_episode_return, self.stats.min_episode_return
        assert high is not None  # a group has candidates
        assert low is not None
        value = high - low
        return value if math.isfinite(value) else sys.float_info.max

    @property
    def zero_variance(self) -> bool:
        """Every candidate scored the same: a GRPO group-relative advantage of zero."""
        return self.stats.max_episode_return == self.stats.min_episode_return


@dataclass(slots=True)
class EnvironmentFacts:
    """One environment's rollouts: statistics, returns, error codes and one example."""

    index: int
    accumulator: StatsAccumulator = field(default_factory=StatsAccumulator)
    returns: list[float] = field(default_factory=list)
    harness_codes: Counter[str] = field(default_factory=Counter)
    harness_examples: dict[str, str] = field(default_factory=dict)
    protocol_codes: Counter[str] = field(default_factory=Counter)
    example: ScoredRollout | None = None
    example_group: int = 0
    example_candidate: int = 0

    def stats(self) -> RolloutStats:
        return self.accumulator.result()


@dataclass(frozen=True, slots=True)
class BundleFacts:
    summary: RolloutSummary
    summary_name: str
    verification: VerificationReport
    environments: tuple[EnvironmentFacts, ...]
    groups: tuple[GroupFacts, ...]


class FactCollector:
    """The verifier's observer: per-environment and per-group facts in record order."""

    def __init__(self) -> None:
        self.summary: RolloutSummary | None = None
        self.environments: dict[int, EnvironmentFacts] = {}
        self.groups: list[GroupFacts] = []
        self.total = StatsAccumulator()
        self._group: StatsAccumulator | None = None
        self._group_key: tuple[int, int, int] = (-1, -1, -1)

    def start(self, summary: RolloutSummary) -> None:
        self.summary = summary

    def _close_group(self) -> None:
        if self._group is not None:
            index, environment, seed = self._group_key
            self.groups.append(
                GroupFacts(index, environment, seed, self._group.result(), self._group.count)
            )
            self._group = None

    def candidate(self, verified: VerifiedCandidate) -> None:
        record = verified.record
        env = self.environments.get(verified.environment_index)
        if env is None:
            env = self.environments[verified.environment_index] = EnvironmentFacts(
                verified.environment_index
            )
        key = (record.group_index, verified.environment_index, record.seed)
        if key != self._group_key:
            self._close_group()
            self._group, self._group_key = StatsAccumulator(), key
        assert self._group is not None
        self._group.add(record)
        self.total.add(record)
        env.accumulator.add(record)
        env.returns.append(record.episode_return)
        if record.protocol_error_code is not None:
            env.protocol_codes[record.protocol_error_code] += 1
        harness = verified.harness_error
        if harness is not None:
            env.harness_codes[harness.code] += 1
            env.harness_examples.setdefault(harness.code, harness.message)
        if env.example is None:
            env.example = verified.completion
            env.example_group, env.example_candidate = record.group_index, record.candidate_index

    def finish(self) -> list[GroupFacts]:
        self._close_group()
        return self.groups


def gather(
    summary_path: str | os.PathLike[str],
    *,
    dataset_path: str | os.PathLike[str] | None = None,
    replay_path: str | os.PathLike[str] | None = None,
) -> BundleFacts:
    """Verify the bundle and return what its report shows (or raise the verifier's error)."""
    collector = FactCollector()
    report = verify_bundle(
        summary_path, dataset_path=dataset_path, replay_path=replay_path, observer=collector
    )
    groups = collector.finish()
    summary = collector.summary
    assert summary is not None  # start() precedes every candidate
    if collector.total.count:
        check_stats(summary.stats, collector.total.result(), shown=report.summary_path)
    environments = tuple(collector.environments[i] for i in sorted(collector.environments))
    return BundleFacts(
        summary=summary,
        summary_name=os.path.basename(report.summary_path),
        verification=report,
        environments=environments,
        groups=tuple(groups),
    )
