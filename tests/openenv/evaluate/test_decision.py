"""The §9 decision order (every branch), the outcome mapping and the summation order."""

from __future__ import annotations

import pytest

from kiln_verify.openenv.evaluate import (
    GroupComparison,
    build_evidence,
    decide,
    outcome_for,
    sign_test,
)
from kiln_verify.openenv.records.evaluation import EnvironmentEvalGate


def comparison(
    improved: int,
    regressed: int,
    tied: int = 0,
    *,
    baseline: float = 0.0,
    candidate: float = 0.0,
) -> GroupComparison:
    groups = improved + regressed + tied
    return GroupComparison(
        paired_groups=groups,
        paired_episodes=groups,
        baseline_mean_return=baseline,
        candidate_mean_return=candidate,
        improved=improved,
        regressed=regressed,
        tied=tied,
        test=sign_test(improved, regressed),
    )


GATE = EnvironmentEvalGate(min_mean_improvement=0.0)


def test_1_no_gate_is_diagnostic_even_when_significant() -> None:
    decision, reason = decide(comparison(20, 0, candidate=1.0), None)
    assert decision == "diagnostic"
    assert "no gate" in reason
    assert decide(comparison(0, 20, baseline=1.0), None)[0] == "diagnostic"


def test_2_fewer_than_twenty_groups_is_inconclusive() -> None:
    decision, reason = decide(comparison(19, 0, candidate=1.0), GATE)
    assert decision == "inconclusive"
    assert "fewer than the 20" in reason
    # even a significant regression cannot be decided on 19 groups
    assert decide(comparison(0, 19, baseline=1.0), GATE)[0] == "inconclusive"


def test_3_significant_regression_is_rejected_before_the_gates() -> None:
    # min_mean_return would also reject; the regression rule comes first.
    gate = EnvironmentEvalGate(min_mean_improvement=0.0, min_mean_return=5.0)
    decision, reason = decide(comparison(2, 18, baseline=1.0, candidate=0.1), gate)
    assert decision == "rejected"
    assert reason.startswith("significant regression")


def test_3_insignificant_regression_falls_through() -> None:
    # regressed > improved but p >= 0.05: the mean-improvement gate rejects instead
    decision, reason = decide(comparison(8, 12, baseline=0.6, candidate=0.4), GATE)
    assert decision == "rejected"
    assert "min_mean_improvement" in reason


def test_4_min_mean_return() -> None:
    gate = EnvironmentEvalGate(min_mean_improvement=0.0, min_mean_return=0.9)
    decision, reason = decide(comparison(20, 0, baseline=0.1, candidate=0.85), gate)
    assert decision == "rejected"
    assert "min_mean_return" in reason
    assert decide(comparison(20, 0, baseline=0.1, candidate=0.9), gate)[0] == "passed"


def test_5_min_mean_improvement() -> None:
    gate = EnvironmentEvalGate(min_mean_improvement=0.5)
    decision, reason = decide(comparison(20, 0, baseline=0.1, candidate=0.5), gate)
    assert decision == "rejected"
    assert "min_mean_improvement" in reason
    assert decide(comparison(20, 0, baseline=0.0, candidate=0.5), gate)[0] == "passed"


def test_6_significant_improvement_passes() -> None:
    decision, reason = decide(comparison(15, 5, baseline=0.3, candidate=0.6), GATE)
    assert decision == "passed"
    assert reason.startswith("significant improvement")


def test_7_otherwise_inconclusive() -> None:
    assert decide(comparison(14, 6, baseline=0.3, candidate=0.5), GATE)[0] == "inconclusive"
    assert decide(comparison(0, 0, 20), GATE)[0] == "inconclusive"
    assert decide(comparison(5, 0, 15, candidate=0.25), GATE)[0] == "inconclusive"


@pytest.mark.parametrize(
    ("decision", "outcome"),
    [
        ("diagnostic", "diagnostic"),
        ("passed", "kept"),
        ("rejected", "rejected"),
        ("inconclusive", "inconclusive"),
    ],
)
def test_outcome_without_a_serving_layer(decision: str, outcome: str) -> None:
    assert outcome_for(decision) == outcome  # type: ignore[arg-type]


def test_evidence_record() -> None:
    evidence = build_evidence(comparison(20, 0, baseline=0.1, candidate=1.0), GATE)
    data = evidence.to_json()
    assert data["policy_version"] == "paired_return_sign_test_v1"
    assert data["minimum_paired_groups"] == 20
    assert data["exact_sign_test_alpha"] == 0.05
    assert data["exact_sign_test_p_value"] == 2 / 2**20
    assert data["mean_return_improvement"] == 1.0 - 0.1
    assert data["decision"] == "passed"
