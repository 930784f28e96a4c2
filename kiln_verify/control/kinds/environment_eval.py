"""A train run's paired held-out evaluation and the promotion it gates (kiln-openenv-contract §9).

:func:`evaluate_candidate` is the stage, over an :class:`~.evaluation_job.EvaluationJob`
(what the run's request resolves to); :mod:`.evaluation_stage` binds it to a run of the
registry. In order:

1. the **baseline** (the behaviour policy: the run's ``adapter``) and then the
   **candidate** (the trained adapter, not yet servable) are collected with the library's
   collector and identical controls: the run's own (URLs, credentials, reset plan, steps,
   tokens, temperature, thinking, penalty, budgets, concurrency, capacity wait) with the
   evaluation's ``groups``, ``group_size`` and ``seed_start`` (default: right after the
   training seeds). Each half is published as an ordinary bundle at its
   :data:`~kiln_verify.control.layout.ARTIFACT_PATHS` place
   (``environment-evaluation/{baseline,candidate}/``) with the rollout executor's own
   publication checks;
2. both bundles are verified offline and read back, the pairing is checked (same
   environments; per group the same index, environment, seed, reset payload, reset
   observation and candidate indices): any drift raises and the run fails;
3. the evidence ``paired_return_sign_test_v1`` and its decision (the seven rules, first
   match wins: :mod:`kiln_verify.openenv.evaluate.evidence`);
4. promotion: only ``passed`` with ``auto_load`` installs the candidate into the servable
   adapter set (``promoted``; a refused installation is ``error`` and fails the run);
   ``passed`` without ``auto_load`` is ``kept`` (the adapter stays in the run's bundle);
   without a gate the decision is ``diagnostic`` and ``auto_load`` keeps its normal
   meaning; ``rejected`` and ``inconclusive`` candidates are never installed;
5. the receipt ``kiln.openenv-environment-evaluation.v1`` is published last, with the
   final outcome, and the seven ``environment_eval_*`` manifest entries are returned.

Failures raise; the caller classifies them at stage ``environment_evaluation`` (§10.2:
``environment_evaluation_failed`` unless a narrower rule applies, such as
``environment_identity_changed``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kiln_verify.control.executor import manifest_entries, publish_collection
from kiln_verify.control.kinds.evaluation_job import (
    EVALUATION_ARTIFACTS,
    SIDES,
    EvaluationJob,
    side_dir,
)
from kiln_verify.control.layout import ARTIFACT_PATHS
from kiln_verify.control.metrics import ControlMetrics
from kiln_verify.control.status import RunArtifact
from kiln_verify.control.training.evaluation_status import OpenEnvEnvironmentEvalStatus
from kiln_verify.errors import KilnError
from kiln_verify.openenv.collect import ProgressEvent, collect
from kiln_verify.openenv.evaluate import (
    build_receipt,
    load_bundle,
    receipt_bytes,
    write_receipt,
)
from kiln_verify.openenv.policy.base import Policy
from kiln_verify.openenv.records.evaluation import (
    EnvironmentEvaluationReceipt,
    EvaluationOutcome,
)
from kiln_verify.openenv.records.summary import RolloutStats

__all__ = [
    "EVALUATION_ARTIFACTS",
    "EvaluationJob",
    "EvaluationResult",
    "evaluate_candidate",
]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class EvaluationResult:
    """A finished evaluation: its final section, receipt, manifest entries, and the
    promotion's error when the outcome is ``error`` (the run must then fail)."""

    section: OpenEnvEnvironmentEvalStatus
    receipt: EnvironmentEvaluationReceipt
    artifacts: list[RunArtifact]
    error: Exception | None = None

    @property
    def outcome(self) -> EvaluationOutcome:
        return self.receipt.outcome


Update = Callable[[OpenEnvEnvironmentEvalStatus], None]


class _Hook:
    """The collector's progress hook for one half: counts into the section."""

    def __init__(self, section: OpenEnvEnvironmentEvalStatus, update: Update) -> None:
        self.section = section
        self._update = update

    def __call__(self, event: ProgressEvent) -> None:
        field = {"group": "groups_completed", "episode": "rollouts_completed"}.get(event.stage)
        if field is None:
            return
        progress = self.section.progress.model_copy(update={field: event.completed})
        self.section = self.section.model_copy(update={"progress": progress})
        self._update(self.section)


def _manifest(run_dir: Path, run_id: str) -> list[RunArtifact]:
    return manifest_entries(run_dir, run_id, EVALUATION_ARTIFACTS)


async def _collect_side(job: EvaluationJob, side: str, policy: Policy, hook: _Hook) -> RolloutStats:
    collection = await collect(job.controls, policy, progress=hook)
    directory = job.run_dir / side_dir(side)
    directory.mkdir(parents=True, exist_ok=True)
    published = await asyncio.shield(
        asyncio.to_thread(publish_collection, collection, directory, job.run_id)
    )
    return published.stats


async def evaluate_candidate(
    job: EvaluationJob,
    baseline: Policy,
    candidate: Policy,
    *,
    promote: Callable[[], object],
    update: Update = lambda section: None,
    metrics: ControlMetrics | None = None,
    cancel_requested: Callable[[], bool] = lambda: False,
) -> EvaluationResult:
    """Run the stage (see the module docstring); ``promote`` installs the candidate into the
    servable set (blocking; called at most once, only when the outcome allows it).

    ``update`` hears every change of the section (its state, then its counts). The
    policies are not closed here. A cancellation or failure leaves the section
    ``cancelled`` / ``failed`` (reported through ``update``) and propagates."""
    section = job.pending()
    update(section)
    if metrics is not None:
        metrics.environment_evaluation("started")
    try:
        stats: dict[str, RolloutStats] = {}
        for side, policy in zip(SIDES, (baseline, candidate), strict=True):
            if cancel_requested():
                raise asyncio.CancelledError
            section = section.moved(
                "collecting_baseline" if side == "baseline" else "collecting_candidate",
                progress=job.pending().progress,
            )
            update(section)
            hook = _Hook(section, update)
            stats[side] = await _collect_side(job, side, policy, hook)
            section = hook.section.model_copy(update={f"{side}_stats": stats[side]})
            update(section)
        base, _ = await asyncio.to_thread(
            load_bundle, job.run_dir / ARTIFACT_PATHS["environment_eval_baseline_summary"]
        )
        cand, _ = await asyncio.to_thread(
            load_bundle, job.run_dir / ARTIFACT_PATHS["environment_eval_candidate_summary"]
        )
        receipt = build_receipt(base, cand, gate=job.gate, training=job.training, run_id=job.run_id)
        if cancel_requested():
            raise asyncio.CancelledError
        receipt, error = await _uninterrupted(_promote(job, receipt, promote))
        data = receipt_bytes(receipt)
        target = job.run_dir / ARTIFACT_PATHS["environment_eval_receipt"]
        await asyncio.to_thread(write_receipt, target, data)
        artifacts = await asyncio.to_thread(_manifest, job.run_dir, job.run_id)
    except BaseException as exc:
        cancelled = isinstance(exc, asyncio.CancelledError)
        update(section.moved("cancelled" if cancelled else "failed"))
        if metrics is not None:
            metrics.environment_evaluation("failed")
        raise
    evidence = receipt.evidence
    if metrics is not None:
        metrics.environment_evaluation("completed")
        if evidence.decision != "diagnostic":
            metrics.environment_gate(evidence.decision)
    section = section.moved(
        "completed",
        baseline=receipt.baseline,
        candidate=receipt.candidate,
        evidence=evidence,
        outcome=receipt.outcome,
        verdict=receipt.verdict,
    )
    update(section)
    return EvaluationResult(section, receipt, artifacts, error)


async def _uninterrupted(work: Coroutine[Any, Any, _T]) -> _T:
    """Run ``work`` to its end even when the run is cancelled meanwhile (an installation
    under way is never abandoned half way: a run asked to stop while promoting ends
    promoted, as a rollout asked to stop while publishing ends published)."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        return await task


async def _promote(
    job: EvaluationJob, receipt: EnvironmentEvaluationReceipt, promote: Callable[[], object]
) -> tuple[EnvironmentEvaluationReceipt, Exception | None]:
    """Apply the outcome: install only a passed (or ungated, auto-loaded) candidate."""
    decision = receipt.evidence.decision
    if decision in ("rejected", "inconclusive"):
        return receipt, None  # never served
    if not job.auto_load:
        outcome: EvaluationOutcome = "kept" if decision == "passed" else "diagnostic"
        return _with(receipt, outcome, "the candidate stays in the run (auto_load false)"), None
    try:
        await asyncio.to_thread(promote)
    except KilnError as exc:
        if decision == "diagnostic":
            raise  # no gate: the normal auto-load failed, the run fails with it
        return _with(receipt, "error", f"promotion failed ({exc.code})"), exc
    if decision == "diagnostic":
        return _with(receipt, "diagnostic", "auto_load installed the candidate"), None
    return _with(receipt, "promoted", "the candidate was installed and is served"), None


def _with(
    receipt: EnvironmentEvaluationReceipt, outcome: EvaluationOutcome, why: str
) -> EnvironmentEvaluationReceipt:
    verdict = f"{outcome}: {receipt.evidence.reason}; {why}"
    # validated again: the decision -> outcome mapping is the record's own rule
    return EnvironmentEvaluationReceipt.model_validate(
        {**receipt.to_json(), "outcome": outcome, "verdict": verdict}
    )
