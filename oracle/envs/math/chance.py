"""chance: exact probabilities, answered as reduced fractions.

Difficulty: 1 one roll of a fair die with 6 to 20 faces; 2 the sum of two fair six-sided
dice; 3 two balls drawn without replacement from an urn; 4 at least one success in n
independent trials with a rational success probability; 5 exactly k successes in n such
trials (a binomial probability).
"""

from __future__ import annotations

import math
from fractions import Fraction

from oracle.envs.math.exact import ExactAnswerEnvironment, Problem, between, canonical
from oracle.rng import SplitMix64

PRIMES = frozenset({2, 3, 5, 7, 11, 13, 17, 19})


def _die(rng: SplitMix64) -> tuple[str, Fraction]:
    faces = rng.choice((6, 8, 10, 12, 20))
    event = rng.below(4)
    if event == 0:
        k = between(rng, 2, faces)
        outcome, value = f"at least {k}", Fraction(faces - k + 1, faces)
    elif event == 1:
        m = between(rng, 2, 5)
        outcome, value = f"a multiple of {m}", Fraction(faces // m, faces)
    elif event == 2:
        k = between(rng, 1, faces - 1)
        outcome, value = f"at most {k}", Fraction(k, faces)
    else:
        outcome, value = "a prime number", Fraction(sum(1 for p in PRIMES if p <= faces), faces)
    text = (
        f"A fair die with faces numbered 1 to {faces} is rolled once. What is the probability "
        f"that the result is {outcome}?"
    )
    return text, value


def _dice_sum(rng: SplitMix64) -> tuple[str, Fraction]:
    target = between(rng, 2, 12)
    relation = rng.choice(("exactly", "at least", "at most"))
    sums = [a + b for a in range(1, 7) for b in range(1, 7)]
    hits = {
        "exactly": sum(1 for s in sums if s == target),
        "at least": sum(1 for s in sums if s >= target),
        "at most": sum(1 for s in sums if s <= target),
    }[relation]
    return f"{relation} {target}", Fraction(hits, 36)


def _urn(rng: SplitMix64) -> tuple[str, Fraction]:
    red, blue = between(rng, 2, 9), between(rng, 2, 9)
    pairs = math.comb(red + blue, 2)
    event = rng.choice(("both red", "both the same colour", "one of each colour"))
    favourable = {
        "both red": math.comb(red, 2),
        "both the same colour": math.comb(red, 2) + math.comb(blue, 2),
        "one of each colour": red * blue,
    }[event]
    text = (
        f"An urn holds {red} red and {blue} blue balls. Two balls are drawn at random "
        f"without replacement. What is the probability that they are {event}?"
    )
    return text, Fraction(favourable, pairs)


def _trials(rng: SplitMix64, exact: bool) -> tuple[str, Fraction]:
    q = between(rng, 2, 7)
    p = Fraction(between(rng, 1, q - 1), q)
    n = between(rng, 4, 8) if exact else between(rng, 2, 5)
    if exact:
        k = between(rng, 0, n)
        event, value = f"exactly {k} heads", math.comb(n, k) * p**k * (1 - p) ** (n - k)
    else:
        event, value = "at least one head", 1 - (1 - p) ** n
    text = (
        f"A biased coin lands heads with probability {canonical(p)}. It is tossed {n} times, "
        f"independently. What is the probability of {event}?"
    )
    return text, value


class ChanceEnvironment(ExactAnswerEnvironment):
    server_name = "chance"
    env_name = "chance_env"
    class_name = "ChanceEnvironment"
    description = "Exact probabilities of dice, urns and repeated trials."
    action_title = "ChanceAction"
    observation_title = "ChanceObservation"

    @classmethod
    def generate(cls, rng: SplitMix64, difficulty: int) -> Problem:
        if difficulty == 1:
            text, value = _die(rng)
        elif difficulty == 2:
            event, value = _dice_sum(rng)
            text = (
                "Two fair six-sided dice are rolled. What is the probability that the sum of "
                f"the two results is {event}?"
            )
        elif difficulty == 3:
            text, value = _urn(rng)
        else:
            text, value = _trials(rng, exact=difficulty == 5)
        return Problem(text, canonical(value), "fraction")
