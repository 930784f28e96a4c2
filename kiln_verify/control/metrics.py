"""``GET /metrics``: the fixed-cardinality Prometheus families of §13 that rollout runs touch.

Every label takes values from a closed list known at import time, and every series of
every family exists from the first scrape (zeros included), so a dashboard never sees a
family appear or a new label value. Environment URLs, names, adapters, credentials,
idempotency keys and run ids are never labels: the only inputs are the counters below,
incremented with closed values, and the three gauges computed at scrape time.

Training admission counts its preflights (``kiln_openenv_training_preflights_total{status}``)
and its refused train requests (``kiln_openenv_runs_total{status="training_preflight_rejected"}``);
a train run's paired evaluation counts ``kiln_openenv_environment_evaluations_total{status}``
and, when gated, ``kiln_openenv_environment_gates_total{decision}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kiln_verify.control.status import FAILURE_STAGES
from kiln_verify.openenv.records.summary import RolloutStats

__all__ = [
    "AUTHENTICATED_OPERATIONS",
    "CATALOG_STATUSES",
    "EVALUATION_STATUSES",
    "GATE_DECISIONS",
    "PREFLIGHT_STATUSES",
    "RUN_STATUSES",
    "TERMINATIONS",
    "ControlMetrics",
    "Gauges",
]

RUN_STATUSES: Final = (
    "started",
    "training_preflight_rejected",
    "idempotent_replay",
    "resumed",
    "admitted",
    "rollout_ready",
    "training_queued",
    "training_completed",
    "failed",
    "cancelled",
)
TERMINATIONS: Final = ("done", "max_steps", "invalid_model_action", "protocol_error")
CATALOG_STATUSES: Final = ("started", "completed", "failed")
PREFLIGHT_STATUSES: Final = ("accepted", "rejected")
AUTHENTICATED_OPERATIONS: Final = ("inspect", "task_catalog", "run")
EVALUATION_STATUSES: Final = ("started", "completed", "failed")
GATE_DECISIONS: Final = ("passed", "rejected", "inconclusive")
_BOOLS: Final = ("true", "false")


@dataclass(frozen=True, slots=True)
class Gauges:
    """The live counts the three gauges report."""

    active: int
    queued: int
    tracked: int


class ControlMetrics(Collector):
    """Plain counters plus a scrape-time collector; one instance per server."""

    def __init__(self, gauges: Callable[[], Gauges]) -> None:
        self._gauges = gauges
        self.runs = dict.fromkeys(RUN_STATUSES, 0)
        self.failures = {(stage, flag): 0 for stage in FAILURE_STAGES for flag in _BOOLS}
        self.queue_wait_seconds = 0.0
        self.episodes = 0
        self.terminations = dict.fromkeys(TERMINATIONS, 0)
        self.recoverable_errors = 0
        self.capacity_retries = 0
        self.environment_steps = 0
        self.model_tokens = 0
        self.model_latency_seconds = 0.0
        self.catalog = dict.fromkeys(CATALOG_STATUSES, 0)
        self.authenticated = dict.fromkeys(AUTHENTICATED_OPERATIONS, 0)
        self.preflights = dict.fromkeys(PREFLIGHT_STATUSES, 0)
        self.evaluations = dict.fromkeys(EVALUATION_STATUSES, 0)
        self.gates = dict.fromkeys(GATE_DECISIONS, 0)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    # -- recording (closed values only) -------------------------------------------------

    def run(self, status: str) -> None:
        self.runs[status] += 1  # KeyError for a value outside the closed list

    def failure(self, stage: str, retryable: bool) -> None:
        self.failures[(stage, "true" if retryable else "false")] += 1

    def queue_wait(self, milliseconds: int) -> None:
        self.queue_wait_seconds += milliseconds / 1000.0

    def published(self, stats: RolloutStats, episodes: int) -> None:
        """A collection was published: accumulate its statistics (§13)."""
        self.episodes += episodes
        self.terminations["done"] += stats.done_count
        self.terminations["max_steps"] += stats.max_steps_count
        self.terminations["invalid_model_action"] += stats.invalid_model_action_count
        self.terminations["protocol_error"] += stats.protocol_error_count
        self.recoverable_errors += stats.recoverable_protocol_error_count
        self.capacity_retries += stats.capacity_retry_count
        self.environment_steps += stats.total_environment_steps
        self.model_tokens += stats.total_model_tokens
        self.model_latency_seconds += stats.mean_model_latency_ms / 1000.0 * episodes

    def catalog_inspection(self, status: str) -> None:
        self.catalog[status] += 1

    def authenticated_operation(self, operation: str) -> None:
        self.authenticated[operation] += 1

    def training_preflight(self, status: str) -> None:
        """A ``POST /v1/openenv/training/preflight`` answered (``accepted``/``rejected``)."""
        self.preflights[status] += 1

    def environment_evaluation(self, status: str) -> None:
        """A train run's paired evaluation ``started``, ``completed`` or ``failed``."""
        self.evaluations[status] += 1

    def environment_gate(self, decision: str) -> None:
        """A gated evaluation's decision (``passed``/``rejected``/``inconclusive``)."""
        self.gates[decision] += 1

    # -- exposition ---------------------------------------------------------------------

    def exposition(self) -> bytes:
        """The Prometheus text format of every family."""
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        yield _labelled("kiln_openenv_runs", "OpenEnv run lifecycle events.", "status", self.runs)
        failures = CounterMetricFamily(
            "kiln_openenv_run_failures",
            "Failed OpenEnv runs by failure stage and retryability.",
            labels=["stage", "retryable"],
        )
        for (stage, flag), value in self.failures.items():
            failures.add_metric([stage, flag], value)
        yield failures
        yield _plain(
            "kiln_openenv_run_queue_wait_seconds",
            "Seconds admitted runs waited in the FIFO queue.",
            self.queue_wait_seconds,
        )
        live = self._gauges()
        for name, text, value in (
            ("kiln_openenv_runs_active", "Runs holding an execution slot.", live.active),
            ("kiln_openenv_runs_queued", "Runs waiting for an execution slot.", live.queued),
            ("kiln_openenv_runs_tracked", "Active, queued and retained runs.", live.tracked),
        ):
            yield GaugeMetricFamily(name, text, value=value)
        yield _plain(
            "kiln_openenv_episodes_collected", "Episodes of published collections.", self.episodes
        )
        yield _labelled(
            "kiln_openenv_episode_terminations",
            "Episodes of published collections by termination.",
            "termination",
            self.terminations,
        )
        for name, text, total in (
            (
                "kiln_openenv_recoverable_protocol_errors",
                "Recoverable protocol errors in published collections.",
                self.recoverable_errors,
            ),
            (
                "kiln_openenv_capacity_retries",
                "Capacity retries in published collections.",
                self.capacity_retries,
            ),
            (
                "kiln_openenv_environment_steps",
                "Environment steps in published collections.",
                self.environment_steps,
            ),
            (
                "kiln_openenv_model_tokens",
                "Model tokens in published collections.",
                self.model_tokens,
            ),
            (
                "kiln_openenv_model_latency_seconds",
                "Model latency in published collections (mean latency x episodes).",
                self.model_latency_seconds,
            ),
        ):
            yield _plain(name, text, total)
        yield _labelled(
            "kiln_openenv_task_catalog_inspections",
            "Task API catalog requests.",
            "status",
            self.catalog,
        )
        yield _labelled(
            "kiln_openenv_authenticated_operations",
            "Operations that sent an environment credential.",
            "operation",
            self.authenticated,
        )
        yield _labelled(
            "kiln_openenv_training_preflights",
            "Training preflights by outcome.",
            "status",
            self.preflights,
        )
        yield _labelled(
            "kiln_openenv_environment_evaluations",
            "Paired held-out environment evaluations by status.",
            "status",
            self.evaluations,
        )
        yield _labelled(
            "kiln_openenv_environment_gates",
            "Gated paired evaluations by decision.",
            "decision",
            self.gates,
        )


def _plain(name: str, text: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, text, value=value)


def _labelled(name: str, text: str, label: str, values: dict[str, int]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, text, labels=[label])
    for key, value in values.items():
        family.add_metric([key], value)
    return family
