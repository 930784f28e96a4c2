"""filtro: infer a hidden predicate on integers from labelled examples, then classify.

The episode starts with labelled examples (about half of each label) of a hidden rule such
as "divisible by 7" or "even and greater than 40". Each step shows one new item; the
policy labels it 1 (the rule holds) or 0. A correct label earns the float 1.0, a wrong one
0.0; either way the true label is revealed and the item joins the examples. The rule is
named once the last item is labelled. Harder levels draw from larger item ranges and
compose two rules with and / or / exclusive-or, and ask more questions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from oracle.base import ActionField, Environment, JsonObject, Outcome, ResetRequest
from oracle.envs.synthesis import common
from oracle.envs.synthesis.common import between
from oracle.rng import SplitMix64, derive_seed

Predicate = tuple[str, Callable[[int], bool]]
#: difficulty -> (items are 0..limit-1, examples shown at reset, questions)
LEVELS: Mapping[int, tuple[int, int, int]] = {
    1: (100, 8, 8),
    2: (100, 10, 10),
    3: (100, 12, 12),
    4: (1000, 12, 14),
    5: (1000, 14, 16),
}


def _simple(rng: SplitMix64, limit: int, level: int) -> Predicate:
    """One atomic rule; level 1 parity/thresholds, 2 adds divisibility/ranges, 3+ digits."""
    kind = rng.below(2 if level == 1 else 4 if level == 2 else 7)
    if kind == 0:
        parity = rng.below(2)
        return ("odd" if parity else "even"), lambda x: x % 2 == parity
    if kind == 1:
        t = between(rng, limit // 5, 4 * limit // 5)
        if rng.below(2):
            return f"greater than {t}", lambda x: x > t
        return f"less than {t}", lambda x: x < t
    if kind == 2:
        k = between(rng, 3, 9)
        return f"divisible by {k}", lambda x: x % k == 0
    if kind == 3:
        low = between(rng, 0, limit // 2)
        high = low + between(rng, limit // 10, limit // 3)
        return f"between {low} and {high} inclusive", lambda x: low <= x <= high
    if kind == 4:
        d = between(rng, 0, 9)
        return f"last digit is {d}, {(d + 5) % 10} or {(d + 3) % 10}", (
            lambda x: x % 10 in (d, (d + 5) % 10, (d + 3) % 10)
        )
    if kind == 5:
        odd = rng.below(2)
        return f"digit sum is {'odd' if odd else 'even'}", (
            lambda x: sum(map(int, str(x))) % 2 == odd
        )
    return "last digit greater than the tens digit", lambda x: x % 10 > (x // 10) % 10


def predicate(rng: SplitMix64, limit: int, difficulty: int) -> Predicate:
    if difficulty <= 3:
        return _simple(rng, limit, difficulty)
    (name_a, a), (name_b, b) = _simple(rng, limit, 3), _simple(rng, limit, 3)
    join = rng.choice(("and", "or") if difficulty == 4 else ("and", "or", "xor"))
    if join == "and":
        return f"({name_a}) and ({name_b})", lambda x: a(x) and b(x)
    if join == "or":
        return f"({name_a}) or ({name_b})", lambda x: a(x) or b(x)
    return f"exactly one of ({name_a}), ({name_b})", lambda x: a(x) != b(x)


class FiltroEnvironment(Environment):
    """Label items by a hidden rule learnt from examples; float rewards 1.0/0.0."""

    server_name = "filtro"
    env_name = "filtro_env"
    class_name = "FiltroEnvironment"
    description = "Infer a hidden integer predicate from labelled examples and classify items."
    category = "task"
    action_title = "FiltroAction"
    action_fields = (
        ActionField("label", "integer", "1 if the current item satisfies the hidden rule, else 0."),
    )
    observation_title = "FiltroObservation"
    observation_fields = (
        common.INPUT_TEXT,
        common.DIFFICULTY,
        common.list_field(
            "examples",
            {
                "type": "object",
                "properties": {"item": {"type": "integer"}, "label": {"type": "integer"}},
                "required": ["item", "label"],
                "additionalProperties": False,
            },
            "Every labelled item so far: the initial examples, then each answered question.",
        ),
        common.field("item", "integer", "The item to label now (null once done).", nullable=True),
        common.field("questions_left", "integer", "Items still to label, the current one too."),
        common.field("last_correct", "boolean", "Whether the last label was right.", nullable=True),
        common.field("correct", "integer", "Items labelled correctly so far."),
        common.field("rule", "string", "The hidden rule, revealed once done.", nullable=True),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed, self.difficulty = 0, 0
        self.rule: Predicate | None = None
        self.examples: list[tuple[int, int]] = []
        self.queue: list[int] = []
        self.last_correct: bool | None = None
        self.correct = 0

    def _observation(self) -> JsonObject:
        assert self.rule is not None
        done = not self.queue
        shown = ", ".join(f"{item}:{label}" for item, label in self.examples)
        state = [f"Labelled examples (item:label): {shown}"]
        if self.last_correct is not None:
            state.append(f"Your last label was {'right' if self.last_correct else 'wrong'}.")
        state.append(f"Correct so far: {self.correct}; items left: {len(self.queue)}.")
        if done:
            state.append(f"The rule was: {self.rule[0]}.")
        else:
            state.append(f"Item to label: {self.queue[0]}.")
        rules = (
            "A hidden rule labels each integer 1 (it holds) or 0. Learn it from the examples and "
            "label each new item; a right label scores 1.0, a wrong one 0.0, and the true "
            "label is then added to the examples."
        )
        reply = None if done else common.reply_line("label", "<0 or 1>")
        return {
            "input_text": common.compose("Hidden filter.", rules, state, reply),
            "difficulty": self.difficulty,
            "examples": [{"item": item, "label": label} for item, label in self.examples],
            "item": None if done else self.queue[0],
            "questions_left": len(self.queue),
            "last_correct": self.last_correct,
            "correct": self.correct,
            "rule": self.rule[0] if done else None,
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        limit, shown, questions = LEVELS[self.difficulty]
        rng = SplitMix64(derive_seed(self.seed, "filtro", self.difficulty))
        while True:
            self.rule = predicate(rng, limit, self.difficulty)
            positives = [x for x in range(limit) if self.rule[1](x)]
            if limit // 20 <= len(positives) <= limit - limit // 20:
                break
        negatives = [x for x in range(limit) if not self.rule[1](x)]
        picked = [rng.choice(positives) if i % 2 else rng.choice(negatives) for i in range(shown)]
        rng.shuffle(picked)
        self.examples = [(x, int(self.rule[1](x))) for x in picked]
        self.queue = [
            rng.choice(positives) if rng.below(2) else rng.choice(negatives)
            for _ in range(questions)
        ]
        self.last_correct, self.correct = None, 0
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if self.rule is None:
            raise common.not_started()
        label = common.read_int(action, "label", 0, 1)
        item = self.queue.pop(0)
        truth = int(self.rule[1](item))
        self.last_correct = label == truth
        self.correct += int(self.last_correct)
        self.examples.append((item, truth))
        return Outcome(self._observation(), 1.0 if self.last_correct else 0.0, not self.queue)

    def _extra_state(self) -> JsonObject:
        return {"seed": self.seed, "difficulty": self.difficulty, "correct": self.correct}
