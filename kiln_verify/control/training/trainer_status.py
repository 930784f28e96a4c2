"""Kiln's training projection of a train run: ``OpenEnvTrainingStatus`` and its lineage.

Field names, order and optional keys are Kiln's (ericflo/kiln ``contracts/kiln-control-
plane-v1.schema.json`` @7b449586: ``OpenEnvTrainingStatus``, ``TrainingDataProvenance``,
``TrainingState``); the run status keeps the record as its typed ``training`` section
(:class:`~kiln_verify.control.status.OpenEnvRunStatus`, which reads a Kiln server's too), so
it lives here, below the status, beside the training contract.

How this server fills it (docs/training-runs.md):

``job_id``         ``grpo-<run_id>``: the run's one trainer child
``state``          ``queued`` (bundle exported), ``running`` (child started), ``completed``
                   (adapter verified, imported and, without a gate, installed) or
                   ``failed`` (Kiln's ``TrainingState`` has no ``cancelled``: a cancelled
                   trainer is ``failed`` with a cancellation ``error``, as Kiln does)
``progress``       the trainer's own ``epoch`` over its configured epochs, 0..1
``current_loss``   the last finite ``loss`` the trainer logged
``epoch``          the whole epochs completed so far
``adapter_path``   the installed adapter's directory, once it is served
``training_data``  ``source: "openenv"``, the admitted corpus digest and row count, and
                   ``openenv``: the ``kiln.openenv-training-data.v1`` lineage
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Final, Literal

from pydantic import Field, StrictStr

from kiln_verify.control.request import Number
from kiln_verify.openenv.training.lineage import OpenEnvTrainingDataProvenanceV1
from kiln_verify.records import U64, Record, Sha256

__all__ = [
    "OPENENV_SOURCE",
    "GateOutcome",
    "OpenEnvTrainingStatus",
    "TrainingDataProvenance",
    "TrainingState",
    "job_id",
]

OPENENV_SOURCE: Final = "openenv"
"""``training_data.source`` of a corpus collected by an OpenEnv run."""

TrainingState = Literal["queued", "running", "completed", "failed"]
GateOutcome = Literal["promoted", "kept", "regression", "demoted", "inconclusive", "error"]

_Text = Annotated[StrictStr, Field(min_length=1)]


def job_id(run_id: str) -> str:
    """The trainer job of a run (one per run; its child process)."""
    return f"grpo-{run_id}"


class TrainingDataProvenance(Record):
    """Kiln's ``TrainingDataProvenance``: the admitted corpus a trainer consumed."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {"dataset", "split", "dataset_corpus_sha256", "split_manifest_sha256", "openenv"}
    )

    source: _Text
    dataset: _Text | None = None
    split: StrictStr | None = None
    dataset_corpus_sha256: Sha256 | None = None
    split_manifest_sha256: Sha256 | None = None
    admitted_corpus_sha256: Sha256
    rows: U64
    openenv: OpenEnvTrainingDataProvenanceV1 | None = None


class OpenEnvTrainingStatus(Record):
    """Kiln's ``OpenEnvTrainingStatus``: the run's trainer, as status shows it."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset(
        {
            "current_loss",
            "epoch",
            "adapter_path",
            "training_data",
            "linked_eval_job_ids",
            "post_eval_verdict",
            "gate_outcome",
            "error",
        }
    )

    job_id: _Text
    state: TrainingState
    progress: Number
    current_loss: Number | None = None
    epoch: U64 | None = None
    adapter_path: StrictStr | None = None
    training_data: TrainingDataProvenance | None = None
    linked_eval_job_ids: list[StrictStr] | None = None
    post_eval_verdict: StrictStr | None = None
    gate_outcome: GateOutcome | None = None
    error: StrictStr | None = None

    def advanced(
        self, *, epoch: float | None, loss: float | None, epochs: float
    ) -> OpenEnvTrainingStatus:
        """This status after the trainer logged ``epoch`` (fractional) and ``loss``."""
        update: dict[str, object] = {}
        if epoch is not None and math.isfinite(epoch) and epoch >= 0:
            update["progress"] = min(1.0, epoch / epochs) if epochs > 0 else 0.0
            update["epoch"] = int(epoch)
        if loss is not None and math.isfinite(loss):
            update["current_loss"] = loss
        return self.model_copy(update=update) if update else self
