"""Evidence ``paired_return_sign_test_v1``, decision and outcome (kiln-openenv-contract §9).

Summation order (fixed, so the bytes are reproducible): a group's mean return is the
left-to-right IEEE-754 sum of its candidates' ``episode_return`` in candidate order,
divided by the number of candidates; the side means are the left-to-right sum of every
episode return in (group, candidate) order divided by the number of episodes;
``mean_return_improvement`` is ``candidate_mean - baseline_mean``. A group is improved /
regressed / tied when the candidate's group mean is ``>`` / ``<`` / ``==`` the
baseline's.

Decision, first match wins:

1. no gate → ``diagnostic``;
2. ``paired_groups < 20`` → ``inconclusive``;
3. ``regressed > improved`` and ``p < 0.05`` → ``rejected``;
4. ``gate.min_mean_return`` set and ``candidate_mean < min_mean_return`` → ``rejected``;
5. ``improvement < gate.min_mean_improvement`` → ``rejected``;
6. ``improved > regressed`` and ``p < 0.05`` → ``passed``;
7. otherwise → ``inconclusive``.

``p < 0.05`` is compared exactly (``Fraction``). Outcome without a serving layer: passed →
``kept``; diagnostic, rejected, inconclusive map to themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kiln_verify.openenv.evaluate.signtest import SignTest, sign_test
from kiln_verify.openenv.records.evaluation import (
    EXACT_SIGN_TEST_ALPHA,
    EnvironmentEvalEvidence,
    EnvironmentEvalGate,
    EvaluationDecision,
    EvaluationOutcome,
)
from kiln_verify.openenv.records.replay import ReplayManifest

__all__ = [
    "MINIMUM_PAIRED_GROUPS",
    "GroupComparison",
    "PairedGroup",
    "build_evidence",
    "compare_groups",
    "decide",
    "group_means",
    "outcome_for",
    "paired_groups",
]

MINIMUM_PAIRED_GROUPS: Final = 20

_OUTCOME: Final[dict[str, EvaluationOutcome]] = {
    "diagnostic": "diagnostic",
    "passed": "kept",
    "rejected": "rejected",
    "inconclusive": "inconclusive",
}


def _mean(values: Sequence[float]) -> float:
    total = 0.0
    for value in values:  # left to right, deliberately not math.fsum
        total += value
    return total / len(values)


def group_means(replay: ReplayManifest) -> list[float]:
    """Per group, the mean episode return over its candidates (candidate order)."""
    return [_mean([c.episode_return for c in group.candidates]) for group in replay.groups]


@dataclass(frozen=True, slots=True)
class PairedGroup:
    """One seed's pair: both sides' group mean returns and which way it went."""

    group_index: int
    seed: int
    environment_index: int
    baseline_mean: float
    candidate_mean: float

    @property
    def difference(self) -> float:
        return self.candidate_mean - self.baseline_mean

    @property
    def direction(self) -> str:
        """``improved`` / ``regressed`` / ``tied``: candidate mean ``>`` / ``<`` / ``==``."""
        if self.candidate_mean > self.baseline_mean:
            return "improved"
        if self.candidate_mean < self.baseline_mean:
            return "regressed"
        return "tied"


def paired_groups(baseline: ReplayManifest, candidate: ReplayManifest) -> list[PairedGroup]:
    """Every group's pair, in group order (the inputs are paired: same seeds, §9)."""
    return [
        PairedGroup(group.group_index, group.seed, group.environment_index, b, c)
        for group, b, c in zip(
            baseline.groups, group_means(baseline), group_means(candidate), strict=True
        )
    ]


@dataclass(frozen=True, slots=True)
class GroupComparison:
    """The paired comparison before the decision."""

    paired_groups: int
    paired_episodes: int
    baseline_mean_return: float
    candidate_mean_return: float
    improved: int
    regressed: int
    tied: int
    test: SignTest

    @property
    def mean_return_improvement(self) -> float:
        return self.candidate_mean_return - self.baseline_mean_return


def compare_groups(baseline: ReplayManifest, candidate: ReplayManifest) -> GroupComparison:
    """Improved / regressed / tied counts, side means and the sign test (paired inputs)."""
    pairs = paired_groups(baseline, candidate)
    improved = sum(1 for pair in pairs if pair.direction == "improved")
    regressed = sum(1 for pair in pairs if pair.direction == "regressed")
    base_returns = [c.episode_return for g in baseline.groups for c in g.candidates]
    cand_returns = [c.episode_return for g in candidate.groups for c in g.candidates]
    return GroupComparison(
        paired_groups=len(pairs),
        paired_episodes=len(base_returns),
        baseline_mean_return=_mean(base_returns),
        candidate_mean_return=_mean(cand_returns),
        improved=improved,
        regressed=regressed,
        tied=len(pairs) - improved - regressed,
        test=sign_test(improved, regressed),
    )


def _num(value: float) -> str:
    return repr(float(value))


def decide(
    comparison: GroupComparison, gate: EnvironmentEvalGate | None
) -> tuple[EvaluationDecision, str]:
    """The §9 decision and its reason text (the seven rules in order)."""
    c = comparison
    counts = f"improved {c.improved}, regressed {c.regressed}, tied {c.tied}"
    p = f"p = {_num(c.test.p_value)}"
    if gate is None:
        return "diagnostic", f"no gate: diagnostic only ({counts}; {p})"
    if c.paired_groups < MINIMUM_PAIRED_GROUPS:
        return (
            "inconclusive",
            f"{c.paired_groups} paired groups, fewer than the {MINIMUM_PAIRED_GROUPS} a gate needs",
        )
    if c.regressed > c.improved and c.test.significant:
        return "rejected", f"significant regression: {counts}; {p} < {EXACT_SIGN_TEST_ALPHA}"
    if gate.min_mean_return is not None and c.candidate_mean_return < gate.min_mean_return:
        return (
            "rejected",
            f"candidate mean return {_num(c.candidate_mean_return)} is below "
            f"min_mean_return {_num(gate.min_mean_return)}",
        )
    if c.mean_return_improvement < gate.min_mean_improvement:
        return (
            "rejected",
            f"mean return improvement {_num(c.mean_return_improvement)} is below "
            f"min_mean_improvement {_num(gate.min_mean_improvement)}",
        )
    if c.improved > c.regressed and c.test.significant:
        return "passed", f"significant improvement: {counts}; {p} < {EXACT_SIGN_TEST_ALPHA}"
    return "inconclusive", f"no significant difference: {counts}; {p}"


def outcome_for(decision: EvaluationDecision) -> EvaluationOutcome:
    """The outcome without a serving layer (passed → ``kept``)."""
    return _OUTCOME[decision]


def build_evidence(
    comparison: GroupComparison, gate: EnvironmentEvalGate | None
) -> EnvironmentEvalEvidence:
    """The ``EnvironmentEvalEvidence`` record of a comparison under ``gate``."""
    decision, reason = decide(comparison, gate)
    c = comparison
    return EnvironmentEvalEvidence(
        paired_groups=c.paired_groups,
        paired_episodes=c.paired_episodes,
        baseline_mean_return=c.baseline_mean_return,
        candidate_mean_return=c.candidate_mean_return,
        mean_return_improvement=c.mean_return_improvement,
        improved_groups=c.improved,
        regressed_groups=c.regressed,
        tied_groups=c.tied,
        exact_sign_test_p_value=c.test.p_value,
        decision=decision,
        reason=reason,
    )
