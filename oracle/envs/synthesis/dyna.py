"""dyna: infer hidden modular dynamics from a trajectory and predict its next values.

A hidden rule drives a sequence modulo m: first order `x' = (a*x + b) mod m` or, on the
harder levels, second order `x' = (a*x + c*x_prev + b) mod m`. The policy sees the
trajectory so far and predicts the next value; the true value is then revealed and appended,
so every step is both a test and a probe. A prediction earns the float `1 - d/(m//2)`, where
`d` is the circular distance to the truth (1.0 exactly right, 0.0 opposite). The episode
ends after a fixed number of predictions.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from oracle.base import ActionField, Environment, JsonObject, Outcome, ResetRequest
from oracle.envs.synthesis import common
from oracle.rng import SplitMix64, derive_seed

#: difficulty -> (order, moduli to draw from, values shown at reset, predictions)
LEVELS: Mapping[int, tuple[int, tuple[int, ...], int, int]] = {
    1: (0, (10, 12, 14, 16, 18, 20), 3, 8),
    2: (1, (11, 13, 17, 19, 23), 3, 10),
    3: (1, (53, 59, 61, 67, 71, 73, 79, 83, 89, 97), 3, 12),
    4: (2, (29, 31, 37, 41, 43, 47), 5, 14),
    5: (2, (101, 103, 107, 109, 113, 127, 131), 5, 16),
}
FORMS = {
    0: "x[t+1] = (x[t] + b) mod m",
    1: "x[t+1] = (a*x[t] + b) mod m",
    2: "x[t+1] = (a*x[t] + c*x[t-1] + b) mod m",
}


def advance(history: list[int], params: tuple[int, int, int], modulus: int) -> int:
    a, b, c = params
    previous = history[-2] if len(history) > 1 else 0
    return (a * history[-1] + c * previous + b) % modulus


class DynaEnvironment(Environment):
    """Predict the next value of a hidden modular recurrence; float rewards in [0, 1]."""

    server_name = "dyna"
    env_name = "dyna_env"
    class_name = "DynaEnvironment"
    description = "Infer a hidden modular recurrence from its trajectory; predict next values."
    category = "task"
    action_title = "DynaAction"
    action_fields = (
        ActionField("prediction", "integer", "The predicted next value, 0..modulus-1."),
    )
    observation_title = "DynaObservation"
    observation_fields = (
        common.INPUT_TEXT,
        common.DIFFICULTY,
        common.field("modulus", "integer", "The modulus m; every value lies in 0..m-1."),
        common.field("rule_form", "string", "The shape of the hidden rule (constants hidden)."),
        common.list_field("history", {"type": "integer"}, "Every value revealed so far."),
        common.field("predictions_left", "integer", "Predictions remaining."),
        common.field("last_prediction", "integer", "The last prediction.", nullable=True),
        common.field("last_actual", "integer", "The true value it was scored on.", nullable=True),
        common.field("exact", "integer", "Exactly right predictions so far."),
        common.field("total_reward", "number", "Sum of the rewards so far."),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed, self.difficulty, self.order, self.modulus = 0, 0, 0, 0
        self.params = (1, 0, 0)
        self.history: list[int] = []
        self.left = 0
        self.last: tuple[int, int] | None = None
        self.exact = 0
        self.total = Fraction(0)

    def _observation(self) -> JsonObject:
        state = [
            f"Modulus m = {self.modulus}. Rule form: {FORMS[self.order]}.",
            f"Sequence so far: {', '.join(map(str, self.history))}",
            f"Predictions left: {self.left}; exact so far: {self.exact}.",
        ]
        if self.last is not None:
            state.append(f"Last prediction {self.last[0]}; the true value was {self.last[1]}.")
        rules = (
            "A hidden rule with secret integer constants generates a sequence of values "
            "modulo m. Predict the next value; the true value is then revealed. A prediction "
            "scores 1 - d/(m//2), where d is its circular distance to the truth."
        )
        reply = common.reply_line("prediction", f"<0-{self.modulus - 1}>") if self.left else None
        return {
            "input_text": common.compose("Hidden dynamics.", rules, state, reply),
            "difficulty": self.difficulty,
            "modulus": self.modulus,
            "rule_form": FORMS[self.order],
            "history": list(self.history),
            "predictions_left": self.left,
            "last_prediction": None if self.last is None else self.last[0],
            "last_actual": None if self.last is None else self.last[1],
            "exact": self.exact,
            "total_reward": float(self.total),
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        self.order, moduli, shown, self.left = LEVELS[self.difficulty]
        rng = SplitMix64(derive_seed(self.seed, "dyna", self.difficulty))
        self.modulus = rng.choice(moduli)
        a = 1 if self.order == 0 else common.between(rng, 2, self.modulus - 1)
        c = 0 if self.order < 2 else common.between(rng, 1, self.modulus - 1)
        self.params = (a, common.between(rng, 1, self.modulus - 1), c)
        self.history = [rng.below(self.modulus) for _ in range(self.order or 1)]
        while len(self.history) < shown:
            self.history.append(advance(self.history, self.params, self.modulus))
        self.last, self.exact, self.total = None, 0, Fraction(0)
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.modulus:
            raise common.not_started()
        guess = common.read_int(action, "prediction", 0, self.modulus - 1)
        actual = advance(self.history, self.params, self.modulus)
        gap = abs(guess - actual)
        distance = min(gap, self.modulus - gap)
        reward = 1 - Fraction(distance, self.modulus // 2)
        self.history.append(actual)
        self.last, self.left = (guess, actual), self.left - 1
        self.exact += int(distance == 0)
        self.total += reward
        return Outcome(self._observation(), float(reward), self.left == 0)

    def _extra_state(self) -> JsonObject:
        return {"seed": self.seed, "difficulty": self.difficulty, "history": list(self.history)}
