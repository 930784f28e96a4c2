"""Snake on a small walled grid with seeded food and, on harder levels, seeded rocks.

The food positions come from one splitmix64 stream consumed in order, so the same moves
always meet the same food. Rocks sit only on interior cells, never next to each other or
on the start row, so no cell is ever sealed off and every level stays winnable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.base import ActionField, Environment, JsonObject, Outcome, ResetRequest
from oracle.envs import _gamekit as kit
from oracle.rng import SplitMix64, derive_seed

SIZE = 8
DIRECTIONS = {"up": (0, -1), "right": (1, 0), "down": (0, 1), "left": (-1, 0)}
OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}
#: difficulty -> (rocks, food needed to win, step limit)
#: (Four rocks always fit: no placement of fewer than four blocks every interior cell.)
LEVELS = {1: (0, 4, 120), 2: (1, 5, 140), 3: (2, 6, 160), 4: (3, 7, 180), 5: (4, 8, 200)}
Cell = tuple[int, int]

RULES = (
    f"Steer a snake on an {SIZE}x{SIZE} grid (x grows to the right, y grows downward). "
    "Legend: H head, o body, * food, # rock, . empty. Each step the snake moves one cell; "
    "it cannot turn straight back. Eating food (+1) makes it one cell longer. Hitting the "
    "edge, a rock or its own body ends the game (-1). Eat the required food to win."
)


class SnakeEnvironment(Environment):
    """Move the snake up/right/down/left; +1 per food, -1 on a crash, 0 otherwise."""

    server_name = "snake"
    env_name = "snake_env"
    class_name = "SnakeEnvironment"
    description = "Snake on an 8x8 grid with seeded food and rocks; integer rewards."
    readme = f'# snake\n\n{RULES}\n\nAction: `{{"direction": "up"|"right"|"down"|"left"}}`.\n'
    category = "game"
    action_title = "SnakeAction"
    action_fields = (
        ActionField("direction", "string", "One of up, right, down, left (not the reverse)."),
    )
    observation_title = "SnakeObservation"
    observation_fields = (
        kit.INPUT_TEXT,
        kit.str_field("grid", "The board, one text row per line."),
        kit.int_field("head_x", "Column of the head."),
        kit.int_field("head_y", "Row of the head."),
        kit.int_field("food_x", "Column of the food (null when none is left).", nullable=True),
        kit.int_field("food_y", "Row of the food (null when none is left).", nullable=True),
        kit.str_field("heading", "The direction the snake moved last."),
        kit.int_field("length", "Cells in the snake.", minimum=1),
        kit.int_field("eaten", "Food eaten so far.", minimum=0),
        kit.int_field("food_goal", "Food needed to win.", minimum=1),
        kit.int_field("steps_left", "Steps before the episode is cut off.", minimum=0),
        kit.bool_field("alive", "False once the snake has crashed."),
        kit.legal_actions_field("string", "Directions that are not a reversal."),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed = 0
        self.difficulty = 2
        self.rng = SplitMix64(0)
        self.body: list[Cell] = []
        self.rocks: set[Cell] = set()
        self.food: Cell | None = None
        self.heading = "right"
        self.eaten = self.steps = 0
        self.alive = True
        self.started = False

    def _legal(self) -> list[str]:
        return [d for d in DIRECTIONS if d != OPPOSITE[self.heading]]

    def _grid(self) -> str:
        rows = [["."] * SIZE for _ in range(SIZE)]
        for x, y in self.rocks:
            rows[y][x] = "#"
        if self.food is not None:
            rows[self.food[1]][self.food[0]] = "*"
        for x, y in self.body[1:]:
            rows[y][x] = "o"
        rows[self.body[0][1]][self.body[0][0]] = "H"
        return "\n".join("".join(row) for row in rows)

    def _spawn_food(self) -> None:
        taken = set(self.body) | self.rocks
        free = [(x, y) for y in range(SIZE) for x in range(SIZE) if (x, y) not in taken]
        self.food = self.rng.choice(free) if free else None

    def _observation(self) -> JsonObject:
        _, goal, limit = LEVELS[self.difficulty]
        grid = self._grid()
        state = [
            grid,
            f"Head at x={self.body[0][0]}, y={self.body[0][1]}, heading {self.heading}.",
            f"Food eaten {self.eaten} of {goal}; {limit - self.steps} steps left.",
            f"Legal directions: {', '.join(self._legal())}.",
        ]
        reply = kit.reply_line("direction", '"up"|"right"|"down"|"left"')
        return {
            "input_text": kit.compose("Snake.", RULES, state, reply),
            "grid": grid,
            "head_x": self.body[0][0],
            "head_y": self.body[0][1],
            "food_x": None if self.food is None else self.food[0],
            "food_y": None if self.food is None else self.food[1],
            "heading": self.heading,
            "length": len(self.body),
            "eaten": self.eaten,
            "food_goal": goal,
            "steps_left": limit - self.steps,
            "alive": self.alive,
            "legal_actions": self._legal(),
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        self.rng = SplitMix64(derive_seed(self.seed, "snake"))
        row = SIZE // 2
        self.body = [(3, row), (2, row), (1, row)]
        self.heading = "right"
        self.rocks = set()
        candidates = [(x, y) for y in range(1, SIZE - 1) for x in range(1, SIZE - 1) if y != row]
        self.rng.shuffle(candidates)
        for x, y in candidates:
            if len(self.rocks) == LEVELS[self.difficulty][0]:
                break
            if all(abs(x - rx) > 1 or abs(y - ry) > 1 for rx, ry in self.rocks):
                self.rocks.add((x, y))
        self.eaten = self.steps = 0
        self.alive = True
        self._spawn_food()
        self.started = True
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.started:
            raise kit.not_started()
        direction = kit.read_choice(action, "direction", self._legal())
        dx, dy = DIRECTIONS[direction]
        head = (self.body[0][0] + dx, self.body[0][1] + dy)
        self.heading = direction
        self.steps += 1
        grows = head == self.food
        blocked = set(self.body if grows else self.body[:-1]) | self.rocks
        inside = 0 <= head[0] < SIZE and 0 <= head[1] < SIZE
        _, goal, limit = LEVELS[self.difficulty]
        if not inside or head in blocked:
            self.alive = False
            return Outcome(self._observation(), -1, True)
        self.body.insert(0, head)
        reward = 0
        if grows:
            self.eaten += 1
            reward = 1
            self._spawn_food()
        else:
            self.body.pop()
        done = self.eaten >= goal or self.food is None or self.steps >= limit
        return Outcome(self._observation(), reward, done)

    def _extra_state(self) -> JsonObject:
        return {"seed": self.seed, "difficulty": self.difficulty, "eaten": self.eaten}
