"""Cart-pole balancing with integer physics, so every platform computes the same trajectory.

Classic cart-pole integrates floating-point dynamics; tiny libm differences could make two
machines disagree after a hundred steps, which a replay check would report as drift. Here
every quantity is an integer (milliradians, millimetres, per step) updated by semi-implicit
Euler with truncating division, which keeps the feel of the real task (the pole falls
faster the further it leans; pushing the cart one way tips the pole the other) while staying
exactly reproducible. The seed picks the initial wobble and, on harder levels, the gusts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.base import ActionField, Environment, JsonObject, Outcome, ResetRequest
from oracle.envs import _gamekit as kit
from oracle.rng import SplitMix64, derive_seed

#: The pole has fallen beyond this angle (milliradians); the cart has left the track beyond
#: this position (millimetres).
ANGLE_LIMIT = 200
TRACK_LIMIT = 2400
PUSH_ACCEL = 8
PUSH_TORQUE = 12
#: difficulty -> (gravity in 1/64 per step, largest gust, steps to survive)
LEVELS = {1: (4, 0, 60), 2: (5, 0, 100), 3: (6, 2, 140), 4: (7, 3, 170), 5: (8, 4, 200)}

RULES = (
    "Balance a pole on a cart. Each step push the cart left (0) or right (1). Pushing the "
    "cart right tips the pole to the left and vice versa; gravity makes a leaning pole "
    f"lean faster. The pole falls when |angle| > {ANGLE_LIMIT}; the cart leaves the track "
    f"when |position| > {TRACK_LIMIT}. Each step the pole stays up earns 1.0."
)


def _tdiv(a: int, b: int) -> int:
    """Integer division truncating toward zero, so the physics is symmetric in sign."""
    q = abs(a) // b
    return q if a >= 0 else -q


class CartpoleEnvironment(Environment):
    """Push left or right; reward 1.0 for each step the pole stays balanced."""

    server_name = "cartpole"
    env_name = "cartpole_env"
    class_name = "CartpoleEnvironment"
    description = "Discrete, integer-physics cart-pole; float rewards 1.0 per balanced step."
    readme = f'# cartpole\n\n{RULES}\n\nAction: `{{"push": 0 | 1}}`.\n'
    category = "game"
    action_title = "CartpoleAction"
    action_fields = (ActionField("push", "integer", "0 pushes the cart left, 1 right."),)
    observation_title = "CartpoleObservation"
    observation_fields = (
        kit.INPUT_TEXT,
        kit.int_field("position", "Cart position in millimetres (0 is the centre)."),
        kit.int_field("velocity", "Cart velocity in millimetres per step."),
        kit.int_field("angle", "Pole angle in milliradians; positive leans right."),
        kit.int_field("angular_velocity", "Change of angle per step; positive turns right."),
        kit.int_field("steps", "Steps survived so far.", minimum=0),
        kit.int_field("horizon", "Steps to survive for a full score.", minimum=1),
        kit.bool_field("fallen", "Whether the pole fell or the cart left the track."),
        kit.legal_actions_field("integer", "The pushes that may be sent: [0, 1]."),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed = 0
        self.difficulty = 2
        self.rng = SplitMix64(0)
        self.x = self.v = self.angle = self.omega = self.steps = 0
        self.fallen = False
        self.started = False

    def _observation(self) -> JsonObject:
        horizon = LEVELS[self.difficulty][2]
        lean = "right" if self.angle > 0 else "left" if self.angle < 0 else "upright"
        state = [
            f"Step {self.steps} of {horizon}.",
            f"Cart position {self.x} mm, velocity {self.v} mm/step.",
            f"Pole angle {self.angle} mrad ({lean}), angular velocity {self.omega} mrad/step.",
        ]
        if self.fallen:
            state.append("The pole has fallen.")
        return {
            "input_text": kit.compose(
                "Cart-pole.", RULES, state, kit.reply_line("push", "<0 or 1>")
            ),
            "position": self.x,
            "velocity": self.v,
            "angle": self.angle,
            "angular_velocity": self.omega,
            "steps": self.steps,
            "horizon": horizon,
            "fallen": self.fallen,
            "legal_actions": [0, 1],
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        self.rng = SplitMix64(derive_seed(self.seed, "cartpole"))
        self.angle = self.rng.below(61) - 30
        self.omega = self.rng.below(11) - 5
        self.x = self.v = self.steps = 0
        self.fallen = False
        self.started = True
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.started:
            raise kit.not_started()
        force = 1 if kit.read_int(action, "push", 0, 1) == 1 else -1
        gravity, gust, horizon = LEVELS[self.difficulty]
        wind = self.rng.below(2 * gust + 1) - gust if gust else 0
        self.v += PUSH_ACCEL * force - _tdiv(self.v, 8)
        self.x += self.v
        self.omega += _tdiv(gravity * self.angle, 64) - PUSH_TORQUE * force + wind
        self.angle += self.omega
        self.fallen = abs(self.angle) > ANGLE_LIMIT or abs(self.x) > TRACK_LIMIT
        if not self.fallen:
            self.steps += 1
        done = self.fallen or self.steps >= horizon
        return Outcome(self._observation(), 0.0 if self.fallen else 1.0, done)

    def _extra_state(self) -> JsonObject:
        return {"seed": self.seed, "difficulty": self.difficulty, "steps": self.steps}
