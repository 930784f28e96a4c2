"""reason: word and logic puzzles with one exact answer.

Difficulty: 1 an age puzzle (integer); 2 people working together at constant rates (hours,
a fraction); 3 and 4 a line of 4 or 5 people described by clues, asking who stands in a
position (a name); 5 knights (always truthful) and knaves (always lying), asking how many
of four people are knights. Clue puzzles are built from a hidden solution: every true clue
is a candidate, candidates are added in a seeded order while they remove solutions, until
exactly one arrangement remains, then clues that became redundant are dropped again.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import TypeVar

from oracle.envs.math.exact import ExactAnswerEnvironment, Problem, between, canonical
from oracle.rng import SplitMix64

NAMES = ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi")
W = TypeVar("W")
C = TypeVar("C")
#: (kind, first person, second person, position 0-based) about a line of people.
LineClue = tuple[str, str, str, int]
#: (speaker, claim kind, first target, second target) as indices into the people.
KnightClue = tuple[int, str, int, int]


def minimal_clues(
    rng: SplitMix64, worlds: Sequence[W], clues: list[C], holds: Callable[[C, W], bool]
) -> list[C]:
    """A seeded, irredundant subset of true `clues` that leaves exactly one world."""
    rng.shuffle(clues)
    chosen: list[C] = []
    alive = list(worlds)
    for clue in clues:
        remaining = [world for world in alive if holds(clue, world)]
        if len(remaining) < len(alive):
            chosen.append(clue)
            alive = remaining
        if len(alive) == 1:
            break
    for clue in list(chosen):
        others = [c for c in chosen if c is not clue]
        if sum(1 for w in worlds if all(holds(c, w) for c in others)) == 1:
            chosen = others
    return chosen


def line_holds(clue: LineClue, world: tuple[str, ...]) -> bool:
    kind, x, y, spot = clue
    gap = world.index(y) - world.index(x) if y else 0
    return {
        "next": gap == 1,
        "before": gap > 0,
        "apart": abs(gap) > 1,
        "end": world.index(x) in (0, len(world) - 1),
        "not at": world.index(x) != spot,
    }[kind]


def line_text(clue: LineClue) -> str:
    kind, x, y, spot = clue
    return {
        "next": f"{x} stands immediately to the left of {y}.",
        "before": f"{x} stands somewhere to the left of {y}.",
        "apart": f"{x} and {y} do not stand next to each other.",
        "end": f"{x} stands at one end of the line.",
        "not at": f"{x} does not stand in position {spot + 1}.",
    }[kind]


def _line(rng: SplitMix64, size: int) -> Problem:
    people = list(NAMES)
    rng.shuffle(people)
    hidden = tuple(people[:size])
    candidates: list[LineClue] = [
        (kind, x, y, 0)
        for x, y in itertools.permutations(hidden, 2)
        for kind in ("next", "before", "apart")
        if kind != "apart" or x < y
    ]
    candidates += [("end", x, "", 0) for x in hidden]
    candidates += [("not at", x, "", spot) for x in hidden for spot in range(size)]
    true_clues = [clue for clue in candidates if line_holds(clue, hidden)]
    worlds = list(itertools.permutations(sorted(hidden)))
    asked = rng.below(size)
    lines = [
        f"{', '.join(sorted(hidden))} stand in a line, in positions 1 to {size} from left to "
        "right. The following clues are all true:",
        *(f"- {line_text(c)}" for c in minimal_clues(rng, worlds, true_clues, line_holds)),
        f"Who stands in position {asked + 1}?",
    ]
    return Problem("\n".join(lines), hidden[asked], "name")


def knight_claim(clue: KnightClue, world: tuple[bool, ...]) -> bool:
    _, kind, t, u = clue
    return {
        "knight": world[t],
        "knave": not world[t],
        "same": world[t] == world[u],
        "different": world[t] != world[u],
        "a knave among": not (world[t] and world[u]),
    }[kind]


def knight_holds(clue: KnightClue, world: tuple[bool, ...]) -> bool:
    """A knight's claim is true and a knave's is false."""
    return knight_claim(clue, world) == world[clue[0]]


def knight_text(clue: KnightClue, people: Sequence[str]) -> str:
    speaker, kind, t, u = clue
    a, b = people[t], people[u]
    claim = {
        "knight": f"{a} is a knight.",
        "knave": f"{a} is a knave.",
        "same": f"{a} and {b} are the same kind.",
        "different": f"{a} and {b} are different kinds.",
        "a knave among": f"At least one of {a} and {b} is a knave.",
    }[kind]
    return f'{people[speaker]} says: "{claim}"'


def _knights(rng: SplitMix64) -> Problem:
    people = sorted(NAMES[:4])
    hidden = tuple(rng.below(2) == 1 for _ in people)
    count = len(people)
    candidates = [
        (s, kind, t, t)
        for s, t in itertools.permutations(range(count), 2)
        for kind in ("knight", "knave")
    ]
    candidates += [
        (s, kind, t, u)
        for s in range(count)
        for t, u in itertools.combinations(range(count), 2)
        if s not in (t, u)
        for kind in ("same", "different", "a knave among")
    ]
    true_clues = [clue for clue in candidates if knight_holds(clue, hidden)]
    worlds = list(itertools.product((False, True), repeat=count))
    said = minimal_clues(rng, worlds, true_clues, knight_holds)
    lines = [
        f"Each of {', '.join(people)} is either a knight, who always tells the truth, or a "
        "knave, who always lies. They say:",
        *sorted(f"- {knight_text(clue, people)}" for clue in said),
        f"How many of the {count} are knights?",
    ]
    return Problem("\n".join(lines), canonical(sum(hidden)), "integer")


class ReasonEnvironment(ExactAnswerEnvironment):
    server_name = "reason"
    env_name = "reason_env"
    class_name = "ReasonEnvironment"
    description = "Word problems and logic puzzles with one exact answer."
    action_title = "ReasonAction"
    observation_title = "ReasonObservation"

    @classmethod
    def generate(cls, rng: SplitMix64, difficulty: int) -> Problem:
        names = list(NAMES)
        rng.shuffle(names)
        if difficulty == 1:
            young, gap = between(rng, 3, 40), between(rng, 1, 30)
            asked = rng.below(2)
            text = (
                f"{names[0]} is {gap} years older than {names[1]}. The sum of their ages is "
                f"{2 * young + gap}. How old is {names[asked]}, in years?"
            )
            return Problem(text, canonical(young + gap if asked == 0 else young), "integer")
        if difficulty == 2:
            hours = [between(rng, 2, 12) for _ in range(between(rng, 2, 3))]
            crew = names[: len(hours)]
            alone = "; ".join(
                f"{name} alone needs {h} hours" for name, h in zip(crew, hours, strict=True)
            )
            text = (
                f"Painting a fence: {alone}. Each works at a constant rate. How many hours do "
                f"{' and '.join(crew)} need to paint the fence working together?"
            )
            rate = sum((Fraction(1, h) for h in hours), Fraction(0))
            return Problem(text, canonical(1 / rate), "fraction")
        if difficulty in (3, 4):
            return _line(rng, difficulty + 1)
        return _knights(rng)
