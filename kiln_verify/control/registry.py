"""The run registry: tracked statuses, idempotency bindings and bounded FIFO admission.

Everything here runs on the server's event loop and never awaits inside a change, so each
method is atomic with respect to every other request: fifty identical ``POST``s arriving
together see one binding created by the first and replay it forty-nine times. Every
change is persisted before it is visible (:class:`~kiln_verify.control.store.RunStore`).

Admission (§12, the seed's "Capacity acquisition"): at most ``max_active_runs`` runs
execute; the rest wait in ``sequence`` order, cancellable, with a live 1-based
``queue_position``; the queue holds no session and no policy (only the controls its
kind's admission computed). What is tracked, the idempotency bindings and retention
(``max_tracked_runs``, the TTL) are :class:`~kiln_verify.control.tracked.TrackedRuns`,
which this class extends.

Run kinds (:mod:`kiln_verify.control.kind`): the registry knows none of them. It
dispatches on ``request.kind`` through the table it is given (:data:`kiln_verify.control.
kinds.KINDS` in the server): the kind's admission runs once when a run is created and its
controls wait with the queued run for the kind's executor; the kind builds the run's first
progress and names its artifact table. A kind not in the table is
``openenv_run_kind_unsupported``.

Restart (:meth:`RunRegistry.restore`, decided by :mod:`kiln_verify.control.restore`):
queued runs that never acquired a slot resume in their admission sequence; admitted runs
that were not terminal fail with ``run_interrupted`` (an environment session cannot be
resumed); idempotency bindings of retained runs survive (when two retained runs share a
key, the newest one keeps it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kiln_verify.control import failures
from kiln_verify.control.config import ServerConfig
from kiln_verify.control.kind import ArtifactTable, KindTable, kind_of
from kiln_verify.control.metrics import ControlMetrics, Gauges
from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.control.resident.required import MODEL_KINDS, require_resident_model
from kiln_verify.control.restore import plan_restore, restartable
from kiln_verify.control.status import (
    RUN_SCHEMA,
    OpenEnvRunStatus,
    RunAdmission,
    RunFailure,
)
from kiln_verify.control.store import RunStore
from kiln_verify.control.tracked import TrackedRuns
from kiln_verify.errors import (
    ApiRunCreateFailed,
    ApiRunNotCancellable,
    ControlApiError,
    KilnError,
)
from kiln_verify.limits import MAX_CANCEL_WAIT_S

__all__ = ["ActiveRun", "RunRegistry", "now_ms"]

CANCELLED_WHILE_QUEUED = "cancelled while waiting for an execution slot"
CANCELLED_WHILE_ACTIVE = "cancelled by request; the collection stopped and published nothing"


log = logging.getLogger("kiln_verify.server")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class ActiveRun:
    """An admitted run's task and what it is doing (publication is never interrupted)."""

    task: asyncio.Task[None] | None = None
    cancel_requested: bool = False
    publishing: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)


class RunRegistry(TrackedRuns):
    """The server's runs; see the module docstring for the rules."""

    def __init__(
        self,
        config: ServerConfig,
        store: RunStore,
        kinds: KindTable,
        *,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        super().__init__(config, store, clock)
        self.metrics = ControlMetrics(self.gauges)
        self.kinds = kinds
        self._admitted: dict[str, Any] = {}
        self._active: dict[str, ActiveRun] = {}
        self._next_sequence = 1
        self.shutting_down = False
        self.restore_skipped: list[str] = []

    # -- reading ------------------------------------------------------------------------

    @property
    def max_active(self) -> int:
        return self.config.openenv.max_active_runs

    def gauges(self) -> Gauges:
        self._prune()
        return Gauges(len(self._active), len(self._queue), len(self._runs))

    def active(self, run_id: str) -> ActiveRun | None:
        return self._active.get(run_id)

    # -- creating -----------------------------------------------------------------------

    def _forget(self, run_id: str) -> None:
        self._admitted.pop(run_id, None)
        super()._forget(run_id)

    def artifacts(self, status: OpenEnvRunStatus) -> ArtifactTable:
        """The artifact table of the run's kind (empty for a kind this server does not run)."""
        kind = self.kinds.get(status.kind)
        return kind.artifacts if kind is not None else {}

    def admit(self, request: OpenEnvRunRequest) -> Any:
        """The request's kind's admission (a typed refusal, or the controls it computed).

        A kind that needs a resident model (``train``) and is not served is
        ``model_not_loaded`` on a server without one, the first thing missing; a served
        kind's own admission checks that itself (``require_resident_model``). A refused
        training request counts
        ``kiln_openenv_runs_total{status="training_preflight_rejected"}``."""
        try:
            return self._admit_kind(request)
        except ControlApiError:
            self._count_refusal(request)
            raise

    def _admit_kind(self, request: OpenEnvRunRequest) -> Any:
        if request.kind in MODEL_KINDS and request.kind not in self.kinds:
            require_resident_model(self.config, f"kind={request.kind}")
        return kind_of(self.kinds, request.kind).admit(request, self.config)

    def _count_refusal(self, request: OpenEnvRunRequest) -> None:
        if request.kind in MODEL_KINDS:
            self.metrics.run("training_preflight_rejected")

    def create(self, request: OpenEnvRunRequest) -> tuple[OpenEnvRunStatus, bool]:
        """``POST /v1/openenv/runs``: an exact retry replays before the server's policy is
        applied; anything else is admitted once and queued with the controls admission
        computed."""
        replayed = self.replay(request)
        if replayed is not None:
            return replayed, False
        return self.submit(request, self.admit(request))

    async def create_off_loop(self, request: OpenEnvRunRequest) -> tuple[OpenEnvRunStatus, bool]:
        """:meth:`create` for the event loop: admission runs in a worker thread, because a
        train request's admission loads the resident model on its first use (seconds for
        a real model), and status polls of other runs must not wait for that. Replay and
        queueing stay on the loop; :meth:`submit` replays a twin admitted meanwhile."""
        replayed = self.replay(request)
        if replayed is not None:
            return replayed, False
        try:
            controls = await asyncio.to_thread(self._admit_kind, request)
        except ControlApiError:
            self._count_refusal(request)  # on the loop, like every other count
            raise
        return self.submit(request, controls)

    def submit(
        self, request: OpenEnvRunRequest, controls: Any = None
    ) -> tuple[OpenEnvRunStatus, bool]:
        """``(status, created)``: an exact retry replays, anything else queues a new run.

        ``controls`` are what the kind's admission computed (see :meth:`create`); they are
        handed to the executor once. Without them the executor admits the run itself."""
        replayed = self.replay(request)
        if replayed is not None:
            return replayed, False
        return self.submit_new(request, controls), True

    def submit_new(
        self,
        request: OpenEnvRunRequest,
        controls: Any = None,
        prepare: Callable[[str], None] | None = None,
    ) -> OpenEnvRunStatus:
        """Queue a new run without replaying a twin (the resume route's new attempt keeps
        its run's idempotency key, which then binds the newest run, as after a restart).
        ``prepare(run_id)`` runs once the run directory exists and before the run is
        tracked or can start; if it raises, the run is withdrawn."""
        kind = kind_of(self.kinds, request.kind)
        self._make_room()
        now = self.clock()
        run_id = str(uuid.uuid4())
        status = OpenEnvRunStatus(
            schema=RUN_SCHEMA,
            run_id=run_id,
            kind=request.kind,
            state="queued",
            request=request,
            submitted_unix_ms=now,
            admission=RunAdmission(
                max_active_runs=self.max_active,
                sequence=self._next_sequence,
                queue_position=len(self._queue) + 1,
            ),
            progress=kind.progress(request),
            training_contract=kind.contract(controls) if kind.contract is not None else None,
        )
        try:
            self.store.create(status)
        except (KilnError, OSError) as exc:
            detail = exc.rule if isinstance(exc, KilnError) else exc.strerror
            raise ApiRunCreateFailed(f"the run directory could not be written: {detail}") from None
        if prepare is not None:
            try:
                prepare(run_id)
            except BaseException:
                shutil.rmtree(self.store.run_dir(run_id), ignore_errors=True)
                raise
        self._next_sequence += 1
        self._runs[run_id] = status
        if controls is not None:
            self._admitted[run_id] = controls
        if request.idempotency_key is not None:
            self._keys[request.idempotency_key] = run_id
        self._queue.append(run_id)
        self.metrics.run("started")
        if request.credential_ids and any(request.credential_ids):
            self.metrics.authenticated_operation("run")
        # Admit after answering: the 202 waits for the run's own durable creation only,
        # not for the admission write of whichever run the free slot goes to.
        asyncio.get_running_loop().call_soon(self.pump)
        return self._project(self._runs[run_id])

    # -- changing -----------------------------------------------------------------------

    def pump(self) -> None:
        """Admit queued runs in sequence order while execution slots are free."""
        while self._queue and len(self._active) < self.max_active and not self.shutting_down:
            run_id = self._queue.popleft()
            status = self._runs[run_id]
            now = self.clock()
            wait = max(0, now - status.submitted_unix_ms)
            admission = status.admission or RunAdmission(max_active_runs=1, sequence=1)
            admission = admission.model_copy(
                update={"queue_position": None, "admitted_unix_ms": now, "queue_wait_ms": wait}
            )
            handle = ActiveRun()
            self._active[run_id] = handle
            try:
                self.update(run_id, state="discovering", admission=admission)
            except (KilnError, OSError) as exc:
                del self._active[run_id]
                self._fail_unstarted(run_id, exc)
                continue
            self.metrics.run("admitted")
            self.metrics.queue_wait(wait)
            controls = self._admitted.pop(run_id, None)
            execute = kind_of(self.kinds, status.kind).execute
            handle.task = asyncio.get_running_loop().create_task(
                execute(self, run_id, controls), name=f"kiln-run-{run_id}"
            )
            handle.task.add_done_callback(functools.partial(self._settled, run_id, handle))

    def _fail_unstarted(self, run_id: str, exc: BaseException) -> None:
        failure = failures.classify(exc, "admission", self.clock())
        self._runs[run_id] = self._runs[run_id].model_copy(
            update={
                "state": "failed",
                "finished_unix_ms": failure.occurred_unix_ms,
                "failure": failure,
                "error": failure.message,
            }
        )
        self.metrics.run("failed")
        self.metrics.failure(failure.stage, failure.retryable)

    def _settled(self, run_id: str, handle: ActiveRun, task: asyncio.Task[None]) -> None:
        """The run's task ended: free its slot and admit the next queued run.

        The executor always records a terminal state itself; this only has to when its
        task was cancelled before its first step, or when recording failed (a full disk),
        so a slot can never leak and a run never stays active without a task.
        """
        self._active.pop(run_id, None)
        handle.done.set()
        if self.shutting_down:
            return
        error = None if task.cancelled() else task.exception()
        status = self._runs.get(run_id)
        try:
            if status is not None and not status.terminal:
                if task.cancelled():
                    self.finish(run_id, "cancelled", error=CANCELLED_WHILE_ACTIVE)
                else:
                    failure = failures.classify(
                        error or RuntimeError("the run ended without an outcome"),
                        "orchestration",
                        self.clock(),
                    )
                    self.finish(run_id, "failed", failure=failure, error=failure.message)
            elif error is not None:
                log.error(
                    "kiln-verify serve: run %s: %s",
                    run_id,
                    failures.bounded_message(f"{type(error).__name__}: {error}"),
                )
        except (KilnError, OSError) as exc:
            log.error("kiln-verify serve: cannot record the end of run %s: %s", run_id, exc)
        self.pump()

    def finish(self, run_id: str, state: str, **changes: Any) -> OpenEnvRunStatus:
        """Persist a terminal state and count it (``rollout_ready``/``failed``/``cancelled``)."""
        failure: RunFailure | None = changes.get("failure")
        changes.update(state=state, finished_unix_ms=self.clock())
        try:
            status = self.update(run_id, **changes)
        except (KilnError, OSError) as exc:
            # the outcome still holds in memory; run.json keeps the last state it could
            # record, and a restart will fail that run as interrupted
            log.error("kiln-verify serve: cannot persist the end of run %s: %s", run_id, exc)
            status = self.update(run_id, persist=False, **changes)
        self.metrics.run(state)
        if failure is not None:
            self.metrics.failure(failure.stage, failure.retryable)
        return status

    async def cancel(self, run_id: str) -> OpenEnvRunStatus:
        """Cooperative cancellation: a queued run ends at once; an active one is asked to
        stop and awaited for at most ``MAX_CANCEL_WAIT_S`` (a publication in progress is
        allowed to finish, so the run may end ``rollout_ready`` instead)."""
        status = self.get(run_id)
        if status.terminal:
            raise ApiRunNotCancellable(f"run {run_id} already ended in state {status.state}")
        if run_id in self._queue:
            self._queue.remove(run_id)
            self._admitted.pop(run_id, None)
            admission = (
                status.admission.model_copy(update={"queue_position": None})
                if (status.admission)
                else None
            )
            self.finish(run_id, "cancelled", admission=admission, error=CANCELLED_WHILE_QUEUED)
            return self.get(run_id)
        handle = self._active.get(run_id)
        if handle is None:  # admitted but not started; cannot happen between awaits
            raise ApiRunNotCancellable(f"run {run_id} is not running")
        handle.cancel_requested = True
        if not handle.publishing and handle.task is not None:
            handle.task.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(handle.done.wait()), MAX_CANCEL_WAIT_S)
        return self.get(run_id)

    async def shutdown(self) -> None:
        """Stop admitting and stop active runs without recording an outcome: the next start
        fails them with ``run_interrupted``, exactly as after a crash."""
        self.shutting_down = True
        tasks = [handle.task for handle in self._active.values() if handle.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- restart ------------------------------------------------------------------------

    def restore(self) -> int:
        """Load the state directory (:mod:`kiln_verify.control.restore` decides what a
        restart keeps); returns the number of queued runs resumed."""
        found = self.store.restore()
        self.restore_skipped = found.skipped
        plan = plan_restore(found.statuses, self.config, self.kinds, self.clock())
        if found.statuses:
            self._next_sequence = plan.next_sequence
        for failed in plan.failed:
            self.store.save(failed)
            failure = failed.failure
            if failure is not None:
                self.metrics.failure(failure.stage, failure.retryable)
            self.metrics.run("failed")
        resumed = 0
        for status in sorted(plan.kept, key=lambda s: s.submitted_unix_ms):
            key = status.request.idempotency_key
            if key is not None:
                self._keys[key] = status.run_id  # the newest binding wins
        for status in plan.kept:
            self._runs[status.run_id] = status
            if restartable(status, self.kinds):
                self._queue.append(status.run_id)
                resumed += 1
                admission = status.admission.model_copy(  # type: ignore[union-attr]
                    update={"max_active_runs": self.max_active, "queue_position": resumed}
                )
                self.update(status.run_id, admission=admission)
                self.metrics.run("resumed")
        return resumed
