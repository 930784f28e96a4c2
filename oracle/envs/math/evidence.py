"""evidence: Bayesian updating with exact fractions.

Every problem is a prior over hypotheses, a likelihood for each observation under each
hypothesis, and a question about one posterior probability. Difficulty: 1 two boxes of
coloured balls and one draw; 2 a diagnostic test (prevalence, sensitivity, false-positive
rate) and one positive result; 3 three boxes and one draw; 4 a diagnostic test taken twice
with conditionally independent results; 5 three boxes and two or three draws with
replacement.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from oracle.envs.math.exact import ExactAnswerEnvironment, Problem, between, canonical
from oracle.rng import SplitMix64

COLOURS = ("red", "blue")


def posterior(priors: Sequence[Fraction], likelihoods: Sequence[Fraction], asked: int) -> Fraction:
    weights = [prior * likelihood for prior, likelihood in zip(priors, likelihoods, strict=True)]
    return weights[asked] / sum(weights)


def _fraction(rng: SplitMix64, low: int, high: int) -> Fraction:
    """A probability strictly between 0 and 1 with a denominator in [low, high]."""
    q = between(rng, low, high)
    return Fraction(between(rng, 1, q - 1), q)


def _boxes(rng: SplitMix64, count: int, draws: int) -> Problem:
    if count == 2:
        first = _fraction(rng, 2, 6)
        priors = [first, 1 - first]
    else:
        weights = [between(rng, 1, 4) for _ in range(count)]
        priors = [Fraction(w, sum(weights)) for w in weights]
    contents = [(between(rng, 1, 6), between(rng, 1, 6)) for _ in range(count)]
    seen = [rng.choice(COLOURS) for _ in range(draws)]
    likelihoods = []
    lines = []
    for label, prior, (red, blue) in zip("ABC", priors, contents, strict=False):
        lines.append(
            f"Box {label} is chosen with probability {canonical(prior)}; "
            f"it holds {red} red and {blue} blue balls."
        )
        chance = Fraction(1)
        for colour in seen:
            chance *= Fraction(red if colour == "red" else blue, red + blue)
        likelihoods.append(chance)
    if draws == 1:
        lines.append(f"One ball is drawn at random from the chosen box. It is {seen[0]}.")
    else:
        lines.append(
            f"{draws} balls are drawn at random from the chosen box, one at a time with "
            f"replacement. Their colours, in order, are: {', '.join(seen)}."
        )
    asked = rng.below(count)
    lines.append(f"What is the probability that box {'ABC'[asked]} was chosen?")
    return Problem("\n".join(lines), canonical(posterior(priors, likelihoods, asked)), "fraction")


def _diagnostic(rng: SplitMix64, tests: int) -> Problem:
    prevalence = Fraction(between(rng, 1, 9), rng.choice((10, 20, 50, 100)))
    sensitivity = Fraction(between(rng, 11, 19), 20)
    false_positive = Fraction(between(rng, 1, 9), rng.choice((20, 50, 100)))
    results = ["positive"] if tests == 1 else [rng.choice(("positive", "negative")) for _ in "ab"]
    ill, well = Fraction(1), Fraction(1)
    for result in results:
        ill *= sensitivity if result == "positive" else 1 - sensitivity
        well *= false_positive if result == "positive" else 1 - false_positive
    if tests == 1:
        tested = "once. The result is positive."
    else:
        tested = (
            "twice; the results are independent given whether the person has the "
            f"condition. The results are: {', '.join(results)}."
        )
    lines = [
        f"A condition affects {canonical(prevalence)} of a population. A test for it is "
        f"positive with probability {canonical(sensitivity)} for a person who has the "
        f"condition, and with probability {canonical(false_positive)} for a person who does not.",
        f"A person is chosen at random from the population and tested {tested}",
        "What is the probability that the person has the condition?",
    ]
    value = posterior([prevalence, 1 - prevalence], [ill, well], 0)
    return Problem("\n".join(lines), canonical(value), "fraction")


class EvidenceEnvironment(ExactAnswerEnvironment):
    server_name = "evidence"
    env_name = "evidence_env"
    class_name = "EvidenceEnvironment"
    description = "Bayesian updating: exact posterior probabilities."
    action_title = "EvidenceAction"
    observation_title = "EvidenceObservation"

    @classmethod
    def generate(cls, rng: SplitMix64, difficulty: int) -> Problem:
        if difficulty == 1:
            return _boxes(rng, 2, 1)
        if difficulty == 2:
            return _diagnostic(rng, 1)
        if difficulty == 3:
            return _boxes(rng, 3, 1)
        if difficulty == 4:
            return _diagnostic(rng, 2)
        return _boxes(rng, 3, between(rng, 2, 3))
