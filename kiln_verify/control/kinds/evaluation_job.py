"""What one paired evaluation needs from its train run, and where its files go (§9).

:class:`EvaluationJob` resolves a train request's ``environment_eval`` against the run's
collection controls: the evaluation's ``groups``, ``group_size`` and ``seed_start``
(default: right after the training seeds) replace the run's, everything else is the run's
own, and the output names are the bundle's defaults (each half is published beneath its
:data:`~kiln_verify.control.layout.ARTIFACT_PATHS` folder). :data:`EVALUATION_ARTIFACTS` is
the seven ``environment_eval_*`` kinds for a train kind's artifact table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kiln_verify.control.kind import ArtifactFile
from kiln_verify.control.layout import ARTIFACT_PATHS
from kiln_verify.control.request import BASE_ADAPTER, OpenEnvRunRequest
from kiln_verify.control.training.evaluation_status import (
    OpenEnvEnvironmentEvalProgress,
    OpenEnvEnvironmentEvalStatus,
)
from kiln_verify.control.training.records import OpenEnvEnvironmentEvalConfig
from kiln_verify.control.training.rules import (
    DEFAULT_EVAL_GROUP_SIZE,
    DEFAULT_EVAL_GROUPS,
    check_environment_eval,
)
from kiln_verify.limits import MAX_TRAINING_EVIDENCE_BYTES
from kiln_verify.openenv.collect import (
    DEFAULT_DATASET,
    DEFAULT_REPLAY,
    DEFAULT_SUMMARY,
    CollectionControls,
)
from kiln_verify.openenv.evaluate import TrainingInterval
from kiln_verify.openenv.records.evaluation import EnvironmentEvalGate, PolicyIdentity

__all__ = ["EVALUATION_ARTIFACTS", "SIDES", "EvaluationJob", "side_dir"]

SIDES: Final = ("baseline", "candidate")


def _artifact_files() -> dict[str, ArtifactFile]:
    from kiln_verify.control.executor import ARTIFACTS

    table = {
        f"environment_eval_{side}_{kind}": ArtifactFile(
            ARTIFACT_PATHS[f"environment_eval_{side}_{kind}"], entry.max_bytes, entry.content_type
        )
        for side in SIDES
        for kind, entry in ARTIFACTS.items()
    }
    table["environment_eval_receipt"] = ArtifactFile(
        ARTIFACT_PATHS["environment_eval_receipt"], MAX_TRAINING_EVIDENCE_BYTES, "application/json"
    )
    return table


EVALUATION_ARTIFACTS: Final[dict[str, ArtifactFile]] = _artifact_files()
"""The seven ``environment_eval_*`` kinds for a train kind's artifact table (manifest order);
the receipt is held to the training-evidence bound (4 MiB)."""


def side_dir(side: str) -> Path:
    """``environment-evaluation/<side>``, from the layout table, whose file names are the
    bundle's default names that :func:`publish_collection` writes (tests/control/
    environment_eval checks both tables agree)."""
    return Path(ARTIFACT_PATHS[f"environment_eval_{side}_summary"]).parent


@dataclass(frozen=True, slots=True)
class EvaluationJob:
    """What one evaluation needs from its run: resolved seeds, gate, promotion policy."""

    run_id: str
    run_dir: Path
    controls: CollectionControls
    """The evaluation's controls: the run's, with the evaluation's seeds and default names."""
    gate: EnvironmentEvalGate | None
    training: TrainingInterval
    auto_load: bool
    behaviour_adapter: str
    output_adapter: str

    @classmethod
    def from_request(
        cls,
        run_id: str,
        run_dir: Path,
        request: OpenEnvRunRequest,
        run_controls: CollectionControls,
    ) -> EvaluationJob | None:
        """The job of a train request, or ``None`` when it asks for no ``environment_eval``.
        The request rules (held-out seeds, 20 groups for a gate) are checked again here."""
        config = check_environment_eval(
            request.environment_eval, seed_start=request.seed_start, groups=request.groups
        )
        if config is None or request.output_adapter is None:
            return None
        return cls.create(run_id, run_dir, request, run_controls, config)

    @classmethod
    def create(
        cls,
        run_id: str,
        run_dir: Path,
        request: OpenEnvRunRequest,
        run_controls: CollectionControls,
        config: OpenEnvEnvironmentEvalConfig,
    ) -> EvaluationJob:
        training = TrainingInterval(request.seed_start, request.groups)
        options = dataclasses.replace(
            run_controls.options,
            groups=DEFAULT_EVAL_GROUPS if config.groups is None else config.groups,
            group_size=DEFAULT_EVAL_GROUP_SIZE if config.group_size is None else config.group_size,
            seed_start=training.next_seed if config.seed_start is None else config.seed_start,
        )
        controls = dataclasses.replace(
            run_controls,
            options=options,
            output=DEFAULT_DATASET,
            replay_output=DEFAULT_REPLAY,
            summary_output=DEFAULT_SUMMARY,
            force=False,
            grpo_output=None,
        )
        gate = None
        if config.gate is not None:
            gate = EnvironmentEvalGate(
                min_mean_improvement=config.gate.min_mean_improvement or 0.0,
                min_mean_return=config.gate.min_mean_return,
            )
        return cls(
            run_id=run_id,
            run_dir=run_dir,
            controls=controls,
            gate=gate,
            training=training,
            auto_load=request.auto_load,
            behaviour_adapter=request.adapter,
            output_adapter=request.output_adapter or "",
        )

    def pending(self) -> OpenEnvEnvironmentEvalStatus:
        """The section before anything is collected."""
        options = self.controls.options
        base = None if self.behaviour_adapter == BASE_ADAPTER else self.behaviour_adapter
        return OpenEnvEnvironmentEvalStatus(
            state="pending",
            seed_start=options.seed_start,
            groups=options.groups,
            group_size=options.group_size,
            baseline=PolicyIdentity(adapter=base),
            candidate=PolicyIdentity(adapter=self.output_adapter),
            progress=OpenEnvEnvironmentEvalProgress(
                state="pending",
                groups_completed=0,
                groups_total=options.groups,
                rollouts_completed=0,
                rollouts_total=options.groups * options.group_size,
            ),
        )
