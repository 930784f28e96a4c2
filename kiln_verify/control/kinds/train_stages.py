"""Run one admitted ``kind=train`` run to a terminal state (docs/training-runs.md).

States and the §10 stage a failure in each is recorded with:

==========================  ============================================  =====================
state                       what happens                                  failure stage
==========================  ============================================  =====================
``discovering``,            the behaviour policy's corpus, collected as   discovery, collection,
``collecting``,             a rollout run does (token provenance kept)    identity_verification
``revalidating``
(still ``revalidating``)    bundle + selected GRPO corpus published       artifact_publication
``submitting``              the selected corpus exported as a bundle      training_submission
``training_queued``         the bundle is the trainer's job               training
``training_running``        the bundle's ``train.py`` in a child; result  training
                            verified, adapter imported into quarantine,
                            ``train_receipt``/``adapter_manifest`` kept
``environment_evaluating``  only with ``environment_eval``: the           environment_evaluation
                            evaluation stage (:class:`CandidateEvaluator`)
``completed``               the adapter installed (``auto_load``), unless
                            the evaluation kept it out
==========================  ============================================  =====================

The contract every stage executes is the run's sealed one (read from its status). A
selection with nothing to train on completes without a trainer. Publication, the
evidence and the installation are never interrupted by a cancellation; anywhere else a
cancellation stops the run (the trainer's whole process group is killed) and it ends
``cancelled`` with nothing installed. A server shutdown records nothing: the next start
fails the run with ``run_interrupted``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, Protocol

from kiln_verify.control import failures
from kiln_verify.control.kinds import train_evidence as steps
from kiln_verify.control.kinds.train_admission import TRAIN_CORPUS, TrainControls, readmit
from kiln_verify.control.kinds.train_collect import collect_recorded, publish_train_bundle
from kiln_verify.control.kinds.train_progress import (
    TrainRun,
    complete,
    raise_if_cancelled,
    uninterrupted,
)
from kiln_verify.control.kinds.trainer_child import run_trainer, trainer_argv
from kiln_verify.control.registry import ActiveRun, RunRegistry
from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.control.status import FailureStage, RunArtifact
from kiln_verify.control.training.effective import runner_options
from kiln_verify.control.training.rules import behaviour_adapter
from kiln_verify.control.training.seal import sealed_contract
from kiln_verify.control.training.trainer_status import (
    OPENENV_SOURCE,
    OpenEnvTrainingStatus,
    TrainingDataProvenance,
    job_id,
)
from kiln_verify.core.digest import hash_file, sha256_bytes
from kiln_verify.limits import MAX_TRAINING_EVIDENCE_BYTES
from kiln_verify.openenv.collect import CollectionControls
from kiln_verify.openenv.training.corpus import lineage_from_groups
from kiln_verify.openenv.training.evidence import TrainerRun

__all__ = ["CandidateEvaluator", "Evaluated", "execute_train"]

CANCELLED = "cancelled by request; nothing was installed"
NOTHING_SELECTED = (
    "training selection kept no group (no usable output or no reward gradient); the run "
    "completed without a trainer"
)


class Evaluated(Protocol):
    """What the evaluation stage returns: its manifest entries and final outcome."""

    @property
    def artifacts(self) -> list[RunArtifact]: ...

    @property
    def outcome(self) -> str: ...


CandidateEvaluator = Callable[
    [RunRegistry, str, OpenEnvRunRequest, CollectionControls, Path], Awaitable[Evaluated | None]
]
"""The paired held-out evaluation (§9, :mod:`.evaluation_stage`) of a trained adapter:
``(registry, run_id, request, the run's collection controls, the completed bundle)``. It
runs in state ``environment_evaluating``, records its own status section, installs the
candidate only when its decision allows (promotion and ``auto_load`` are its own), and
returns its manifest entries, or ``None`` when the request asks for no evaluation; it
raises for a failed evaluation (stage ``environment_evaluation``)."""

_GATE_OUTCOMES: Final = {
    "promoted": "promoted",
    "kept": "kept",
    "rejected": "regression",
    "inconclusive": "inconclusive",
    "error": "error",
}
"""The evaluation's outcome as Kiln's ``gate_outcome`` (a ``diagnostic`` run has none)."""


async def execute_train(
    registry: RunRegistry,
    run_id: str,
    controls: TrainControls | None = None,
    *,
    evaluate: CandidateEvaluator | None = None,
) -> None:
    """Collect, select, export, train, verify, keep the evidence and install; always ends
    in a terminal state (see the module docstring)."""
    run = TrainRun(registry, run_id)
    handle = registry.active(run_id)
    try:
        await _execute(registry, run_id, run, handle, controls, evaluate)
    except asyncio.CancelledError:
        if registry.shutting_down:
            raise
        ended = run.training_ended(state="failed", error=CANCELLED)
        registry.finish(run_id, "cancelled", error=CANCELLED, **ended)
    except Exception as exc:
        now = registry.clock()
        if isinstance(exc, steps.TrainingStageFailed):
            stage: FailureStage = (
                "training_submission" if exc.code == "training_submission_failed" else "training"
            )
            fallback = failures.FALLBACK[stage]
            failure = failures.explicit(exc.code, stage, fallback[1], str(exc), fallback[2], now)
        else:
            failure = failures.classify(exc, run.stage, now)
        ended = run.training_ended(state="failed", error=failure.message)
        registry.finish(run_id, "failed", failure=failure, error=failure.message, **ended)


async def _execute(
    registry: RunRegistry,
    run_id: str,
    run: TrainRun,
    handle: ActiveRun | None,
    controls: TrainControls | None,
    evaluate: CandidateEvaluator | None,
) -> None:
    config = registry.config
    status = registry.get(run_id)
    if controls is None:  # restored from disk: only the request and the sealed contract
        controls = readmit(status, config)
    contract = sealed_contract(status)
    adapter = behaviour_adapter(status.request.adapter)
    recorded = await collect_recorded(
        config, controls.collection, contract, adapter, run.collecting
    )
    raise_if_cancelled(handle)
    run.enter("artifact_publication")
    run_dir = registry.store.run_dir(run_id)
    bundle = await uninterrupted(
        handle,
        lambda: publish_train_bundle(recorded, contract, adapter, run_dir, run_id, TRAIN_CORPUS),
    )
    published, selection = bundle.published, bundle.selection
    registry.metrics.published(published.stats, published.rollouts)
    total = status.progress
    collected: dict[str, Any] = {
        "progress": total.model_copy(
            update={
                "groups_completed": total.groups_total,
                "rollouts_completed": total.rollouts_total,
            }
        ),
        "rollout_stats": published.stats,
        "environments": published.environments,
        "artifacts": published.artifacts,
        "warnings": selection.record.warnings,
    }
    if not selection.groups:
        warnings = [*(selection.record.warnings or ()), NOTHING_SELECTED]
        complete(registry, run_id, **{**collected, "warnings": warnings})
        return
    raise_if_cancelled(handle)
    run.enter("training_submission", "submitting", **collected)
    corpus = selection.corpus_bytes()
    lineage = lineage_from_groups(selection.groups)
    export = await asyncio.to_thread(steps.export_bundle, config, run_dir, adapter, TRAIN_CORPUS)
    run.training = OpenEnvTrainingStatus(
        job_id=job_id(run_id),
        state="queued",
        progress=0.0,
        training_data=TrainingDataProvenance(
            source=OPENENV_SOURCE,
            admitted_corpus_sha256=str(sha256_bytes(corpus)),
            rows=selection.record.groups_submitted,
            openenv=lineage,
        ),
    )
    run.enter("training", "training_queued", training_job_id=run.training.job_id)
    registry.metrics.run("training_queued")
    raise_if_cancelled(handle)
    model = config.model
    assert model is not None  # admission required a resident model
    run.training = run.training.model_copy(update={"state": "running"})
    run.enter("training", "training_running")
    argv = trainer_argv(
        export, model.path, runner_options(contract.effective_config), device=model.device
    )
    ended = await run_trainer(argv, cwd=run_dir / steps.TRAINER_DIR, progress=run.trainer_progress)
    if ended.exit_code != 0:
        raise steps.TrainingStageFailed(
            "training_failed",
            f"train.py exited with status {ended.exit_code}: {ended.stderr_tail[-1500:]}",
        )
    await asyncio.to_thread(steps.check_completed, export)
    raise_if_cancelled(handle)
    name = str(contract.effective_config.output_name)
    directory = await asyncio.to_thread(steps.import_candidate, config, export, run_dir, name)
    trainer = TrainerRun(
        train_py_sha256=str(
            hash_file(export / "train.py", max_bytes=MAX_TRAINING_EVIDENCE_BYTES).sha256
        ),
        exit_code=ended.exit_code,
        started_unix_ms=ended.started_unix_ms,
        finished_unix_ms=ended.finished_unix_ms,
        duration_ms=ended.duration_ms,
    )
    evidence = await uninterrupted(
        handle,
        lambda: steps.write_training_evidence(
            run_dir,
            run_id,
            contract=contract,
            corpus=corpus,
            lineage=lineage,
            trainer=trainer,
            candidate=directory,
        ),
    )
    artifacts = [*published.artifacts, *evidence.artifacts]
    served: Path | None = None
    gate: str | None = None
    result = None
    if evaluate is not None and status.request.environment_eval is not None:
        run.training = run.training.model_copy(update={"state": "completed", "progress": 1.0})
        run.enter("environment_evaluation", "environment_evaluating", artifacts=artifacts)
        result = await evaluate(registry, run_id, status.request, controls.collection, export)
    if result is not None:
        artifacts = [*artifacts, *result.artifacts]
        gate = _GATE_OUTCOMES.get(result.outcome)
        from kiln_verify.control.resident.store import adapters_root

        installed = adapters_root(config) / name
        served = installed if installed.is_dir() else None
    elif contract.effective_config.auto_load:
        run.enter("training")
        served = await uninterrupted(handle, lambda: steps.install_candidate(config, export, name))
    ended_training = run.training_ended(
        state="completed",
        progress=1.0,
        adapter_path=None if served is None else str(served),
        gate_outcome=gate,
    )
    complete(registry, run_id, artifacts=artifacts, **ended_training)
