"""Paired held-out evaluation of two policies (kiln-openenv-contract §9).

==============  ============================================================================
module          job
==============  ============================================================================
``signtest``    the exact two-sided sign test (``Fraction``; float exposed)
``pairing``     §9 step 3: identical environments, options, groups, resets, candidates
``evidence``    ``paired_return_sign_test_v1``: means, counts, decision order, outcome
``engine``      collect baseline then candidate (or load two bundles), verify, receipt
==============  ============================================================================
"""

from __future__ import annotations

from kiln_verify.openenv.evaluate.engine import (
    BASELINE_DIR,
    CANDIDATE_DIR,
    RECEIPT_NAME,
    Evaluation,
    EvaluationLayout,
    TrainingInterval,
    build_receipt,
    check_layout,
    check_live_request,
    check_training_overlap,
    evaluate_bundles,
    load_bundle,
    policy_identity,
    receipt_bytes,
    run_evaluation,
    write_receipt,
)
from kiln_verify.openenv.evaluate.evidence import (
    MINIMUM_PAIRED_GROUPS,
    GroupComparison,
    build_evidence,
    compare_groups,
    decide,
    outcome_for,
)
from kiln_verify.openenv.evaluate.pairing import PAIRED_OPTIONS, PairedBundle, check_pairing
from kiln_verify.openenv.evaluate.signtest import ALPHA, SignTest, sign_test, sign_test_p

__all__ = [
    "ALPHA",
    "BASELINE_DIR",
    "CANDIDATE_DIR",
    "MINIMUM_PAIRED_GROUPS",
    "PAIRED_OPTIONS",
    "RECEIPT_NAME",
    "Evaluation",
    "EvaluationLayout",
    "GroupComparison",
    "PairedBundle",
    "SignTest",
    "TrainingInterval",
    "build_evidence",
    "build_receipt",
    "check_layout",
    "check_live_request",
    "check_pairing",
    "check_training_overlap",
    "compare_groups",
    "decide",
    "evaluate_bundles",
    "load_bundle",
    "outcome_for",
    "policy_identity",
    "receipt_bytes",
    "run_evaluation",
    "sign_test",
    "sign_test_p",
    "write_receipt",
]
