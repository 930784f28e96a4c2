"""The paired held-out evaluation of a run, recomputed from its two bundles (§9).

Given the two verified sides, the receipt must be exactly what the evaluation engine
computes from them: the summary digests (``run_chain_evaluation_summary_mismatch``), held-out
seeds (``run_chain_evaluation_seeds_overlap``), the pairing
(``evaluation_pairing_mismatch``); the sides must be the right policies: the baseline the
behaviour policy of the training corpus (adapter and content revision), the candidate the
trained adapter (``run_chain_evaluation_baseline_mismatch``,
``run_chain_evaluation_candidate_mismatch``); then config, seed start, policy identities
and the whole ``paired_return_sign_test_v1`` evidence (means, counts, exact p value,
decision, reason) must be what the engine recomputes, compared as compact JSON so a float
differs by its bits (``run_chain_evaluation_evidence_mismatch``); the outcome must follow
from the decision and the contract's ``auto_load`` (``run_chain_outcome_mismatch``); and
the run status's ``environment_evaluation`` must repeat the receipt
(``run_chain_status_evaluation_mismatch``). The verdict text is not recomputed: the
server appends why it promoted or kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from kiln_verify.control.training.evaluation_status import OpenEnvEnvironmentEvalStatus
from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.jsonio import dumps_compact, loads_object
from kiln_verify.errors import (
    RunChainEvaluationBaselineMismatch,
    RunChainEvaluationCandidateMismatch,
    RunChainEvaluationEvidenceMismatch,
    RunChainEvaluationSeedsOverlap,
    RunChainEvaluationSummaryMismatch,
    RunChainOutcomeMismatch,
    RunChainStatusEvaluationMismatch,
)
from kiln_verify.limits import MAX_TRAINING_EVIDENCE_BYTES
from kiln_verify.openenv.evaluate.engine import TrainingInterval, build_receipt, policy_identity
from kiln_verify.openenv.evaluate.pairing import check_pairing
from kiln_verify.openenv.records.evaluation import EnvironmentEvaluationReceipt
from kiln_verify.openenv.records.summary import RolloutSummary
from kiln_verify.openenv.runcheck.bundles import LoadedBundle
from kiln_verify.openenv.runcheck.files import RunDirectory
from kiln_verify.openenv.runcheck.records import EvaluationCheck
from kiln_verify.records import validate_record

__all__ = ["RECEIPT_KIND", "EvaluationInputs", "check_evaluation"]

RECEIPT_KIND: Final = "environment_eval_receipt"
_RECOMPUTED: Final = ("config", "seed_start", "baseline", "candidate", "evidence")


@dataclass(frozen=True, slots=True)
class EvaluationInputs:
    """What the evaluation is checked against: the training side of the run."""

    training_summary: RolloutSummary
    output_adapter: str
    auto_load: bool
    status_evaluation: OpenEnvEnvironmentEvalStatus | None = None


def _compact(value: Any) -> bytes:
    return dumps_compact(value.to_json() if hasattr(value, "to_json") else value)


def read_receipt(directory: RunDirectory) -> tuple[EnvironmentEvaluationReceipt, str]:
    path = directory.path(RECEIPT_KIND)
    data = directory.read(RECEIPT_KIND, MAX_TRAINING_EVIDENCE_BYTES, "MAX_TRAINING_EVIDENCE_BYTES")
    value = loads_object(data, max_bytes=MAX_TRAINING_EVIDENCE_BYTES, source=path)
    receipt = validate_record(EnvironmentEvaluationReceipt, value, source=path)
    return receipt, str(sha256_bytes(data))


def _digests(receipt: EnvironmentEvaluationReceipt, base: LoadedBundle, cand: LoadedBundle) -> None:
    for side, recorded, bundle in (
        ("baseline", receipt.baseline_summary_sha256, base),
        ("candidate", receipt.candidate_summary_sha256, cand),
    ):
        if recorded != bundle.check.summary_sha256:
            raise RunChainEvaluationSummaryMismatch(
                f"{side}_summary_sha256 is {recorded}, the {side} summary present is "
                f"{bundle.check.summary_sha256}",
                path=bundle.summary_path,
            )


def _recomputed(
    receipt: EnvironmentEvaluationReceipt,
    base: LoadedBundle,
    cand: LoadedBundle,
    training: TrainingInterval,
) -> None:
    derived = training if receipt.config.seed_start is None else None
    expected = build_receipt(
        base.pairing(),
        cand.pairing(),
        gate=receipt.config.gate,
        training=derived,
        run_id=receipt.run_id,
    )
    for name in _RECOMPUTED:
        if _compact(getattr(receipt, name)) != _compact(getattr(expected, name)):
            raise RunChainEvaluationEvidenceMismatch(
                f"the receipt's {name} is not the one the two bundles recompute to"
            )


def _policies(receipt: EnvironmentEvaluationReceipt, inputs: EvaluationInputs) -> None:
    behaviour = policy_identity(inputs.training_summary)
    recorded = (receipt.baseline.adapter, receipt.baseline.adapter_content_revision)
    if recorded != (behaviour.adapter, behaviour.adapter_content_revision):
        raise RunChainEvaluationBaselineMismatch(
            "the baseline's adapter and content revision are not those of the behaviour "
            "policy that collected the training corpus"
        )
    if receipt.candidate.adapter != inputs.output_adapter:
        raise RunChainEvaluationCandidateMismatch(
            f"the candidate adapter is {receipt.candidate.adapter!r}, the trained adapter "
            f"{inputs.output_adapter!r}"
        )


def _outcome(receipt: EnvironmentEvaluationReceipt, auto_load: bool) -> None:
    if receipt.evidence.decision != "passed":
        return  # the record already maps every other decision to its one outcome
    allowed = ("promoted", "error") if auto_load else ("kept",)
    if receipt.outcome not in allowed:
        raise RunChainOutcomeMismatch(
            f"a passed gate with auto_load {str(auto_load).lower()} ends {' or '.join(allowed)}, "
            f"not {receipt.outcome}"
        )


def _status(
    receipt: EnvironmentEvaluationReceipt, section: OpenEnvEnvironmentEvalStatus | None
) -> None:
    if section is None:
        return
    for name in ("outcome", "evidence", "verdict"):
        value = getattr(section, name)
        if value is not None and _compact(value) != _compact(getattr(receipt, name)):
            raise RunChainStatusEvaluationMismatch(
                f"environment_evaluation.{name} is not the receipt's"
            )


def check_evaluation(
    directory: RunDirectory,
    baseline: LoadedBundle,
    candidate: LoadedBundle,
    inputs: EvaluationInputs,
) -> EvaluationCheck:
    """Every link of the evaluation, in the module's order; the check that held."""
    receipt, receipt_sha = read_receipt(directory)
    _digests(receipt, baseline, candidate)
    summary = inputs.training_summary
    training = TrainingInterval(summary.seed_start, summary.groups)
    if training.overlaps(receipt.seed_start, receipt.config.groups):
        raise RunChainEvaluationSeedsOverlap(
            f"evaluation seeds [{receipt.seed_start}, {receipt.seed_start + receipt.config.groups})"
            f" overlap the training seeds [{training.seed_start}, {training.next_seed})"
        )
    check_pairing(baseline.pairing(), candidate.pairing())
    _policies(receipt, inputs)
    _recomputed(receipt, baseline, candidate, training)
    _outcome(receipt, inputs.auto_load)
    _status(receipt, inputs.status_evaluation)
    evidence = receipt.evidence
    return EvaluationCheck(
        receipt_sha256=receipt_sha,
        paired_groups=evidence.paired_groups,
        improved_groups=evidence.improved_groups,
        regressed_groups=evidence.regressed_groups,
        tied_groups=evidence.tied_groups,
        exact_sign_test_p_value=evidence.exact_sign_test_p_value,
        decision=evidence.decision,
        outcome=receipt.outcome,
    )
