"""logic: find a satisfying assignment of a planted propositional formula, with feedback.

The formula is a conjunction of clauses over x1..xn, generated around a hidden planted
assignment so it is always satisfiable (any satisfying assignment is accepted). Each step
submits a full assignment as a string of T/F (or 1/0) characters, one per variable; the
feedback lists the clauses it violates. Solving scores the integer 1 and ends the episode;
every other attempt scores 0, and the episode also ends when the attempts run out. This
task has a real Task API catalog (`oracle.envs.catalog`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oracle.base import ActionField, ExecutionError, JsonObject, Outcome, ResetRequest
from oracle.envs.catalog import CatalogEnvironment, TaskChoice, choose_task
from oracle.envs.synthesis import common
from oracle.rng import SplitMix64, derive_seed

#: A clause is a tuple of non-zero literals: +k is x_k, -k is "not x_k" (1-based).
Clause = tuple[int, ...]
#: difficulty -> (variables, literals per clause, clauses, attempts)
LEVELS: Mapping[int, tuple[int, int, int, int]] = {
    1: (3, 2, 4, 8),
    2: (4, 2, 6, 10),
    3: (5, 3, 12, 12),
    4: (6, 3, 20, 16),
    5: (8, 3, 32, 20),
}
TRUE, FALSE = frozenset("T1"), frozenset("F0")


def render(clause: Clause) -> str:
    return "(" + " or ".join(f"x{lit}" if lit > 0 else f"not x{-lit}" for lit in clause) + ")"


def satisfies(assignment: Sequence[bool], clause: Clause) -> bool:
    return any(assignment[abs(lit) - 1] == (lit > 0) for lit in clause)


def planted_formula(rng: SplitMix64, variables: int, width: int, count: int) -> list[Clause]:
    planted = [rng.below(2) == 1 for _ in range(variables)]
    clauses: list[Clause] = []
    while len(clauses) < count:
        chosen = list(range(1, variables + 1))
        rng.shuffle(chosen)
        clause = tuple(sorted((v if rng.below(2) else -v for v in chosen[:width]), key=abs))
        if satisfies(planted, clause) and clause not in clauses:
            clauses.append(clause)
    return clauses


def parse(raw: str, variables: int) -> list[bool]:
    text = raw.strip().upper()
    if len(text) != variables or not set(text) <= TRUE | FALSE:
        raise ExecutionError(
            f"assignment must be {variables} characters, each T or F (or 1 or 0), "
            f"for x1..x{variables} in order"
        )
    return [char in TRUE for char in text]


class LogicEnvironment(CatalogEnvironment):
    """Satisfy a planted CNF formula; integer reward 1 when solved; Task API catalog."""

    server_name = "logic"
    env_name = "logic_env"
    class_name = "LogicEnvironment"
    description = "Propositional constraint puzzle: find a satisfying assignment with feedback."
    category = "task"
    action_title = "LogicAction"
    action_fields = (
        ActionField("assignment", "string", "One T/F (or 1/0) character per variable, x1 first."),
    )
    observation_title = "LogicObservation"
    observation_fields = (
        common.INPUT_TEXT,
        common.DIFFICULTY,
        common.field("variables", "integer", "Number of variables n (x1..xn)."),
        common.list_field("clauses", {"type": "string"}, "The clauses, numbered from 1."),
        common.field("attempts_left", "integer", "Assignments that may still be submitted."),
        common.field("last_assignment", "string", "The last assignment, as T/F.", nullable=True),
        common.list_field("violated", {"type": "integer"}, "Clauses the last assignment violates."),
        common.field("solved", "boolean", "Whether a satisfying assignment was submitted."),
    )

    def __init__(self) -> None:
        super().__init__()
        self.choice = TaskChoice(0, 0)
        self.variables = 0
        self.clauses: list[Clause] = []
        self.left = 0
        self.last: str | None = None
        self.violated: list[int] = []
        self.solved = False

    def _observation(self) -> JsonObject:
        lines = [f"  {i}. {render(clause)}" for i, clause in enumerate(self.clauses, 1)]
        state = ["Clauses:", *lines, f"Attempts left: {self.left}."]
        if self.last is not None:
            verdict = (
                "satisfies every clause"
                if self.solved
                else ("violates clauses " + ", ".join(map(str, self.violated)))
            )
            state.append(f"Last assignment {self.last} {verdict}.")
        rules = (
            f"Find true/false values for x1..x{self.variables} that satisfy every clause below "
            "(a clause holds when at least one of its literals is true). Submit a full "
            "assignment as a string of T/F characters, x1 first; the feedback lists the "
            "clauses it violates. Solving scores 1; other attempts score 0."
        )
        done = self.solved or self.left == 0
        placeholder = f'"<{self.variables} characters T or F>"'
        reply = None if done else common.reply_line("assignment", placeholder)
        return {
            "input_text": common.compose("Propositional logic puzzle.", rules, state, reply),
            "difficulty": self.choice.difficulty,
            "variables": self.variables,
            "clauses": [render(clause) for clause in self.clauses],
            "attempts_left": self.left,
            "last_assignment": self.last,
            "violated": list(self.violated),
            "solved": self.solved,
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.choice = choose_task(request)
        self.variables, width, count, self.left = LEVELS[self.choice.difficulty]
        rng = SplitMix64(derive_seed(self.choice.seed, "logic", self.choice.difficulty))
        self.clauses = planted_formula(rng, self.variables, width, count)
        self.last, self.violated, self.solved = None, [], False
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.clauses:
            raise common.not_started()
        values = parse(common.read_str(action, "assignment"), self.variables)
        self.violated = [
            i for i, clause in enumerate(self.clauses, 1) if not satisfies(values, clause)
        ]
        self.solved = not self.violated
        self.last = "".join("T" if value else "F" for value in values)
        self.left -= 1
        return Outcome(self._observation(), int(self.solved), self.solved or self.left == 0)

    def _extra_state(self) -> JsonObject:
        return {
            "seed": self.choice.seed,
            "difficulty": self.choice.difficulty,
            "task": self.choice.reference(),
            "attempts_left": self.left,
            "solved": self.solved,
        }
