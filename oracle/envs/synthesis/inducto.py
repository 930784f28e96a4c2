"""inducto: inductive rule learning over integer sequences, several rounds per episode.

Each round shows the first terms of a sequence made by a hidden rule; the policy answers
the next term. The answer scores the integer 1 if exact, else 0, and the round's rule and
answer are revealed before the next round starts. Harder levels draw from a larger pool of
rule families, show one more term and play more rounds. This task has a real Task API
catalog (`oracle.envs.catalog`): reset with `{"split", "index"}` selects a row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from oracle.base import ActionField, JsonObject, Outcome, ResetRequest
from oracle.envs.catalog import CatalogEnvironment, TaskChoice, choose_task
from oracle.envs.synthesis import common
from oracle.envs.synthesis.common import between
from oracle.rng import SplitMix64, derive_seed

LIMIT = 10**15
Rule = Callable[[SplitMix64, int], list[int]]


def _nonzero(rng: SplitMix64, low: int, high: int) -> int:
    value = between(rng, low, high)
    return -value if rng.below(2) else value


def _recur(start: list[int], step: Callable[[list[int]], int], length: int) -> list[int]:
    terms = list(start)
    while len(terms) < length:
        terms.append(step(terms))
    return terms[:length]


def arithmetic(rng: SplitMix64, n: int) -> list[int]:
    first, step = between(rng, -20, 20), _nonzero(rng, 1, 9)
    return [first + step * k for k in range(n)]


def geometric(rng: SplitMix64, n: int) -> list[int]:
    first, ratio = _nonzero(rng, 1, 5), rng.choice((2, 3, -2, 4))
    return [first * ratio**k for k in range(n)]


def alternating(rng: SplitMix64, n: int) -> list[int]:
    first, up, down = between(rng, -10, 10), between(rng, 1, 9), between(rng, 1, 9)
    return _recur([first], lambda t: t[-1] + (up if len(t) % 2 else -down), n)


def quadratic(rng: SplitMix64, n: int) -> list[int]:
    a, b, c = between(rng, 1, 3), between(rng, -5, 5), between(rng, -9, 9)
    return [a * k * k + b * k + c for k in range(n)]


def fibonacci(rng: SplitMix64, n: int) -> list[int]:
    return _recur([between(rng, 1, 9), between(rng, 1, 9)], lambda t: t[-1] + t[-2], n)


def affine(rng: SplitMix64, n: int) -> list[int]:
    first, ratio, shift = between(rng, 1, 6), between(rng, 2, 3), _nonzero(rng, 1, 5)
    return _recur([first], lambda t: ratio * t[-1] + shift, n)


def interleaved(rng: SplitMix64, n: int) -> list[int]:
    a, d, b, e = between(rng, 0, 20), _nonzero(rng, 1, 6), between(rng, 0, 20), _nonzero(rng, 1, 6)
    return [a + d * (k // 2) if k % 2 == 0 else b + e * (k // 2) for k in range(n)]


def cubic(rng: SplitMix64, n: int) -> list[int]:
    a, c = between(rng, 1, 2), between(rng, -20, 20)
    return [a * k**3 + c for k in range(n)]


def tribonacci(rng: SplitMix64, n: int) -> list[int]:
    start = [between(rng, 0, 5), between(rng, 0, 5), between(rng, 1, 5)]
    return _recur(start, lambda t: t[-1] + t[-2] + t[-3], n)


RULES: Mapping[str, Rule] = {
    "arithmetic": arithmetic,
    "geometric": geometric,
    "alternating steps": alternating,
    "quadratic": quadratic,
    "sum of previous two": fibonacci,
    "multiply then add": affine,
    "two interleaved progressions": interleaved,
    "cubic": cubic,
    "sum of previous three": tribonacci,
}
#: difficulty -> (rule families drawn from, terms shown, rounds)
LEVELS: Mapping[int, tuple[tuple[str, ...], int, int]] = {
    1: (("arithmetic",), 5, 4),
    2: (("arithmetic", "geometric", "alternating steps"), 5, 5),
    3: (("geometric", "alternating steps", "quadratic", "sum of previous two"), 6, 6),
    4: (
        ("quadratic", "sum of previous two", "multiply then add", "two interleaved progressions"),
        6,
        7,
    ),
    5: (
        (
            "multiply then add",
            "two interleaved progressions",
            "cubic",
            "sum of previous three",
            "quadratic",
        ),
        7,
        8,
    ),
}
RULES_TEXT = (
    "Each round shows the first terms of an integer sequence made by a hidden rule. Answer "
    "the next term. An exact answer scores 1, anything else 0; the rule and the answer are "
    "then revealed and a new round with a new rule begins."
)


class InductoEnvironment(CatalogEnvironment):
    """Several rounds of next-term prediction; integer rewards 0/1; Task API catalog."""

    server_name = "inducto"
    env_name = "inducto_env"
    class_name = "InductoEnvironment"
    description = "Inductive rule learning: predict the next term of hidden integer sequences."
    category = "task"
    action_title = "InductoAction"
    action_fields = (ActionField("next_value", "integer", "Your answer for the next term."),)
    observation_title = "InductoObservation"
    observation_fields = (
        common.INPUT_TEXT,
        common.DIFFICULTY,
        common.field("round", "integer", "The current round, 1-based (the last one once done)."),
        common.field("rounds", "integer", "Rounds in this episode."),
        common.list_field("terms", {"type": "integer"}, "The terms shown in the current round."),
        common.field("score", "integer", "Rounds answered exactly so far."),
        common.field("last_correct", "boolean", "Was the last answer exact.", nullable=True),
        common.field("last_answer", "integer", "The last round's true term.", nullable=True),
        common.field("last_rule", "string", "The rule family of the last round.", nullable=True),
    )

    def __init__(self) -> None:
        super().__init__()
        self.choice = TaskChoice(0, 0)
        self.rounds: list[tuple[str, list[int]]] = []
        self.current = 0
        self.score = 0
        self.last: tuple[bool, int, str] | None = None

    def _observation(self) -> JsonObject:
        done = self.current >= len(self.rounds)
        index = min(self.current, len(self.rounds) - 1)
        terms = self.rounds[index][1][:-1]
        state = [f"Round {index + 1} of {len(self.rounds)}; score {self.score}."]
        if self.last is not None:
            verdict = "correct" if self.last[0] else "wrong"
            state.append(f"Last round: {verdict}; the answer was {self.last[1]} ({self.last[2]}).")
        if not done:
            state.append(f"Sequence: {', '.join(map(str, terms))}, ?")
        reply = None if done else common.reply_line("next_value", "<integer>")
        return {
            "input_text": common.compose("Sequence induction.", RULES_TEXT, state, reply),
            "difficulty": self.choice.difficulty,
            "round": index + 1,
            "rounds": len(self.rounds),
            "terms": terms,
            "score": self.score,
            "last_correct": None if self.last is None else self.last[0],
            "last_answer": None if self.last is None else self.last[1],
            "last_rule": None if self.last is None else self.last[2],
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.choice = choose_task(request)
        families, shown, count = LEVELS[self.choice.difficulty]
        rng = SplitMix64(derive_seed(self.choice.seed, "inducto", self.choice.difficulty))
        self.rounds = []
        for _ in range(count):
            name = rng.choice(families)
            self.rounds.append((name, RULES[name](rng, shown + 1)))
        self.current, self.score, self.last = 0, 0, None
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.rounds:
            raise common.not_started()
        value = common.read_int(action, "next_value", -LIMIT, LIMIT)
        name, terms = self.rounds[self.current]
        correct = value == terms[-1]
        self.score += int(correct)
        self.last = (correct, terms[-1], name)
        self.current += 1
        done = self.current >= len(self.rounds)
        return Outcome(self._observation(), int(correct), done)

    def _extra_state(self) -> JsonObject:
        return {
            "seed": self.choice.seed,
            "difficulty": self.choice.difficulty,
            "task": self.choice.reference(),
            "round": min(self.current + 1, len(self.rounds)),
            "score": self.score,
        }
