"""discrete: combinatorics and modular arithmetic with integer answers.

Difficulty: 1 binomial coefficients; 2 modular powers `a^b mod m`; 3 distinct arrangements
of a word with repeated letters (a multinomial coefficient); 4 how many of 1..N are
divisible by at least one of three numbers (inclusion-exclusion); 5 the smallest
non-negative solution of three simultaneous congruences with pairwise coprime moduli
(the Chinese remainder theorem).
"""

from __future__ import annotations

import itertools
import math

from oracle.envs.math.exact import ExactAnswerEnvironment, Problem, between, canonical
from oracle.rng import SplitMix64


def multinomial(word: str) -> int:
    result = math.factorial(len(word))
    for letter in set(word):
        result //= math.factorial(word.count(letter))
    return result


def divisible_count(limit: int, divisors: tuple[int, ...]) -> int:
    """How many of 1..limit at least one divisor divides (inclusion-exclusion over lcms)."""
    total = 0
    for size in range(1, len(divisors) + 1):
        for subset in itertools.combinations(divisors, size):
            total += (-1) ** (size + 1) * (limit // math.lcm(*subset))
    return total


def crt(residues: list[int], moduli: list[int]) -> int:
    """The least non-negative x with x = r (mod m) for each pair; moduli pairwise coprime."""
    x, step = 0, 1
    for residue, modulus in zip(residues, moduli, strict=True):
        while x % modulus != residue:
            x += step
        step *= modulus
    return x


def _word(rng: SplitMix64) -> str:
    letters: list[str] = []
    for letter in "ABCDE"[: between(rng, 2, 4)]:
        letters.extend(letter * between(rng, 1, 3))
    rng.shuffle(letters)
    return "".join(letters)


def _moduli(rng: SplitMix64) -> list[int]:
    moduli: list[int] = []
    while len(moduli) < 3:
        candidate = between(rng, 3, 20)
        if all(math.gcd(candidate, m) == 1 for m in moduli):
            moduli.append(candidate)
    return moduli


class DiscreteEnvironment(ExactAnswerEnvironment):
    server_name = "discrete"
    env_name = "discrete_env"
    class_name = "DiscreteEnvironment"
    description = "Counting and modular arithmetic with exact integer answers."
    action_title = "DiscreteAction"
    observation_title = "DiscreteObservation"

    @classmethod
    def generate(cls, rng: SplitMix64, difficulty: int) -> Problem:
        if difficulty == 1:
            n = between(rng, 5, 16)
            k = between(rng, 2, n - 2)
            value = math.comb(n, k)
            text = (
                f"In how many ways can {k} items be chosen from {n} distinct items "
                "(order does not matter)?"
            )
        elif difficulty == 2:
            a, b, m = between(rng, 2, 60), between(rng, 10, 400), between(rng, 7, 97)
            value = pow(a, b, m)
            text = f"What is the remainder when {a}^{b} is divided by {m}?"
        elif difficulty == 3:
            word = _word(rng)
            value = multinomial(word)
            text = (
                f"How many distinct strings can be formed by rearranging all the letters of {word}?"
            )
        elif difficulty == 4:
            limit = between(rng, 100, 3000)
            divisors: set[int] = set()
            while len(divisors) < 3:
                divisors.add(between(rng, 2, 24))
            a, b, c = sorted(divisors)
            value = divisible_count(limit, (a, b, c))
            text = (
                f"How many integers from 1 to {limit} inclusive are divisible by at least one "
                f"of {a}, {b} or {c}?"
            )
        else:
            moduli = _moduli(rng)
            residues = [rng.below(m) for m in moduli]
            value = crt(residues, moduli)
            conditions = "; ".join(
                f"x mod {m} = {r}" for r, m in zip(residues, moduli, strict=True)
            )
            text = f"What is the smallest non-negative integer x such that {conditions}?"
        return Problem(text, canonical(value), "integer")
