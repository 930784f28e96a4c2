"""Pong on a small grid against a computer paddle whose reflexes are seeded.

The ball moves one cell per step in each axis and bounces off the top and bottom walls;
where it meets a paddle decides its new slope, so aiming is possible. The computer paddle
moves toward the ball only when a splitmix64 draw says so (more often on harder levels),
which makes it beatable and reproducible at once. Difficulty makes the computer react more
often and, at the ends of the scale, shrinks (level 1) or grows (level 5) its paddle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.base import ActionField, Environment, JsonObject, Outcome, ResetRequest
from oracle.envs import _gamekit as kit
from oracle.rng import SplitMix64, derive_seed

WIDTH, HEIGHT = 12, 7
POINTS_TO_WIN = 3
STEP_LIMIT = kit.MAX_EPISODE_STEPS
MOVES = {"up": -1, "stay": 0, "down": 1}
PADDLE_HEIGHT = 3
#: difficulty -> (computer paddle height, per-mille chance it reacts in a step)
LEVELS = {1: (2, 500), 2: (3, 550), 3: (3, 700), 4: (3, 850), 5: (4, 900)}

RULES = (
    f"Pong on a {WIDTH}x{HEIGHT} court (x grows right, y grows down). Your paddle P is the "
    "left column, the computer's paddle C the right column, the ball is o. Each step move "
    "your paddle up, down or stay; the ball moves one cell diagonally or straight and "
    "bounces off the top and bottom. Hitting the ball with the top of your paddle sends it "
    "upward, with the bottom downward. +1 when the ball passes C, -1 when it passes you; "
    f"first to {POINTS_TO_WIN} points wins."
)


class PongEnvironment(Environment):
    """Move the paddle up/stay/down; integer reward +1 or -1 per point, else 0."""

    server_name = "pong"
    env_name = "pong_env"
    class_name = "PongEnvironment"
    description = "Grid pong against a seeded computer paddle; integer rewards per point."
    readme = f'# pong\n\n{RULES}\n\nAction: `{{"paddle": "up"|"stay"|"down"}}`.\n'
    category = "game"
    action_title = "PongAction"
    action_fields = (ActionField("paddle", "string", "up, stay or down."),)
    observation_title = "PongObservation"
    observation_fields = (
        kit.INPUT_TEXT,
        kit.str_field("court", "The court, one text row per line."),
        kit.int_field("ball_x", "Ball column.", minimum=0),
        kit.int_field("ball_y", "Ball row.", minimum=0),
        kit.int_field("ball_dx", "Ball column change per step (-1 or 1)."),
        kit.int_field("ball_dy", "Ball row change per step (-1, 0 or 1)."),
        kit.int_field("paddle_y", "Top row of your paddle.", minimum=0),
        kit.int_field("paddle_height", "Rows covered by your paddle.", minimum=1),
        kit.int_field("opponent_y", "Top row of the computer's paddle.", minimum=0),
        kit.int_field("opponent_height", "Rows covered by the computer's paddle.", minimum=1),
        kit.int_field("score", "Your points.", minimum=0),
        kit.int_field("opponent_score", "The computer's points.", minimum=0),
        kit.int_field("points_to_win", "Points that end the game.", minimum=1),
        kit.int_field("steps_left", "Steps before the game is cut off.", minimum=0),
        kit.legal_actions_field("string", "Always up, stay, down."),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed = 0
        self.difficulty = 2
        self.rng = SplitMix64(0)
        self.bx = self.by = self.dx = self.dy = 0
        self.paddle = self.cpu = 0
        self.score = self.opponent_score = self.steps = 0
        self.started = False

    def _serve(self, toward_agent: bool) -> None:
        self.bx, self.by = WIDTH // 2, self.rng.below(HEIGHT)
        self.dx = -1 if toward_agent else 1
        self.dy = self.rng.below(3) - 1

    def _court(self) -> str:
        rows = [["."] * WIDTH for _ in range(HEIGHT)]
        for i in range(PADDLE_HEIGHT):
            rows[self.paddle + i][0] = "P"
        for i in range(LEVELS[self.difficulty][0]):
            rows[self.cpu + i][WIDTH - 1] = "C"
        rows[self.by][self.bx] = "o"
        return "\n".join("".join(row) for row in rows)

    def _observation(self) -> JsonObject:
        height = PADDLE_HEIGHT
        court = self._court()
        state = [
            court,
            f"Ball at x={self.bx}, y={self.by}, moving dx={self.dx}, dy={self.dy}.",
            f"Your paddle covers y={self.paddle}..{self.paddle + height - 1}.",
            f"Score: you {self.score}, computer {self.opponent_score}; "
            f"{STEP_LIMIT - self.steps} steps left.",
        ]
        reply = kit.reply_line("paddle", '"up"|"stay"|"down"')
        return {
            "input_text": kit.compose("Pong.", RULES, state, reply),
            "court": court,
            "ball_x": self.bx,
            "ball_y": self.by,
            "ball_dx": self.dx,
            "ball_dy": self.dy,
            "paddle_y": self.paddle,
            "paddle_height": height,
            "opponent_y": self.cpu,
            "opponent_height": LEVELS[self.difficulty][0],
            "score": self.score,
            "opponent_score": self.opponent_score,
            "points_to_win": POINTS_TO_WIN,
            "steps_left": STEP_LIMIT - self.steps,
            "legal_actions": list(MOVES),
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        self.rng = SplitMix64(derive_seed(self.seed, "pong"))
        self.paddle = (HEIGHT - PADDLE_HEIGHT) // 2
        self.cpu = (HEIGHT - LEVELS[self.difficulty][0]) // 2
        self.score = self.opponent_score = self.steps = 0
        self._serve(toward_agent=self.rng.below(2) == 0)
        self.started = True
        return Outcome(self._observation(), None, False)

    def _bounce(self, top: int, height: int, y: int, aim: bool) -> bool:
        """Whether a paddle spanning `top..top+height-1` meets the ball; sets the new slope.

        The top cell sends the ball up, the bottom cell down, a middle cell keeps the slope;
        the computer (`aim`) never returns a flat ball flat, so rallies cannot loop forever.
        """
        if not top <= y < top + height:
            return False
        offset = y - top
        if offset == 0:
            self.dy = -1
        elif offset == height - 1:
            self.dy = 1
        elif aim and self.dy == 0:
            self.dy = 1 if self.rng.below(2) else -1
        self.dx = -self.dx
        return True

    def _computer_moves(self) -> None:
        """Follow the ball while it approaches, drift back to the middle otherwise."""
        height, reflex = LEVELS[self.difficulty]
        if self.rng.below(1000) >= reflex:
            return
        target = self.by if self.dx > 0 else HEIGHT // 2
        centre = self.cpu + height // 2
        step = (target > centre) - (target < centre)
        self.cpu = min(max(self.cpu + step, 0), HEIGHT - height)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.started:
            raise kit.not_started()
        move = MOVES[kit.read_choice(action, "paddle", tuple(MOVES))]
        self.paddle = min(max(self.paddle + move, 0), HEIGHT - PADDLE_HEIGHT)
        self._computer_moves()
        self.steps += 1
        ny = self.by + self.dy
        if not 0 <= ny < HEIGHT:
            self.dy = -self.dy
            ny = self.by + self.dy
        nx = self.bx + self.dx
        reward = 0
        if nx == 0 and not self._bounce(self.paddle, PADDLE_HEIGHT, ny, aim=False):
            self.opponent_score += 1
            reward = -1
        elif nx == WIDTH - 1 and not self._bounce(
            self.cpu, LEVELS[self.difficulty][0], ny, aim=True
        ):
            self.score += 1
            reward = 1
        if reward:
            self._serve(toward_agent=reward > 0)
        else:
            self.by = ny
            self.bx = nx if 0 < nx < WIDTH - 1 else self.bx
        done = max(self.score, self.opponent_score) >= POINTS_TO_WIN or self.steps >= STEP_LIMIT
        return Outcome(self._observation(), reward, done)

    def _extra_state(self) -> JsonObject:
        return {
            "seed": self.seed,
            "difficulty": self.difficulty,
            "score": self.score,
            "opponent_score": self.opponent_score,
        }
