"""``kind=train``: collect with the resident model, train an adapter, keep the evidence.

The kind's declarations (:class:`~kiln_verify.control.kind.RunKind`): admission is
:mod:`.train_admission` (its controls carry the contract the registry seals into the
run's first ``run.json``), execution :mod:`.train_stages`, the first progress a
rollout's (groups and episodes of the collection), and the artifact table the rollout
bundle's three files plus ``train_receipt`` and ``adapter_manifest`` (regular files of at
most 4 MiB each, at the paths of :data:`~kiln_verify.control.layout.ARTIFACT_PATHS`).
docs/training-runs.md describes the whole run.
"""

from __future__ import annotations

import functools
from typing import Final

from kiln_verify.control.executor import ARTIFACTS as BUNDLE_ARTIFACTS
from kiln_verify.control.executor import rollout_progress
from kiln_verify.control.kind import ArtifactFile, RunKind
from kiln_verify.control.kinds.environment_eval import EVALUATION_ARTIFACTS
from kiln_verify.control.kinds.evaluation_stage import run_environment_evaluation
from kiln_verify.control.kinds.train_admission import TrainControls, admit_train
from kiln_verify.control.kinds.train_stages import CandidateEvaluator, execute_train
from kiln_verify.control.layout import ARTIFACT_PATHS
from kiln_verify.control.training.records import OpenEnvTrainingContract
from kiln_verify.limits import MAX_TRAINING_EVIDENCE_BYTES

__all__ = ["TRAIN", "TRAIN_ARTIFACTS", "make_train_kind"]

_JSON: Final = "application/json"
TRAIN_ARTIFACTS: Final[dict[str, ArtifactFile]] = {
    **BUNDLE_ARTIFACTS,
    **{
        kind: ArtifactFile(ARTIFACT_PATHS[kind], MAX_TRAINING_EVIDENCE_BYTES, _JSON)
        for kind in ("train_receipt", "adapter_manifest")
    },
    **EVALUATION_ARTIFACTS,
}
"""The train kind's artifact table: the bundle, the trainer's evidence, then the paired
evaluation's two bundles and receipt (``environment-evaluation/``)."""


def _contract(controls: TrainControls) -> OpenEnvTrainingContract:
    return controls.contract


def make_train_kind(evaluate: CandidateEvaluator | None = None) -> RunKind:
    """The ``train`` kind; ``evaluate`` is the paired held-out evaluation stage (§9) that
    decides whether a trained adapter is promoted. Without one, ``environment_eval`` is
    refused at admission and every trained adapter is installed."""
    return RunKind(
        name="train",
        admit=functools.partial(admit_train, evaluates=evaluate is not None),
        execute=functools.partial(execute_train, evaluate=evaluate),
        progress=rollout_progress,
        artifacts=TRAIN_ARTIFACTS,
        contract=_contract,
    )


TRAIN = make_train_kind(run_environment_evaluation)
"""The train kind as this server registers it (:data:`kiln_verify.control.kinds.KINDS`),
with the paired held-out evaluation of :mod:`.evaluation_stage`."""
