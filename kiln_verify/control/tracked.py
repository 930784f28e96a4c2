"""The tracked runs: statuses, their live queue positions, idempotency keys and retention.

:class:`TrackedRuns` is what the registry remembers, without running anything: every
retained status (persisted through the store before it is visible), the idempotency
bindings, the queue order (for the live 1-based ``queue_position`` of a queued run) and
the retention rules. ``max_tracked_runs`` bounds active + queued + retained together:
making room first forgets expired terminal runs, then the oldest terminal ones; when every
tracked run is live the request is refused (``openenv_run_capacity_full``). Forgotten runs
keep their directories on disk. :class:`~kiln_verify.control.registry.RunRegistry` adds
admission, execution, cancellation and restart on top.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from kiln_verify.control.config import ServerConfig
from kiln_verify.control.metrics import ControlMetrics
from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.control.store import RunStore
from kiln_verify.errors import ApiCapacityFull, ApiIdempotencyConflict, ApiRunNotFound

__all__ = ["TrackedRuns"]


class TrackedRuns:
    """Retained statuses, idempotency bindings and the queue order (see the module doc)."""

    metrics: ControlMetrics

    def __init__(self, config: ServerConfig, store: RunStore, clock: Callable[[], int]) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self._runs: dict[str, OpenEnvRunStatus] = {}
        self._keys: dict[str, str] = {}
        self._queue: deque[str] = deque()

    def _project(self, status: OpenEnvRunStatus) -> OpenEnvRunStatus:
        """The status with its live queue position (only while queued)."""
        if status.state != "queued" or status.admission is None:
            return status
        try:
            position = self._queue.index(status.run_id) + 1
        except ValueError:
            return status
        if status.admission.queue_position == position:
            return status
        admission = status.admission.model_copy(update={"queue_position": position})
        return status.model_copy(update={"admission": admission})

    def get(self, run_id: str) -> OpenEnvRunStatus:
        status = self._runs.get(run_id)
        if status is None:
            raise ApiRunNotFound(f"no retained run has id {run_id[:40]!r}")
        return self._project(status)

    def list(self) -> list[OpenEnvRunStatus]:
        """Retained runs, newest first (ties in sequence order, newest first)."""
        self._prune()
        runs = sorted(
            self._runs.values(),
            key=lambda s: (s.submitted_unix_ms, s.admission.sequence if s.admission else 0),
            reverse=True,
        )
        return [self._project(status) for status in runs]

    def replay(self, request: OpenEnvRunRequest) -> OpenEnvRunStatus | None:
        """The retained run bound to the request's key if it is the same request;
        ``openenv_run_idempotency_conflict`` if the key is bound to a different one."""
        key = request.idempotency_key
        if key is None:
            return None
        self._prune()
        run_id = self._keys.get(key)
        if run_id is None:
            return None
        existing = self._runs[run_id]
        if existing.request.to_json() != request.to_json():
            raise ApiIdempotencyConflict(
                "this idempotency_key is bound to a retained run with a different request"
            )
        self.metrics.run("idempotent_replay")
        return self._project(existing)

    def _forget(self, run_id: str) -> None:
        status = self._runs.pop(run_id)
        key = status.request.idempotency_key
        if key is not None and self._keys.get(key) == run_id:
            del self._keys[key]

    def _prune(self) -> None:
        """Forget terminal runs older than the TTL (their directories stay on disk)."""
        horizon = self.clock() - self.config.openenv.tracked_run_ttl_secs * 1000
        for run_id in [
            run_id
            for run_id, status in self._runs.items()
            if status.terminal and (status.finished_unix_ms or 0) < horizon
        ]:
            self._forget(run_id)

    def _make_room(self) -> None:
        self._prune()
        limit = self.config.openenv.max_tracked_runs
        while len(self._runs) >= limit:
            terminal = [s for s in self._runs.values() if s.terminal]
            if not terminal:
                raise ApiCapacityFull(
                    f"max_tracked_runs = {limit} runs are queued or running; none can be "
                    "forgotten to make room"
                )
            oldest = min(terminal, key=lambda s: (s.submitted_unix_ms, s.run_id))
            self._forget(oldest.run_id)

    def update(self, run_id: str, persist: bool = True, **changes: Any) -> OpenEnvRunStatus:
        """Replace fields of a tracked run's status; persisted unless ``persist`` is false."""
        status = self._runs[run_id].model_copy(update=changes)
        if persist:
            self.store.save(status)
        self._runs[run_id] = status
        return status

    def persist(self, run_id: str) -> None:
        self.store.save(self._runs[run_id])
