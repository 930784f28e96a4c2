"""space: plane geometry with exact integer or rational answers.

Difficulty: 1 rectangle area or perimeter; 2 triangle or trapezoid area from lengths
(halves appear); 3 the distance between two lattice points whose offsets form a scaled
Pythagorean triple (so the distance is a whole number); 4 the area of a lattice triangle
given by its vertices; 5 the area of a simple lattice polygon with 5 to 7 vertices.
Polygons are simple by construction: two ends on a horizontal line, an upper chain strictly
above it and a lower chain strictly below, both x-sorted; areas come from the shoelace
formula.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from oracle.envs.math.exact import ExactAnswerEnvironment, Problem, between, canonical
from oracle.rng import SplitMix64

Point = tuple[int, int]
TRIPLES = ((3, 4, 5), (5, 12, 13), (8, 15, 17), (7, 24, 25), (20, 21, 29), (9, 40, 41))


def shoelace(points: Sequence[Point]) -> Fraction:
    twice = sum(
        x1 * y2 - x2 * y1
        for (x1, y1), (x2, y2) in zip(points, [*points[1:], points[0]], strict=True)
    )
    return Fraction(abs(twice), 2)


def render(points: Sequence[Point]) -> str:
    return ", ".join(f"({x}, {y})" for x, y in points)


def _triangle(rng: SplitMix64) -> list[Point]:
    while True:
        points = [(between(rng, -9, 9), between(rng, -9, 9)) for _ in range(3)]
        if shoelace(points) != 0:
            return points


def _polygon(rng: SplitMix64, vertices: int) -> list[Point]:
    """Two ends on one horizontal line, an upper chain above it and a lower chain below."""
    left, right, base = between(rng, -9, -3), between(rng, 3, 9), between(rng, -5, 5)

    def chain(count: int, sign: int) -> list[Point]:
        xs: set[int] = set()
        while len(xs) < count:
            xs.add(between(rng, left + 1, right - 1))
        return [(x, base + sign * between(rng, 1, 9)) for x in sorted(xs)]

    above = between(rng, 1, vertices - 3)
    upper, lower = chain(above, 1), chain(vertices - 2 - above, -1)
    return [(left, base), *upper, (right, base), *reversed(lower)]


class SpaceEnvironment(ExactAnswerEnvironment):
    server_name = "space"
    env_name = "space_env"
    class_name = "SpaceEnvironment"
    description = "Areas, perimeters and distances with exact answers."
    action_title = "SpaceAction"
    observation_title = "SpaceObservation"

    @classmethod
    def generate(cls, rng: SplitMix64, difficulty: int) -> Problem:
        if difficulty == 1:
            width, height = between(rng, 2, 30), between(rng, 2, 30)
            asked = rng.choice(("area", "perimeter"))
            value = Fraction(width * height if asked == "area" else 2 * (width + height))
            text = f"A rectangle has width {width} and height {height}. What is its {asked}?"
        elif difficulty == 2:
            height = between(rng, 1, 25)
            if rng.below(2):
                base = between(rng, 1, 25)
                value = Fraction(base * height, 2)
                text = f"A triangle has base {base} and height {height}. What is its area?"
            else:
                a, b = between(rng, 1, 25), between(rng, 1, 25)
                value = Fraction((a + b) * height, 2)
                text = (
                    f"A trapezoid has parallel sides {a} and {b} and height {height}. "
                    "What is its area?"
                )
        elif difficulty == 3:
            a, b, c = rng.choice(TRIPLES)
            scale = between(rng, 1, 4)
            if rng.below(2):
                a, b = b, a
            dx, dy = a * scale * (1 - 2 * rng.below(2)), b * scale * (1 - 2 * rng.below(2))
            x, y = between(rng, -20, 20), between(rng, -20, 20)
            value = Fraction(c * scale)
            text = f"What is the distance between the points ({x}, {y}) and ({x + dx}, {y + dy})?"
        else:
            points = _triangle(rng) if difficulty == 4 else _polygon(rng, between(rng, 5, 7))
            value = shoelace(points)
            shape = "triangle" if len(points) == 3 else "polygon"
            text = f"A {shape} has vertices, in order, {render(points)}. What is its area?"
        return Problem(text, canonical(value), "fraction")
