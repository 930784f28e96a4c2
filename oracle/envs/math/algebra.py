"""algebra: linear equations and systems with exact rational solutions.

Terms are written `3*x`, `-x`, `3/2*x` (meaning (3/2)·x) and `5/6`. Difficulty: 1 one-sided
`a*x + b = c` with an integer solution; 2 variables on both sides with integer coefficients
(rational solution); 3 fractional coefficients; 4 a 2x2 system; 5 a 3x3 system (the
question names one unknown). Systems are generated with a non-zero determinant and solved
by Gaussian elimination over `Fraction`.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from oracle.envs.math.exact import ExactAnswerEnvironment, Problem, between, canonical, signed
from oracle.rng import SplitMix64

Term = tuple[Fraction, str]


def render(terms: Sequence[Term]) -> str:
    """A linear expression: zero terms dropped, unit coefficients bare, signs spaced."""
    text = ""
    for coefficient, variable in terms:
        if coefficient == 0:
            continue
        magnitude = abs(coefficient)
        body = canonical(magnitude)
        if variable:
            body = variable if magnitude == 1 else f"{body}*{variable}"
        if not text:
            text = f"-{body}" if coefficient < 0 else body
        else:
            text += f" - {body}" if coefficient < 0 else f" + {body}"
    return text or "0"


def solve(matrix: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    """Gauss-Jordan elimination; None for a singular system."""
    size = len(matrix)
    rows = [[*row, value] for row, value in zip(matrix, rhs, strict=True)]
    for col in range(size):
        pivot = next((r for r in range(col, size) if rows[r][col] != 0), None)
        if pivot is None:
            return None
        rows[col], rows[pivot] = rows[pivot], rows[col]
        lead = rows[col][col]
        rows[col] = [value / lead for value in rows[col]]
        for r in range(size):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col], strict=True)]
    return [row[size] for row in rows]


def _coefficient(rng: SplitMix64, fractional: bool) -> Fraction:
    if fractional:
        return Fraction(signed(rng, 1, 9), between(rng, 2, 6))
    return Fraction(signed(rng, 1, 9))


def _one_unknown(rng: SplitMix64, difficulty: int) -> Problem:
    """`a*x + b = c*x + d`; at difficulty 1 `c = 0` and the solution is an integer."""
    if difficulty == 1:
        a, b = Fraction(signed(rng, 2, 9)), Fraction(between(rng, -20, 20))
        c, d = Fraction(0), a * between(rng, -12, 12) + b
    else:
        fractional = difficulty == 3
        a, c = _coefficient(rng, fractional), _coefficient(rng, fractional)
        while c == a:
            c = _coefficient(rng, fractional)
        b, d = _coefficient(rng, fractional) * 3, _coefficient(rng, fractional) * 2
    left, right = render([(a, "x"), (b, "")]), render([(c, "x"), (d, "")])
    solution = (d - b) / (a - c)
    return Problem(f"Solve for x: {left} = {right}", canonical(solution), "fraction")


def _system(rng: SplitMix64, size: int) -> Problem:
    names = "xyz"[:size]
    while True:
        matrix = [[Fraction(between(rng, -6, 6)) for _ in range(size)] for _ in range(size)]
        rhs = [Fraction(between(rng, -20, 20)) for _ in range(size)]
        solution = solve(matrix, rhs)
        if solution is not None:
            break
    asked = rng.below(size)
    lines = [
        f"  {render(list(zip(row, names, strict=True)))} = {canonical(value)}"
        for row, value in zip(matrix, rhs, strict=True)
    ]
    statement = "\n".join(
        ["Solve the system of linear equations:", *lines, f"What is the value of {names[asked]}?"]
    )
    return Problem(statement, canonical(solution[asked]), "fraction")


class AlgebraEnvironment(ExactAnswerEnvironment):
    server_name = "algebra"
    env_name = "algebra_env"
    class_name = "AlgebraEnvironment"
    description = "Solve linear equations and small linear systems exactly."
    action_title = "AlgebraAction"
    observation_title = "AlgebraObservation"

    @classmethod
    def generate(cls, rng: SplitMix64, difficulty: int) -> Problem:
        if difficulty <= 3:
            return _one_unknown(rng, difficulty)
        return _system(rng, difficulty - 2)
