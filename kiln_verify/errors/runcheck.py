"""Errors of ``kiln-verify openenv verify-run``: two records of one run that disagree.

The bundle verifier, the training chain and the paired evaluation keep their own codes
(``bundle_*``, ``training_chain_*``, ``evaluation_pairing_mismatch``); these are the links
between them that only a whole run directory shows: the run status's manifest and the
files present, the run's training contract and the summary's, the summary's training
selection and the corpus, the evaluation receipt and the bundles, the training and the
gate's outcome. Each class names the two records in :attr:`RunChainBroken.records` and
its message starts ``"<left> and <right> disagree: "``, like the training chain's codes.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from kiln_verify.errors.base import KilnError


class RunChainBroken(KilnError, abstract=True):
    """Two records of one run directory disagree (``records`` names them)."""

    records: ClassVar[tuple[str, str]]
    default_hint = "the run directory was altered or is incomplete; download it again"

    def __init__(
        self,
        rule: str,
        *,
        path: str | os.PathLike[str] | None = None,
        hint: str | None = None,
    ) -> None:
        left, right = self.records
        super().__init__(f"{left} and {right} disagree: {rule}", path=path, hint=hint)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["records"] = list(self.records)
        return out


class RunChainFileMismatch(RunChainBroken):
    """A manifest artifact is missing or other bytes, or a layout file is not listed."""

    code = "run_chain_file_mismatch"
    records = ("run status", "run directory")


class RunChainIncomplete(RunChainBroken):
    """A piece the rest needs is absent: evidence without a status, half the training
    evidence, part of the evaluation, an evaluation without the training it evaluates."""

    code = "run_chain_incomplete"
    records = ("run status", "run directory")


class RunChainContractMismatch(RunChainBroken):
    """The summary's ``training_contract`` is not the run status's (or only one has one)."""

    code = "run_chain_contract_mismatch"
    records = ("run status", "rollout summary")


class RunChainSelectionMismatch(RunChainBroken):
    """The summary's ``training_selection`` is not the one recomputed from its corpus."""

    code = "run_chain_selection_mismatch"
    records = ("rollout summary", "rollout dataset")


class RunChainEvaluationSummaryMismatch(RunChainBroken):
    """The evaluation receipt's summary digests are not the two summaries present."""

    code = "run_chain_evaluation_summary_mismatch"
    records = ("environment_eval_receipt", "evaluation summaries")


class RunChainEvaluationEvidenceMismatch(RunChainBroken):
    """The receipt's config, identities, counts, means, p value, decision or verdict is not
    what the two paired bundles recompute to."""

    code = "run_chain_evaluation_evidence_mismatch"
    records = ("environment_eval_receipt", "paired bundles")


class RunChainEvaluationSeedsOverlap(RunChainBroken):
    """The evaluation's seeds overlap the training collection's: not held out (§9)."""

    code = "run_chain_evaluation_seeds_overlap"
    records = ("environment_eval_receipt", "rollout summary")


class RunChainEvaluationBaselineMismatch(RunChainBroken):
    """The baseline is not the behaviour policy that collected the training corpus."""

    code = "run_chain_evaluation_baseline_mismatch"
    records = ("environment_eval_receipt", "rollout summary")


class RunChainEvaluationCandidateMismatch(RunChainBroken):
    """The candidate is not the adapter the train receipt names."""

    code = "run_chain_evaluation_candidate_mismatch"
    records = ("environment_eval_receipt", "train_receipt")


class RunChainOutcomeMismatch(RunChainBroken):
    """The outcome does not follow from the decision and the contract's ``auto_load``
    (passed: ``promoted`` or ``error`` with auto-load, ``kept`` without)."""

    code = "run_chain_outcome_mismatch"
    records = ("environment_eval_receipt", "training contract")


class RunChainStatusEvaluationMismatch(RunChainBroken):
    """The run status's ``environment_evaluation`` outcome, evidence or verdict is not the
    receipt's."""

    code = "run_chain_status_evaluation_mismatch"
    records = ("run status", "environment_eval_receipt")
