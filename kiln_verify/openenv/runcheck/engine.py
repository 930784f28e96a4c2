"""``verify_run``: every link of one run directory, offline, first break wins.

==  ===========================================  =========================================
#   link                                         code on a break
==  ===========================================  =========================================
1   the run's bundle verifies                    the offline verifier's (``bundle_*``, ...)
2   both evaluation bundles verify (if any)      the offline verifier's
3   the pieces are all there (``run.json`` for   ``run_chain_incomplete``
    evidence, both training files, all seven
    evaluation files, training before eval)
4   ``run.json``'s manifest is the files         ``run_chain_file_mismatch``
5   the summary's training contract is the       ``run_chain_contract_mismatch``
    run status's
6   the summary's training selection (when it    ``run_chain_selection_mismatch``
    records one, or the run trained) is the
    one recomputed from its corpus
7   the training chain (receipt, manifest,       ``training_chain_*`` (docs/training-chain.md)
    corpus, lineage, status, contract, adapter)
8   the evaluation: digests, held-out seeds,     ``run_chain_evaluation_*``,
    pairing, evidence recomputed, policies,      ``evaluation_pairing_mismatch``,
    outcome vs gate, status vs receipt           ``run_chain_outcome_mismatch``, ...
==  ===========================================  =========================================

A directory with only the three bundle files (and perhaps a rollout ``run.json``) is a
rollout run: steps 1, 4 and 5 apply (and 6 when its summary records a selection). The
adapter's files are not an artifact of the run
(a server keeps them in its run directory's quarantine, ``trainer/candidate/<name>``,
and installs a promoted one in its adapter store), so a run with training evidence needs
``adapter_dir`` unless ``DIR`` is the server's own run directory with that quarantine.
"""

from __future__ import annotations

import os
from typing import Final

from kiln_verify.control.layout import ARTIFACT_PATHS
from kiln_verify.control.status import OpenEnvRunStatus
from kiln_verify.control.training.evaluation_status import OpenEnvEnvironmentEvalStatus
from kiln_verify.control.training.trainer_status import OpenEnvTrainingStatus
from kiln_verify.core.digest import canonical_digest
from kiln_verify.core.paths import validate_relative_path
from kiln_verify.errors import (
    KilnError,
    RunChainContractMismatch,
    RunChainIncomplete,
    RunChainSelectionMismatch,
    UsageError,
)
from kiln_verify.openenv.records.rollout import AgenticGroup, iter_rollout_lines
from kiln_verify.openenv.records.summary import RolloutSummary, TrainingContract
from kiln_verify.openenv.runcheck.bundles import LoadedBundle, load_side
from kiln_verify.openenv.runcheck.evaluation import EvaluationInputs, check_evaluation
from kiln_verify.openenv.runcheck.files import RunDirectory, read_status
from kiln_verify.openenv.runcheck.records import (
    RUN_VERIFICATION_SCHEMA,
    EvaluationCheck,
    RunFile,
    RunVerificationReport,
    TrainingCheck,
)
from kiln_verify.openenv.training.chain import ChainReport, check_training_chain
from kiln_verify.openenv.training.evidence import contract_sha256
from kiln_verify.openenv.training.lineage import OpenEnvTrainingDataProvenanceV1, check_lineage
from kiln_verify.openenv.training.selection import Selection, select_for_training

__all__ = ["EVALUATION_KINDS", "QUARANTINE", "TRAINING_KINDS", "verify_run"]

TRAINING_KINDS: Final = ("train_receipt", "adapter_manifest")
QUARANTINE: Final = ("trainer", "candidate")
"""Where a server's train run keeps its trained adapter inside the run directory."""
EVALUATION_KINDS: Final = tuple(kind for kind in ARTIFACT_PATHS if kind.startswith("environment_"))


def _contracts(status: OpenEnvRunStatus, summary: RolloutSummary) -> None:
    run = status.training_contract
    own = summary.training_contract
    if run is None or own is None:
        if run is not None or own is not None:
            which = "the run status" if run is not None else "the summary"
            raise RunChainContractMismatch(f"only {which} carries a training_contract")
        return
    if canonical_digest(run.to_json()) != canonical_digest(own.to_json()):
        raise RunChainContractMismatch("the two training contracts differ")


def _groups(directory: RunDirectory) -> list[AgenticGroup]:
    with open(directory.path("dataset"), "rb") as stream:  # verified in step 1
        return [line.group for line in iter_rollout_lines(stream)]


def _selection(directory: RunDirectory, summary: RolloutSummary) -> Selection:
    selection = select_for_training(_groups(directory))
    recorded = summary.training_selection
    if recorded is None:
        raise RunChainSelectionMismatch("the summary of a training run records no selection")
    if recorded.to_json() != selection.record.to_json():
        raise RunChainSelectionMismatch(
            "training_selection is not the selection of the corpus "
            f"(recorded {recorded.groups_submitted} groups, recomputed "
            f"{selection.record.groups_submitted})"
        )
    return selection


def _status_lineage(status: OpenEnvRunStatus | None) -> OpenEnvTrainingDataProvenanceV1 | None:
    """The lineage ``run.json`` carries (read with the status; its totals checked here)."""
    training = status.training if status is not None else None
    data = training.training_data if training is not None else None
    lineage = data.openenv if data is not None else None
    if lineage is not None:
        check_lineage(lineage, source="run.json training.training_data.openenv")
    return lineage


def _pieces(directory: RunDirectory, status: OpenEnvRunStatus | None) -> tuple[bool, bool]:
    training = [kind for kind in TRAINING_KINDS if kind in directory.present]
    evaluation = [kind for kind in EVALUATION_KINDS if kind in directory.present]
    if (training or evaluation) and status is None:
        raise RunChainIncomplete("the directory holds a run's evidence but no run.json")
    if training and len(training) != len(TRAINING_KINDS):
        missing = next(kind for kind in TRAINING_KINDS if kind not in training)
        raise RunChainIncomplete(f"{ARTIFACT_PATHS[missing]} is missing beside {training[0]}")
    if evaluation and len(evaluation) != len(EVALUATION_KINDS):
        missing = next(kind for kind in EVALUATION_KINDS if kind not in evaluation)
        raise RunChainIncomplete(f"the evaluation lacks {ARTIFACT_PATHS[missing]}")
    if evaluation and not training:
        raise RunChainIncomplete("an evaluation without the training evidence it evaluates")
    _claimed(status, bool(training), bool(evaluation))
    return bool(training), bool(evaluation)


def _finished(section: OpenEnvTrainingStatus | OpenEnvEnvironmentEvalStatus | None) -> bool:
    return section is not None and section.state == "completed"


def _claimed(status: OpenEnvRunStatus | None, training: bool, evaluation: bool) -> None:
    """A completed run whose status says its trainer (or its evaluation) completed must
    hold that evidence: a directory (or a manifest) that leaves it out is not the run."""
    if status is None or status.state != "completed":
        return  # a failed or cancelled run binds no evidence, whatever its trainer did
    if _finished(status.training) and not training:
        raise RunChainIncomplete(
            "run.json says the run's training completed, but the run holds no "
            f"{ARTIFACT_PATHS['train_receipt']}"
        )
    if _finished(status.environment_evaluation) and not evaluation:
        raise RunChainIncomplete(
            "run.json says the run's evaluation completed, but the run holds no "
            f"{ARTIFACT_PATHS['environment_eval_receipt']}"
        )


def _quarantined_adapter(directory: RunDirectory, summary: RolloutSummary) -> str | None:
    """In a server's own run directory, the trained adapter the run keeps: the train kind's
    quarantine ``trainer/candidate/<output_name>``; ``None`` elsewhere (a downloaded run)."""
    contract = summary.training_contract
    name = contract.effective_config.get("output_name") if contract is not None else None
    if not isinstance(name, str):
        return None
    try:
        if len(validate_relative_path(name)) != 1:
            return None
    except KilnError:
        return None
    path = os.path.join(directory.root, *QUARANTINE, name)
    return path if os.path.isdir(path) and not os.path.islink(path) else None


def _train(
    directory: RunDirectory,
    run: LoadedBundle,
    status: OpenEnvRunStatus | None,
    adapter_dir: str | os.PathLike[str],
    selection: Selection,
) -> tuple[ChainReport, TrainingContract]:
    contract = run.summary.training_contract
    if contract is None:
        raise RunChainContractMismatch("a run with training evidence whose summary has no contract")
    chain = check_training_chain(
        receipt_path=directory.path("train_receipt"),
        manifest_path=directory.path("adapter_manifest"),
        corpus=selection.corpus_bytes(),
        contract=contract,
        adapter_dir=adapter_dir,
        status_lineage=_status_lineage(status),
    )
    return chain, contract


def _training_check(chain: ChainReport, contract: TrainingContract) -> TrainingCheck:
    receipt = chain.receipt
    return TrainingCheck(
        output_adapter=receipt.output_adapter,
        training_contract_sha256=contract_sha256(contract),
        corpus_sha256=receipt.corpus_sha256,
        corpus_bytes=receipt.corpus_bytes,
        group_plan_sha256=receipt.training_data.group_plan_sha256,
        train_receipt_sha256=chain.receipt_sha256,
        adapter_manifest_sha256=chain.manifest_sha256,
        adapter_files=chain.adapter_files,
        adapter_bytes=chain.adapter_bytes,
    )


def verify_run(
    directory: str | os.PathLike[str], *, adapter_dir: str | os.PathLike[str] | None = None
) -> RunVerificationReport:
    """Check every link of the run in ``directory`` (module table); the report or the
    first break as a typed :class:`~kiln_verify.errors.KilnError`."""
    run_dir = RunDirectory.scan(os.path.abspath(directory))
    status_file = read_status(run_dir.root)
    status = status_file.status if status_file is not None else None
    links = ["run bundle"]
    run = load_side(run_dir, "run")
    known: dict[str, RunFile] = dict(run.files)
    has_training, has_evaluation = _pieces(run_dir, status)
    if has_training and adapter_dir is None:
        adapter_dir = _quarantined_adapter(run_dir, run.summary)
    if has_training and adapter_dir is None:
        raise UsageError(
            "the run has a train_receipt; checking it needs the adapter's files",
            hint="pass --adapter DIR (a server keeps a promoted adapter in "
            "<state-dir>/adapters/<name>, every trained one in <run>/trainer/candidate/<name>)",
        )
    if adapter_dir is not None and not has_training:
        raise UsageError("--adapter was given but the run holds no training evidence")
    sides: list[LoadedBundle] = []
    if has_evaluation:
        sides = [load_side(run_dir, "baseline"), load_side(run_dir, "candidate")]
        for side in sides:
            known.update(side.files)
        links.append("evaluation bundles")
    files = list(run.files.values())
    if status is not None:
        files = run_dir.check_manifest(status, known)
        links.append("run status manifest")
        _contracts(status, run.summary)
        links.append("training contract")
    training: TrainingCheck | None = None
    evaluation: EvaluationCheck | None = None
    selection: Selection | None = None
    if has_training or run.summary.training_selection is not None:
        selection = _selection(run_dir, run.summary)  # a failed train run's too
        links.append("training selection")
    if has_training and adapter_dir is not None and selection is not None:
        chain, contract = _train(run_dir, run, status, adapter_dir, selection)
        training = _training_check(chain, contract)
        links.append("training chain")
        if has_evaluation:
            inputs = EvaluationInputs(
                training_summary=run.summary,
                output_adapter=chain.receipt.output_adapter,
                auto_load=contract.effective_config.get("auto_load", True) is not False,
                status_evaluation=status.environment_evaluation if status is not None else None,
            )
            evaluation = check_evaluation(run_dir, sides[0], sides[1], inputs)
            links.append("paired evaluation")
    return RunVerificationReport(
        schema=RUN_VERIFICATION_SCHEMA,
        run_dir=run_dir.root,
        run_id=status.run_id if status is not None else None,
        run_kind=status.kind if status is not None else None,
        state=status.state if status is not None else None,
        files=files,
        bundles=[run.check, *(side.check for side in sides)],
        training=training,
        evaluation=evaluation,
        links=links,
    )
