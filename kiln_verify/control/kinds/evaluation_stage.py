"""The paired evaluation as a train run's stage: the registry, the resident model, promotion.

The train kind calls :func:`run_environment_evaluation` once its trainer's completed bundle
exists and before the adapter is servable; it returns ``None`` when the request asks for no
``environment_eval`` (the train kind then applies ``auto_load`` itself), else the
:class:`~kiln_verify.control.kinds.environment_eval.EvaluationResult` whose manifest
entries join the run's. The run is ``environment_evaluating`` meanwhile and its status
carries the ``environment_evaluation`` section (state changes persisted at once, counts at
most every :data:`~kiln_verify.control.executor.PROGRESS_PERSIST_INTERVAL_MS`). Any error
propagates (the caller records it at stage ``environment_evaluation``); an ``error``
outcome (the installation refused a passed candidate) is raised after the receipt is
published, so the run fails with the receipt in its manifest.

The policies (:func:`resident_policies`): the baseline is the resident model playing the
run's behaviour adapter (exactly what collected the training corpus); the candidate is the
trained adapter, first imported through the verified PEFT import into a private scratch
registry inside the run directory (never the servable set), then loaded on its own
``transformers`` policy over the same model directory, device and served id. The scratch
copy is removed when the evaluation ends; promotion installs from the completed bundle with
:func:`~kiln_verify.control.resident.store.install_adapter`.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kiln_verify.control.executor import PROGRESS_PERSIST_INTERVAL_MS
from kiln_verify.control.kinds.environment_eval import (
    EvaluationJob,
    EvaluationResult,
    evaluate_candidate,
)
from kiln_verify.control.registry import RunRegistry
from kiln_verify.control.request import OpenEnvRunRequest
from kiln_verify.control.training.evaluation_status import OpenEnvEnvironmentEvalStatus
from kiln_verify.errors import ApiAdapterUnknown
from kiln_verify.openenv.collect import CollectionControls
from kiln_verify.openenv.policy.base import Policy

__all__ = ["resident_policies", "run_environment_evaluation"]

_SCRATCH_PREFIX = ".environment-eval-candidate-"


@contextlib.asynccontextmanager
async def resident_policies(
    config: Any, behaviour_adapter: str, candidate_bundle: Path, output_adapter: str, run_dir: Path
) -> AsyncIterator[tuple[Policy, Policy]]:
    """``(baseline, candidate)`` for a server with a resident model (see the module doc)."""
    from kiln_verify.control.resident.serving import served_policy
    from kiln_verify.control.resident.store import adapters_root
    from kiln_verify.hf.importer import import_peft
    from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy

    settings = config.model
    baseline = await served_policy(config, behaviour_adapter)
    if baseline is None:
        raise ApiAdapterUnknown(
            f"the resident model no longer plays the behaviour adapter {behaviour_adapter!r}"
        )
    with tempfile.TemporaryDirectory(prefix=_SCRATCH_PREFIX, dir=run_dir) as scratch:
        registry = Path(scratch) / adapters_root(config).name

        def load() -> Policy:
            outcome = import_peft(
                bundle=candidate_bundle,
                name=output_adapter,
                model=settings.path,
                registry=registry,
                served_model_id=settings.served_model_id,
            )
            return TransformersPolicy(
                settings.path,
                name=settings.served_model_id,
                device=settings.device,
                adapter_dir=outcome.directory,
            )

        candidate = await asyncio.to_thread(load)
        try:
            yield baseline, candidate
        finally:
            await candidate.aclose()
            await baseline.aclose()


class _Persist:
    """The section into ``run.json``: state changes at once, counts rate-limited."""

    def __init__(self, registry: RunRegistry, run_id: str) -> None:
        self.registry = registry
        self.run_id = run_id
        self._state = ""
        self._last = 0

    def __call__(self, section: OpenEnvEnvironmentEvalStatus) -> None:
        registry = self.registry
        if registry.shutting_down:
            return  # a shutdown records nothing: the restart fails the run (run_interrupted)
        now = registry.clock()
        persist = section.state != self._state or now - self._last >= PROGRESS_PERSIST_INTERVAL_MS
        if persist:
            self._state, self._last = section.state, now
        registry.update(self.run_id, persist=persist, environment_evaluation=section)


async def run_environment_evaluation(
    registry: RunRegistry,
    run_id: str,
    request: OpenEnvRunRequest,
    run_controls: CollectionControls,
    candidate_bundle: Path,
) -> EvaluationResult | None:
    """Evaluate the completed bundle's adapter against the behaviour policy and promote it
    only as §9 allows (see the module docstring)."""
    run_dir = registry.store.run_dir(run_id)
    job = EvaluationJob.from_request(run_id, run_dir, request, run_controls)
    if job is None:
        return None
    registry.update(run_id, state="environment_evaluating")
    config = registry.config
    handle = registry.active(run_id)

    def promote() -> None:
        from kiln_verify.control.resident.store import install_adapter

        install_adapter(config, bundle=candidate_bundle, name=job.output_adapter)

    async with resident_policies(
        config, job.behaviour_adapter, candidate_bundle, job.output_adapter, run_dir
    ) as (baseline, candidate):
        result = await evaluate_candidate(
            job,
            baseline,
            candidate,
            promote=promote,
            update=_Persist(registry, run_id),
            metrics=registry.metrics,
            cancel_requested=lambda: handle is not None and handle.cancel_requested,
        )
    if result.error is not None:
        registry.update(
            run_id, artifacts=[*(registry.get(run_id).artifacts or ()), *result.artifacts]
        )
        raise result.error
    return result
