"""The summary ``stats`` rule (kiln-openenv-contract §2.3): one computation for the
collector that writes them and the verifier that recomputes them (§6.10).

Means are ``sum / len`` in f64 with the sums taken left to right from ``0.0`` in record
order (group-major, then candidate); min/max over the episode returns; counts by
termination; plain integer sums.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from kiln_verify.openenv.records.summary import RolloutRecord, RolloutStats

__all__ = ["RecordFields", "StatsAccumulator", "compute_stats"]


class RecordFields(Protocol):
    """The fields of a :class:`RolloutRecord` the rule reads (a record, or a view of the
    JSON object the verifier validated as one; kiln_verify/report/bundle_facts.py)."""

    @property
    def episode_return(self) -> float: ...
    @property
    def model_latency_ms(self) -> float: ...
    @property
    def termination(self) -> str: ...
    @property
    def recoverable_protocol_errors(self) -> int: ...
    @property
    def capacity_retries(self) -> int: ...
    @property
    def steps(self) -> int: ...
    @property
    def model_tokens(self) -> int: ...


class StatsAccumulator:
    """The statistics of records added one at a time, in record order (O(1) memory).

    Same arithmetic as summing a list: left-to-right f64 additions from ``0.0``; min/max
    keep the first of equal values, as :func:`min` / :func:`max` do.
    """

    def __init__(self) -> None:
        self.count = 0
        self._return_sum = 0.0
        self._latency_sum = 0.0
        self._min: float | None = None
        self._max: float | None = None
        self._terminations = dict.fromkeys(
            ("done", "max_steps", "invalid_model_action", "protocol_error"), 0
        )
        self._recoverable = 0
        self._retries = 0
        self._steps = 0
        self._tokens = 0

    def add(self, record: RecordFields) -> None:
        value = record.episode_return
        self.count += 1
        self._return_sum += value
        self._latency_sum += record.model_latency_ms
        if self._min is None or value < self._min:
            self._min = value
        if self._max is None or value > self._max:
            self._max = value
        self._terminations[record.termination] += 1
        self._recoverable += record.recoverable_protocol_errors
        self._retries += record.capacity_retries
        self._steps += record.steps
        self._tokens += record.model_tokens

    def result(self) -> RolloutStats:
        """The statistics a collector writes (at least one record added)."""
        count = self.count
        return RolloutStats(
            mean_episode_return=self._return_sum / count,
            min_episode_return=self._min,
            max_episode_return=self._max,
            done_count=self._terminations["done"],
            max_steps_count=self._terminations["max_steps"],
            invalid_model_action_count=self._terminations["invalid_model_action"],
            protocol_error_count=self._terminations["protocol_error"],
            recoverable_protocol_error_count=self._recoverable,
            capacity_retry_count=self._retries,
            total_environment_steps=self._steps,
            total_model_tokens=self._tokens,
            mean_model_latency_ms=self._latency_sum / count,
        )


def compute_stats(records: Iterable[RolloutRecord]) -> RolloutStats:
    """The statistics a collector writes for ``records`` (at least one record)."""
    accumulator = StatsAccumulator()
    for record in records:
        accumulator.add(record)
    return accumulator.result()
