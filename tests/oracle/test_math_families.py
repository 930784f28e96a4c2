"""The eight one-step exact-answer math families, tested against the classes directly.

Answers are checked three ways: pinned values verified by hand, an independent solver per
family that reads only the prompt text (it never calls the family's code), and the wire
contract of the interop gate (reset, wrong answer, frozen terminal step, right answer).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from oracle.base import Environment, ExecutionError
from oracle.envs.math import change
from oracle.envs.math.exact import ExactAnswerEnvironment
from oracle.inventory import MATH, environment_class

ROOT = Path(__file__).resolve().parents[2]
FAMILIES: dict[str, type[ExactAnswerEnvironment]] = {}
for _name in MATH:
    _cls = environment_class(_name)
    assert issubclass(_cls, ExactAnswerEnvironment)
    FAMILIES[_name] = _cls


def fresh(name: str, payload: Mapping[str, Any]) -> tuple[Environment, dict[str, Any]]:
    env = FAMILIES[name]()
    outcome = env.reset(payload)
    return env, outcome.observation


def revealed(name: str, seed: int, difficulty: int) -> tuple[str, str]:
    """(input_text, canonical answer) through the public reset/step path."""
    env, observation = fresh(name, {"seed": seed, "difficulty": difficulty})
    answer = env.step({"answer": "\u0000 certainly wrong"}).observation["answer"]
    return observation["input_text"], answer


def validate_observation(
    cls: type[Environment], observation: Mapping[str, Any], required: Sequence[str]
) -> None:
    """Draft 2020-12 against the declared fields, plus: `integer` means a Python int."""
    jsonschema.Draft202012Validator(observation_schema(cls, required)).validate(observation)
    for field in cls.observation_fields:
        kinds = field.schema.get("type")
        value = observation.get(field.name)
        if value is not None and "integer" in (kinds if isinstance(kinds, list) else [kinds]):
            assert type(value) is int, field.name
    json.dumps(observation, allow_nan=False)


def observation_schema(cls: type[Environment], required: Sequence[str]) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {field.name: dict(field.schema) for field in cls.observation_fields},
        "required": list(required),
        "additionalProperties": False,
    }


# -- the interop gate's exact-verifier sequence --------------------------------------------


def test_inventory_and_metadata() -> None:
    assert sorted(FAMILIES) == sorted(MATH)
    for name, cls in FAMILIES.items():
        assert cls.server_name == name
        assert cls.env_name == f"{name}_env"
        assert cls.class_name == f"{name.capitalize()}Environment" == cls.__name__
        assert cls.category == "math"
        assert [(f.name, f.type) for f in cls.action_fields] == [("answer", "string")]
        names = {field.name for field in cls.observation_fields}
        assert {"input_text", "answer"} <= names
        assert not names & {"done", "reward", "metadata"}
        assert cls.reset_options == frozenset({"split", "index"})
        assert cls.description.strip()


@pytest.mark.parametrize("name", MATH)
def test_exact_verifier_sequence(name: str) -> None:
    for i in range(3):
        payload = {"seed": 20000 + i, "difficulty": 3}
        env = FAMILIES[name]()
        first = env.reset(payload)
        assert first.reward is None
        assert first.done is False
        assert first.observation["input_text"].strip()
        assert "answer" not in first.observation
        wrong = env.step({"answer": "definitely not the answer"})
        assert type(wrong.reward) is int
        assert wrong.reward == 0
        assert wrong.done
        answer = wrong.observation["answer"]
        assert isinstance(answer, str)
        assert answer.strip() == answer
        assert answer
        assert wrong.observation["correct"] is False
        again = env.step({"answer": answer})
        assert again.reward is None
        assert again.done
        assert again.observation == wrong.observation
        assert env.state()["step_count"] == 2
        other = FAMILIES[name]()
        second = other.reset(payload)
        assert second.observation == first.observation
        assert "answer" not in second.observation
        right = other.step({"answer": answer})
        assert type(right.reward) is int
        assert right.reward == 1
        assert right.done
        assert right.observation["correct"] is True
        assert right.observation["answer"] == answer


@pytest.mark.parametrize("name", MATH)
def test_normalisation_is_strip_only(name: str) -> None:
    text, answer = revealed(name, 7, 4)
    assert text
    accepted = [answer, f"  {answer}\n", f"\t{answer} "]
    rejected = [f"+{answer}", f"{answer}.0", f"{answer}/1", f'"{answer}"', f"{answer}x", ""]
    if "/" in answer:
        p, q = answer.split("/")
        rejected += [f"{p} / {q}", f"{int(p) * 2}/{int(q) * 2}"]
    elif answer.lstrip("-").isdigit():
        rejected.append(f"{answer}/1")
    else:
        rejected += [answer.lower(), answer.upper()]
    for candidate in accepted:
        env, _ = fresh(name, {"seed": 7, "difficulty": 4})
        assert env.step({"answer": candidate}).reward == 1, candidate
    for candidate in rejected:
        env, _ = fresh(name, {"seed": 7, "difficulty": 4})
        assert env.step({"answer": candidate}).reward == 0, candidate


@pytest.mark.parametrize("name", MATH)
def test_step_before_reset_and_bad_type(name: str) -> None:
    env = FAMILIES[name]()
    with pytest.raises(ExecutionError):
        env.step({"answer": "1"})
    env.reset({"seed": 1})
    with pytest.raises(ExecutionError):
        env.step({"answer": 7})
    assert env.step_count == 0
    assert not env.done


@pytest.mark.parametrize("name", MATH)
def test_observations_match_declared_fields(name: str) -> None:
    cls = FAMILIES[name]
    # As the server advertises it: a field with a schema default is not required.
    required = [f.name for f in cls.observation_fields if "default" not in f.schema]
    assert required == ["input_text", "difficulty"]
    everything = [f.name for f in cls.observation_fields]
    for difficulty in range(1, 6):
        env, observation = fresh(name, {"seed": 31 + difficulty, "difficulty": difficulty})
        validate_observation(cls, observation, required)
        assert set(observation) == set(required)
        final = env.step({"answer": "0"}).observation
        validate_observation(cls, final, everything)


@pytest.mark.parametrize("name", MATH)
def test_transcripts_are_deterministic(name: str) -> None:
    def transcript() -> list[Any]:
        rows: list[Any] = []
        for seed, difficulty in itertools.product((5, 6, 99), range(1, 6)):
            env = FAMILIES[name]()
            out = env.reset({"seed": seed, "difficulty": difficulty, "episode_id": "t"})
            rows.append([out.observation, out.reward, out.done])
            for answer in ("1", "-3/4", "Alice"):
                out = env.step({"answer": answer})
                rows.append([out.observation, out.reward, out.done, env.state()])
        return rows

    assert json.dumps(transcript()) == json.dumps(transcript())


def test_same_problems_in_a_fresh_process() -> None:
    cases = [(name, 20000 + i, d) for name in MATH for i, d in ((0, 3), (1, 5))]
    script = (
        "import json, sys\n"
        "from oracle.inventory import environment_class\n"
        "out = []\n"
        "for name, seed, d in json.loads(sys.argv[1]):\n"
        "    env = environment_class(name)()\n"
        "    obs = env.reset({'seed': seed, 'difficulty': d}).observation\n"
        "    out.append([obs, env.step({'answer': '?'}).observation['answer']])\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(cases)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    here = []
    for name, seed, d in cases:
        env_, observation = fresh(name, {"seed": seed, "difficulty": d})
        here.append([observation, env_.step({"answer": "?"}).observation["answer"]])
    assert json.loads(result.stdout) == here


# -- exact answers -------------------------------------------------------------------------

#: Answers at seed 20000, difficulties 1..5, each checked by hand from the printed prompt.
PINNED: dict[str, tuple[str, ...]] = {
    "measure": ("18000", "39/8", "157725491/1000000000", "109741716/25", "381/40000"),
    "algebra": ("0", "-12", "19/24", "-13/3", "734/73"),
    "change": ("215", "2422", "10", "13", "5"),
    "space": ("160", "253", "75", "31/2", "66"),
    "discrete": ("792", "9", "10", "163", "335"),
    "chance": ("1/6", "13/18", "1/21", "124/125", "200000/823543"),
    "evidence": ("4/9", "225/323", "8/31", "24/193", "375/2359"),
    "reason": ("21", "45/14", "Frank", "Heidi", "2"),
}


@pytest.mark.parametrize("name", MATH)
def test_pinned_answers(name: str) -> None:
    got = tuple(revealed(name, 20000, d)[1] for d in range(1, 6))
    assert got == PINNED[name]


def test_pinned_prompts_match_the_hand_checked_ones() -> None:
    texts = {name: revealed(name, 20000, 3)[0] for name in ("algebra", "reason", "discrete")}
    assert texts["algebra"].startswith("Solve for x: 8/5*x + 3/2 = 4*x - 2/5\n")
    assert "Dave stands immediately to the left of Frank." in texts["reason"]
    assert "letters of BBABA?" in texts["discrete"]


def number(text: str) -> Fraction:
    return Fraction(text)


def grab(pattern: str, text: str) -> tuple[str, ...]:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in {text!r}"
    return match.groups()


# Published exact definitions, in SI units (not derived the way the family derives them).
SI: dict[str, Fraction] = {
    "mm": Fraction("0.001"),
    "cm": Fraction("0.01"),
    "m": Fraction(1),
    "km": Fraction(1000),
    "in": Fraction("0.0254"),
    "ft": Fraction("0.3048"),
    "yd": Fraction("0.9144"),
    "mi": Fraction("1609.344"),
    "mg": Fraction("0.000001"),
    "g": Fraction("0.001"),
    "kg": Fraction(1),
    "lb": Fraction("0.45359237"),
    "oz": Fraction("0.028349523125"),
    "mL": Fraction("0.001"),
    "L": Fraction(1),
    "gal": Fraction("3.785411784"),
    "qt": Fraction("0.946352946"),
    "pt": Fraction("0.473176473"),
    "cup": Fraction("0.2365882365"),
    "s": Fraction(1),
    "min": Fraction(60),
    "h": Fraction(3600),
    "day": Fraction(86400),
    "week": Fraction(604800),
}


def si(unit: str) -> Fraction:
    if "/" in unit:
        top, bottom = unit.split("/")
        return SI[top] / SI[bottom]
    if unit.endswith("^2"):
        return SI[unit[:-2]] ** 2
    return SI[unit]


def solve_measure(text: str, difficulty: int) -> Fraction:
    value, source, target = grab(r"^Convert (\S+) (\S+) to (\S+)\.\n", text)
    kinds = {1: r"^[a-zA-Z]+$", 2: r"^[a-z]+$", 3: r"^[a-zA-Z]+$", 4: r"\^2$", 5: "/"}
    assert re.search(kinds[difficulty], source)
    assert re.search(kinds[difficulty], target)
    return number(value) * si(source) / si(target)


def linear(expression: str) -> dict[str, Fraction]:
    """`3/2*x - y + 5` -> {"x": 3/2, "y": -1, "": 5}."""
    coefficients: dict[str, Fraction] = {}
    for term in expression.replace(" - ", " + -").split(" + "):
        if "*" in term:
            coefficient, variable = term.split("*")
            value = number(coefficient)
        elif term.lstrip("-").isalpha():
            variable, value = term.lstrip("-"), Fraction(-1 if term.startswith("-") else 1)
        else:
            variable, value = "", number(term)
        coefficients[variable] = coefficients.get(variable, Fraction(0)) + value
    return coefficients


def determinant(matrix: list[list[Fraction]]) -> Fraction:
    if len(matrix) == 1:
        return matrix[0][0]
    return sum(
        (
            (-1) ** j * matrix[0][j] * determinant([row[:j] + row[j + 1 :] for row in matrix[1:]])
            for j in range(len(matrix))
        ),
        Fraction(0),
    )


def solve_algebra(text: str, difficulty: int) -> Fraction:
    if difficulty <= 3:
        left, right = grab(r"^Solve for x: (.+) = (.+)\n", text)
        lhs, rhs = linear(left), linear(right)
        slope = lhs.get("x", Fraction(0)) - rhs.get("x", Fraction(0))
        return (rhs.get("", Fraction(0)) - lhs.get("", Fraction(0))) / slope
    equations = re.findall(r"^  (.+) = (-?\d+)$", text, re.MULTILINE)
    assert len(equations) == difficulty - 2
    names = "xyz"[: len(equations)]
    rows = [[linear(left).get(v, Fraction(0)) for v in names] for left, _ in equations]
    rhs_values = [number(right) for _, right in equations]
    (asked,) = grab(r"What is the value of ([xyz])\?", text)
    column = names.index(asked)
    replaced = [
        [rhs_values[i] if j == column else row[j] for j in range(len(names))]
        for i, row in enumerate(rows)
    ]
    return determinant(replaced) / determinant(rows)


@functools.cache
def fewest_table(denominations: tuple[int, ...], limit: int) -> list[int]:
    """Breadth-first search: the fewest pieces for every amount up to `limit`."""
    best = [-1] * (limit + 1)
    best[0] = 0
    frontier = [0]
    while frontier:
        following = []
        for amount in frontier:
            for value in denominations:
                nxt = amount + value
                if nxt <= limit and best[nxt] < 0:
                    best[nxt] = best[amount] + 1
                    following.append(nxt)
        frontier = following
    return best


def solve_change(text: str, difficulty: int) -> Fraction:
    items = re.findall(r"(\d+) x \w+ at \$(\d+)\.(\d\d) each", text)
    assert len(items) == 1 if difficulty == 1 else len(items) >= 2
    total = sum(int(q) * (100 * int(d) + int(c)) for q, d, c in items)
    coupon = re.search(r"A coupon takes \$(\d+)\.(\d\d) off", text)
    assert (coupon is not None) == (difficulty == 4)
    if coupon:
        total -= 100 * int(coupon[1]) + int(coupon[2])
    dollars, cents = grab(r"They pay with \$(\d+)\.(\d\d)\.", text)
    due = 100 * int(dollars) + int(cents) - total
    assert due > 0
    if difficulty <= 2:
        assert "How much change" in text
        return Fraction(due)
    (listed,) = grab(r"\(in cents\): ([\d, ]+)\.", text)
    denominations = tuple(int(v) for v in listed.split(", "))
    return Fraction(fewest_table(denominations, 10000)[due])


def pick_area(points: list[tuple[int, int]]) -> Fraction:
    """Pick's theorem, counting lattice points: an area check independent of shoelace."""
    edges = list(zip(points, points[1:] + points[:1], strict=True))
    boundary = sum(math.gcd(abs(x2 - x1), abs(y2 - y1)) for (x1, y1), (x2, y2) in edges)

    def on_edge(px: int, py: int) -> bool:
        for (x1, y1), (x2, y2) in edges:
            cross = (x2 - x1) * (py - y1) - (y2 - y1) * (px - x1)
            if cross == 0 and min(x1, x2) <= px <= max(x1, x2) and min(y1, y2) <= py <= max(y1, y2):
                return True
        return False

    def inside(px: int, py: int) -> bool:
        crossings = 0
        for (x1, y1), (x2, y2) in edges:
            if (y1 > py) != (y2 > py):
                x_at = Fraction((x2 - x1) * (py - y1), y2 - y1) + x1
                crossings += x_at > px
        return crossings % 2 == 1

    xs, ys = [p[0] for p in points], [p[1] for p in points]
    interior = sum(
        1
        for px in range(min(xs), max(xs) + 1)
        for py in range(min(ys), max(ys) + 1)
        if not on_edge(px, py) and inside(px, py)
    )
    return interior + Fraction(boundary, 2) - 1


def solve_space(text: str, difficulty: int) -> Fraction:
    if difficulty == 1:
        w, h, asked = grab(r"width (\d+) and height (\d+)\. What is its (area|perimeter)\?", text)
        return Fraction(int(w) * int(h) if asked == "area" else 2 * (int(w) + int(h)))
    if difficulty == 2:
        if text.startswith("A triangle"):
            b, h = grab(r"base (\d+) and height (\d+)\.", text)
            return Fraction(int(b) * int(h), 2)
        a, b, h = grab(r"parallel sides (\d+) and (\d+) and height (\d+)\.", text)
        return Fraction((int(a) + int(b)) * int(h), 2)
    points = [(int(x), int(y)) for x, y in re.findall(r"\((-?\d+), (-?\d+)\)", text)]
    if difficulty == 3:
        (x1, y1), (x2, y2) = points
        squared = (x2 - x1) ** 2 + (y2 - y1) ** 2
        assert math.isqrt(squared) ** 2 == squared
        return Fraction(math.isqrt(squared))
    assert len(points) == 3 if difficulty == 4 else 5 <= len(points) <= 7
    return pick_area(points)


def solve_discrete(text: str, difficulty: int) -> Fraction:
    if difficulty == 1:
        k, n = grab(r"can (\d+) items be chosen from (\d+) distinct", text)
        ways = math.factorial(int(n)) // math.factorial(int(k)) // math.factorial(int(n) - int(k))
        return Fraction(ways)
    if difficulty == 2:
        a, b, m = grab(r"when (\d+)\^(\d+) is divided by (\d+)\?", text)
        value = 1
        for _ in range(int(b)):
            value = value * int(a) % int(m)
        return Fraction(value)
    if difficulty == 3:
        (word,) = grab(r"letters of ([A-Z]+)\?", text)
        count, left = 1, len(word)
        for repeats in Counter(word).values():
            count *= math.comb(left, repeats)
            left -= repeats
        return Fraction(count)
    if difficulty == 4:
        limit, a, b, c = grab(r"from 1 to (\d+) inclusive .* one of (\d+), (\d+) or (\d+)\?", text)
        divisors = (int(a), int(b), int(c))
        numbers = range(1, int(limit) + 1)
        return Fraction(sum(1 for x in numbers if any(x % d == 0 for d in divisors)))
    pairs = [(int(m), int(r)) for m, r in re.findall(r"x mod (\d+) = (\d+)", text)]
    assert len(pairs) == 3
    bound = math.prod(m for m, _ in pairs)
    return Fraction(next(x for x in range(bound) if all(x % m == r for m, r in pairs)))


def solve_chance(text: str, difficulty: int) -> Fraction:
    if difficulty == 1:
        faces, event = grab(r"numbered 1 to (\d+) is rolled once\..* result is (.+)\?", text)
        outcomes = range(1, int(faces) + 1)
        tests: dict[str, Callable[[int, int], bool]] = {
            "at least": lambda x, k: x >= k,
            "at most": lambda x, k: x <= k,
            "a multiple of": lambda x, k: x % k == 0,
        }
        if event == "a prime number":
            hits = [x for x in outcomes if x > 1 and all(x % d for d in range(2, x))]
        else:
            relation, k = event.rsplit(" ", 1)
            hits = [x for x in outcomes if tests[relation](x, int(k))]
        return Fraction(len(hits), int(faces))
    if difficulty == 2:
        relation, target = grab(r"two results is (exactly|at least|at most) (\d+)\?", text)
        t = int(target)
        sums = [a + b for a in range(1, 7) for b in range(1, 7)]
        check = {"exactly": t.__eq__, "at least": t.__le__, "at most": t.__ge__}[relation]
        return Fraction(sum(1 for s in sums if check(s)), 36)
    if difficulty == 3:
        red, blue, event = grab(r"holds (\d+) red and (\d+) blue balls\..* they are (.+)\?", text)
        balls = ["r"] * int(red) + ["b"] * int(blue)
        draws = list(itertools.permutations(range(len(balls)), 2))
        wanted: dict[str, Callable[[str, str], bool]] = {
            "both red": lambda a, b: a == b == "r",
            "both the same colour": lambda a, b: a == b,
            "one of each colour": lambda a, b: a != b,
        }
        favourable = sum(1 for i, j in draws if wanted[event](balls[i], balls[j]))
        return Fraction(favourable, len(draws))
    p, n = grab(r"heads with probability (\S+)\. It is tossed (\d+) times", text)
    prob = number(p)
    if difficulty == 4:
        assert "at least one head" in text
        condition: Callable[[int], bool] = lambda heads: heads >= 1  # noqa: E731
    else:
        (k,) = grab(r"probability of exactly (\d+) heads\?", text)
        condition = lambda heads: heads == int(k)  # noqa: E731
    total = Fraction(0)
    for flips in itertools.product((True, False), repeat=int(n)):
        if condition(sum(flips)):
            total += math.prod((prob if f else 1 - prob for f in flips), start=Fraction(1))
    return total


def solve_evidence(text: str, difficulty: int) -> Fraction:
    if difficulty in (2, 4):
        prevalence, sensitivity, false_positive = (
            number(v)
            for v in grab(
                r"affects (\S+) of a population\. .* probability (\S+) for a person who has "
                r"the condition, and with probability (\S+) for a person who does not\.",
                text,
            )
        )
        results = ["positive"]
        if difficulty == 4:
            results = grab(r"The results are: (.+)\.", text)[0].split(", ")
        # Natural frequencies: a population of 10**9 people, every count an exact rational.
        ill, well = 10**9 * prevalence, 10**9 * (1 - prevalence)
        for result in results:
            ill *= sensitivity if result == "positive" else 1 - sensitivity
            well *= false_positive if result == "positive" else 1 - false_positive
        return ill / (ill + well)
    boxes = re.findall(
        r"Box ([ABC]) is chosen with probability (\S+); it holds (\d+) red and (\d+) blue", text
    )
    assert len(boxes) == (2 if difficulty == 1 else 3)
    if difficulty == 5:
        colours = grab(r"in order, are: (.+)\.", text)[0].split(", ")
        assert len(colours) in (2, 3)
    else:
        colours = [grab(r"It is (red|blue)\.", text)[0]]
    (asked,) = grab(r"probability that box ([ABC]) was chosen\?", text)
    joint = {}
    for label, prior, red, blue in boxes:
        chance = number(prior)
        for colour in colours:
            chance *= Fraction(int(red) if colour == "red" else int(blue), int(red) + int(blue))
        joint[label] = chance
    return joint[asked] / sum(joint.values())


def solve_line(text: str) -> str:
    (names,) = grab(r"^(.+) stand in a line", text)
    people = names.split(", ")
    clues = re.findall(r"^- (.+)$", text, re.MULTILINE)
    (asked,) = grab(r"Who stands in position (\d+)\?", text)

    def ok(order: tuple[str, ...], clue: str) -> bool:
        pos = {name: i + 1 for i, name in enumerate(order)}
        if m := re.fullmatch(r"(\w+) stands immediately to the left of (\w+)\.", clue):
            return pos[m[2]] - pos[m[1]] == 1
        if m := re.fullmatch(r"(\w+) stands somewhere to the left of (\w+)\.", clue):
            return pos[m[1]] < pos[m[2]]
        if m := re.fullmatch(r"(\w+) and (\w+) do not stand next to each other\.", clue):
            return abs(pos[m[1]] - pos[m[2]]) != 1
        if m := re.fullmatch(r"(\w+) stands at one end of the line\.", clue):
            return pos[m[1]] in (1, len(order))
        m = re.fullmatch(r"(\w+) does not stand in position (\d+)\.", clue)
        assert m, clue
        return pos[m[1]] != int(m[2])

    solutions = [o for o in itertools.permutations(people) if all(ok(o, c) for c in clues)]
    assert len(solutions) == 1
    return solutions[0][int(asked) - 1]


def solve_knights(text: str) -> int:
    (names,) = grab(r"^Each of (.+) is either a knight", text)
    people = names.split(", ")
    said = re.findall(r'^- (\w+) says: "(.+)"$', text, re.MULTILINE)
    assert said

    def claim(kind: dict[str, bool], sentence: str) -> bool:
        if m := re.fullmatch(r"(\w+) is a knight\.", sentence):
            return kind[m[1]]
        if m := re.fullmatch(r"(\w+) is a knave\.", sentence):
            return not kind[m[1]]
        if m := re.fullmatch(r"(\w+) and (\w+) are the same kind\.", sentence):
            return kind[m[1]] == kind[m[2]]
        if m := re.fullmatch(r"(\w+) and (\w+) are different kinds\.", sentence):
            return kind[m[1]] != kind[m[2]]
        m = re.fullmatch(r"At least one of (\w+) and (\w+) is a knave\.", sentence)
        assert m, sentence
        return not (kind[m[1]] and kind[m[2]])

    worlds = []
    for values in itertools.product((True, False), repeat=len(people)):
        kind = dict(zip(people, values, strict=True))
        if all(claim(kind, sentence) == kind[speaker] for speaker, sentence in said):
            worlds.append(values)
    assert len(worlds) == 1
    return sum(worlds[0])


def solve_reason(text: str, difficulty: int) -> Fraction | str:
    if difficulty == 1:
        older, gap, younger, total, asked = grab(
            r"^(\w+) is (\d+) years older than (\w+)\. The sum of their ages is (\d+)\. "
            r"How old is (\w+), in years\?",
            text,
        )
        young = Fraction(int(total) - int(gap), 2)
        assert young.denominator == 1
        assert asked in (older, younger)
        return young + int(gap) if asked == older else young
    if difficulty == 2:
        hours = [int(h) for h in re.findall(r"alone needs (\d+) hours", text)]
        assert 2 <= len(hours) <= 3
        return 1 / sum((Fraction(1, h) for h in hours), Fraction(0))
    if difficulty in (3, 4):
        answer = solve_line(text)
        assert len(grab(r"^(.+) stand in a line", text)[0].split(", ")) == difficulty + 1
        return answer
    return Fraction(solve_knights(text))


SOLVERS: dict[str, Callable[[str, int], Fraction | str]] = {
    "measure": solve_measure,
    "algebra": solve_algebra,
    "change": solve_change,
    "space": solve_space,
    "discrete": solve_discrete,
    "chance": solve_chance,
    "evidence": solve_evidence,
    "reason": solve_reason,
}


def expected_string(value: Fraction | str) -> str:
    """The canonical form, spelled out independently of `str(Fraction)`."""
    if isinstance(value, str):
        return value
    if value.denominator == 1:
        return f"{value.numerator:d}"
    return f"{value.numerator:d}/{value.denominator:d}"


@pytest.mark.parametrize("name", MATH)
def test_answers_match_an_independent_solver(name: str) -> None:
    for difficulty in range(1, 6):
        for seed in (0, 1, 2, 3, 4, 5, 20000, 424242):
            text, answer = revealed(name, seed, difficulty)
            expected = SOLVERS[name](text, difficulty)
            assert answer == expected_string(expected), (seed, difficulty, text)
            assert re.fullmatch(r"-?\d+(/\d+)?|[A-Z][a-z]+", answer)


def test_canonical_answer_shapes() -> None:
    for name in MATH:
        for seed in range(12):
            for difficulty in range(1, 6):
                answer = revealed(name, seed, difficulty)[1]
                if "/" in answer:
                    p, q = (int(v) for v in answer.split("/"))
                    assert q > 1
                    assert math.gcd(p, q) == 1
                elif answer[:1].isupper():
                    assert name == "reason"
                    assert difficulty in (3, 4)
                else:
                    assert str(int(answer)) == answer


@pytest.mark.parametrize("denominations", [change.US, change.EXTENDED])
def test_greedy_change_is_optimal_for_the_canonical_systems(
    denominations: tuple[int, ...],
) -> None:
    table = fewest_table(denominations, 10000)
    assert all(change.greedy_pieces(a, denominations) == table[a] for a in range(10001))


def test_difficulty_changes_the_kind_of_problem() -> None:
    for name in MATH:
        shapes = {
            d: {re.sub(r"[-\d/]+", "#", revealed(name, seed, d)[0]) for seed in range(10)}
            for d in (1, 5)
        }
        assert not shapes[1] & shapes[5], name
    assert revealed("algebra", 3, 1)[0].startswith("Solve for x")
    assert revealed("algebra", 3, 5)[0].count(" = ") == 3
    assert "Box C" in revealed("evidence", 3, 5)[0]
    assert "Box C" not in revealed("evidence", 3, 1)[0]


# -- Task API ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MATH)
def test_task_api_catalog(name: str) -> None:
    cls = FAMILIES[name]
    splits = cls.task_splits()
    assert splits is not None
    assert [dict(s) for s in splits] == [
        {"name": "train", "type": "train"},
        {"name": "validation", "type": "validation"},
        {"name": "test", "type": "test"},
    ]
    seeds: dict[str, set[int]] = {}
    for split in ("train", "validation", "test"):
        rows = cls.task_rows(split)
        assert 100 <= len(rows) <= 500
        assert json.loads(json.dumps(rows)) == list(rows) == list(cls.task_rows(split))
        assert [row["index"] for row in rows] == list(range(len(rows)))
        assert {row["difficulty"] for row in rows} == {1, 2, 3, 4, 5}
        keys = {"split", "index", "seed", "difficulty", "input_text_sha256"}
        assert all(set(row) == keys for row in rows)
        seeds[split] = {row["seed"] for row in rows}
        assert len(seeds[split]) == len(rows)
        for index in (0, 7, len(rows) - 1):
            row = rows[index]
            _, by_row = fresh(name, {"split": split, "index": index, "seed": 999, "difficulty": 1})
            _, by_seed = fresh(name, {"seed": row["seed"], "difficulty": row["difficulty"]})
            assert by_row == by_seed
            digest = hashlib.sha256(by_row["input_text"].encode("utf-8")).hexdigest()
            assert digest == row["input_text_sha256"]
    assert not seeds["train"] & seeds["validation"]
    assert not seeds["train"] & seeds["test"]
    assert not seeds["validation"] & seeds["test"]
    with pytest.raises(KeyError):
        cls.task_rows("holdout")


def test_reset_by_split_options() -> None:
    cls = FAMILIES["chance"]
    rows = cls.task_rows("test")
    env = cls()
    env.reset({"split": "test", "index": 12})
    assert env.state()["task"] == {"split": "test", "index": 12}
    assert env.state()["seed"] == rows[12]["seed"]
    env.reset({"split": "validation", "seed": 205})  # no index: seed % size
    assert env.state()["task"] == {"split": "validation", "index": 5}
    env.reset({"seed": 5, "split": None})
    assert env.state()["task"] is None
    for bad in (
        {"split": "test", "index": len(rows)},
        {"split": "test", "index": -1},
        {"split": "test", "index": True},
        {"split": "test", "index": "3"},
        {"split": "holdout", "index": 0},
        {"split": 3},
        {"index": 4},
    ):
        with pytest.raises(ExecutionError):
            cls().reset(bad)
