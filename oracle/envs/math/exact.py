"""The one-step exact-answer machinery shared by the eight math families.

A family only supplies `generate(rng, difficulty) -> Problem`: a statement and its
canonical answer. This module owns everything else, identically for every family:

* the problem is a pure function of (family, seed, difficulty) through `derive_seed`;
* `input_text` is the statement, a blank line and the answer-format instruction;
* the only action field is the string `answer`; the one step compares it, after removing
  surrounding whitespace (Python's `str.strip()`) and nothing else, with the canonical
  answer for exact string equality: reward `1` (int) on a match, else `0`, and `done`;
* canonical numbers: an integer in plain decimal (`-7`, never `-7/1`, `+7` or `7.0`), a
  non-integer rational as `p/q` in lowest terms with a positive denominator (`-3/4`);
* the observation carries `answer` only after the step (the key is absent before it).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Literal

from oracle.base import (
    ActionField,
    ExecutionError,
    JsonObject,
    ObservationField,
    Outcome,
    ResetRequest,
)
from oracle.envs.catalog import CatalogEnvironment, TaskChoice, choose_task
from oracle.rng import SplitMix64, derive_seed

AnswerKind = Literal["integer", "fraction", "name"]

INSTRUCTIONS: Mapping[AnswerKind, str] = {
    "integer": (
        "Answer with the exact integer only, as a string, e.g. 42 or -7 "
        "(no units, no plus sign, no decimal point, no separators)."
    ),
    "fraction": (
        "Answer with the exact value as a string: a fraction p/q in lowest terms with a "
        "positive denominator, or an integer when the value is whole, e.g. 3/4, -5/2 or 7 "
        "(no decimals, no units, no spaces)."
    ),
    "name": "Answer with the name only, spelled exactly as above, e.g. Alice.",
}


@dataclasses.dataclass(frozen=True)
class Problem:
    """A statement, its canonical answer, and which answer-format instruction applies."""

    statement: str
    answer: str
    kind: AnswerKind

    @property
    def input_text(self) -> str:
        return f"{self.statement}\n\n{INSTRUCTIONS[self.kind]}"


def canonical(value: Fraction | int) -> str:
    """`7`, `-7`, `3/4`, `-3/4`: `str` of a `Fraction` is exactly the canonical form."""
    return str(Fraction(value))


def normalise(raw: str) -> str:
    """The only normalisation of a submitted answer: strip surrounding whitespace."""
    return raw.strip()


def between(rng: SplitMix64, low: int, high: int) -> int:
    """A uniform integer in `[low, high]`."""
    return low + rng.below(high - low + 1)


def signed(rng: SplitMix64, low: int, high: int) -> int:
    """A uniform integer in `[low, high]` with a random sign (`low >= 1`: never zero)."""
    value = between(rng, low, high)
    return -value if rng.below(2) else value


class ExactAnswerEnvironment(CatalogEnvironment):
    """Base of the math families: one step, answer checked by exact string equality."""

    category = "math"
    action_fields = (
        ActionField("answer", "string", "The exact answer, in the form the prompt states."),
    )
    observation_fields = (
        ObservationField(
            "input_text",
            {"type": "string", "minLength": 1},
            "The problem statement followed by the exact answer format.",
        ),
        ObservationField(
            "difficulty", {"type": "integer", "minimum": 1, "maximum": 5}, "Difficulty 1..5."
        ),
        # Absent until the answer step: the schema default keeps them out of `required`.
        ObservationField(
            "answer",
            {"type": "string", "default": ""},
            "The canonical answer (never empty); the key is absent until the answer step.",
        ),
        ObservationField(
            "correct",
            {"type": "boolean", "default": False},
            "Whether the submitted answer matched; the key is absent until the answer step.",
        ),
    )

    def __init__(self) -> None:
        super().__init__()
        self.choice = TaskChoice(0, 0)
        self.problem: Problem | None = None

    @classmethod
    @abc.abstractmethod
    def generate(cls, rng: SplitMix64, difficulty: int) -> Problem:
        """The problem of one (seed stream, difficulty)."""

    @classmethod
    def problem_for(cls, seed: int, difficulty: int) -> Problem:
        rng = SplitMix64(derive_seed(seed, cls.server_name, "problem", difficulty))
        return cls.generate(rng, difficulty)

    @classmethod
    def task_prompt(cls, seed: int, difficulty: int) -> str:
        return cls.problem_for(seed, difficulty).input_text

    def _observation(self, problem: Problem, correct: bool | None) -> JsonObject:
        observation: JsonObject = {
            "input_text": problem.input_text,
            "difficulty": self.choice.difficulty,
        }
        if correct is not None:
            observation["answer"] = problem.answer
            observation["correct"] = correct
        return observation

    def _reset(self, request: ResetRequest) -> Outcome:
        self.choice = choose_task(request)
        self.problem = self.problem_for(self.choice.seed, self.choice.difficulty)
        return Outcome(self._observation(self.problem, None), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if self.problem is None:
            raise ExecutionError("no episode in progress: send reset before step")
        raw = action.get("answer")
        if not isinstance(raw, str):
            raise ExecutionError("answer must be a string")
        correct = normalise(raw) == self.problem.answer
        return Outcome(self._observation(self.problem, correct), 1 if correct else 0, True)

    def _extra_state(self) -> JsonObject:
        return {
            "seed": self.choice.seed,
            "difficulty": self.choice.difficulty,
            "task": self.choice.reference(),
        }
