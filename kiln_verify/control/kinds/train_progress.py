"""A train run's bookkeeping while it executes: its stage, state and trainer status.

:class:`TrainRun` carries the §10 stage a failure is recorded with (the collection's own
progress hook while collecting), persists each state change together with the current
``OpenEnvTrainingStatus``, and writes the trainer's progress at most every 500 ms.
:func:`uninterrupted` runs a step a cancellation must not cut short (publication, the
evidence, the installation); :func:`complete` ends the run ``completed`` and counts
``kiln_openenv_runs_total{status="training_completed"}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kiln_verify.control.executor import _Progress as CollectionProgress
from kiln_verify.control.registry import ActiveRun, RunRegistry
from kiln_verify.control.training.trainer_status import OpenEnvTrainingStatus
from kiln_verify.errors import KilnError

__all__ = ["TrainRun", "complete", "raise_if_cancelled", "uninterrupted"]


class TrainRun:
    """One run's bookkeeping: its failure stage, its trainer status, throttled progress."""

    def __init__(self, registry: RunRegistry, run_id: str) -> None:
        self.registry = registry
        self.run_id = run_id
        self.collecting = CollectionProgress(registry, run_id)
        self.training: OpenEnvTrainingStatus | None = None
        self._last_persist = 0

    @property
    def stage(self) -> Any:
        return self.collecting.stage

    def enter(self, stage: Any, state: str | None = None, **changes: Any) -> None:
        self.collecting.stage = stage
        if state is not None:
            changes["state"] = state
        if self.training is not None:
            changes["training"] = self.training
        if changes:
            self.registry.update(self.run_id, **changes)

    def trainer_progress(self, epoch: float | None, loss: float | None) -> None:
        if self.training is None:
            return
        self.training = self.training.advanced(epoch=epoch, loss=loss, epochs=1.0)
        now = self.registry.clock()
        persist = now - self._last_persist >= 500
        if persist:
            self._last_persist = now
        self.registry.update(self.run_id, persist=persist, training=self.training)

    def training_ended(self, **update: Any) -> dict[str, Any]:
        """The trainer's final status; a trainer that completed stays ``completed`` when
        a later stage (the evaluation) fails or is cancelled."""
        if self.training is None:
            return {}
        if self.training.state == "completed" and update.get("state") == "failed":
            return {}
        self.training = self.training.model_copy(update=update)
        return {"training": self.training}


def raise_if_cancelled(handle: ActiveRun | None) -> None:
    if handle is not None and handle.cancel_requested:
        raise asyncio.CancelledError


async def uninterrupted(handle: ActiveRun | None, work: Callable[[], Any]) -> Any:
    """``work`` in a worker thread that a cancellation does not interrupt."""
    if handle is not None:
        handle.publishing = True
    try:
        return await asyncio.shield(asyncio.to_thread(work))
    finally:
        if handle is not None:
            handle.publishing = False


def complete(registry: RunRegistry, run_id: str, **changes: Any) -> None:
    changes.update(state="completed", finished_unix_ms=registry.clock())
    try:
        registry.update(run_id, **changes)
    except (KilnError, OSError):
        registry.update(run_id, persist=False, **changes)
    registry.metrics.run("training_completed")
