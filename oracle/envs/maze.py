"""A perfect maze (exactly one path between any two cells) carved from the seed.

The maze is carved by an iterative recursive-backtracker that picks among unvisited
neighbours with splitmix64, so every process draws the same corridors. The agent starts in
the top-left cell and the goal is always the bottom-right cell: at the default difficulty
the grid is 15x15, so the goal sits at x = 13, which Kiln's interop test asserts. Walking
into a wall is not an error (a model should learn from `bumped`, and Kiln's test steps
"up" from the start, which is a wall): the agent stays put and the step still counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.base import ActionField, Environment, JsonObject, Outcome, ResetRequest
from oracle.envs import _gamekit as kit
from oracle.rng import SplitMix64, derive_seed

#: difficulty -> grid width and height (odd: walls on even coordinates)
SIZES = {1: 11, 2: 15, 3: 17, 4: 19, 5: 21}
MOVE_LIMIT = kit.MAX_EPISODE_STEPS
#: move -> (dx, dy, name); y grows downward.
MOVES = {0: (0, -1, "up"), 1: (1, 0, "right"), 2: (0, 1, "down"), 3: (-1, 0, "left")}

RULES = (
    "Walk from A to G through a maze. Legend: # wall, . floor, A you, G goal; x grows to "
    "the right and y grows downward, starting at 0 in the top-left corner. Moves: 0 = up, "
    "1 = right, 2 = down, 3 = left. Walking into a wall leaves you in place. Reaching G "
    f"earns 1; the episode stops after {MOVE_LIMIT} moves."
)


def carve(size: int, seed: int) -> list[list[bool]]:
    """`open[y][x]` of a perfect maze whose cells lie on odd coordinates."""
    rng = SplitMix64(derive_seed(seed, "maze", size))
    open_ = [[False] * size for _ in range(size)]
    open_[1][1] = True
    stack = [(1, 1)]
    while stack:
        x, y = stack[-1]
        options = [
            (x + 2 * dx, y + 2 * dy, dx, dy)
            for dx, dy, _ in MOVES.values()
            if 0 < x + 2 * dx < size - 1
            and 0 < y + 2 * dy < size - 1
            and not open_[y + 2 * dy][x + 2 * dx]
        ]
        if not options:
            stack.pop()
            continue
        nx, ny, dx, dy = options[rng.below(len(options))]
        open_[y + dy][x + dx] = True
        open_[ny][nx] = True
        stack.append((nx, ny))
    return open_


class MazeEnvironment(Environment):
    """Move through a seeded maze; integer reward 1 on reaching the goal, else 0."""

    server_name = "maze"
    env_name = "maze_env"
    class_name = "MazeEnvironment"
    description = "Seeded perfect maze, 15x15 by default; integer reward 1 at the goal."
    readme = f'# maze\n\n{RULES}\n\nAction: `{{"move": 0 | 1 | 2 | 3}}`.\n'
    category = "game"
    action_title = "MazeAction"
    action_fields = (ActionField("move", "integer", "0 up, 1 right, 2 down, 3 left."),)
    observation_title = "MazeObservation"
    observation_fields = (
        kit.INPUT_TEXT,
        kit.str_field("grid", "The maze, one text row per line (# wall, . floor, A, G)."),
        kit.int_field("agent_x", "Your column.", minimum=0),
        kit.int_field("agent_y", "Your row.", minimum=0),
        kit.int_field("goal_x", "The goal's column.", minimum=0),
        kit.int_field("goal_y", "The goal's row.", minimum=0),
        kit.int_field("width", "Grid columns.", minimum=1),
        kit.int_field("height", "Grid rows.", minimum=1),
        kit.int_field("moves", "Moves made so far.", minimum=0),
        kit.int_field("moves_left", "Moves before the episode stops.", minimum=0),
        kit.bool_field("bumped", "Whether the last move walked into a wall."),
        kit.list_field("open_moves", {"type": "integer"}, "Moves that are not into a wall."),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed = 0
        self.difficulty = 2
        self.open: list[list[bool]] = []
        self.size = SIZES[2]
        self.x = self.y = 1
        self.moves = 0
        self.bumped = False
        self.started = False

    def _open_moves(self) -> list[int]:
        return [m for m, (dx, dy, _) in MOVES.items() if self.open[self.y + dy][self.x + dx]]

    def _grid(self) -> str:
        goal = self.size - 2
        rows = []
        for y in range(self.size):
            row = ["." if cell else "#" for cell in self.open[y]]
            if y == goal:
                row[goal] = "G"
            if y == self.y:
                row[self.x] = "A"
            rows.append("".join(row))
        return "\n".join(rows)

    def _observation(self) -> JsonObject:
        goal = self.size - 2
        grid = self._grid()
        open_moves = self._open_moves()
        names = ", ".join(f"{m} ({MOVES[m][2]})" for m in open_moves)
        state = [
            grid,
            f"You are at x={self.x}, y={self.y}; the goal is at x={goal}, y={goal}.",
            f"Moves used {self.moves} of {MOVE_LIMIT}. Open moves: {names}.",
            *(["Your last move hit a wall."] if self.bumped else []),
        ]
        return {
            "input_text": kit.compose("Maze.", RULES, state, kit.reply_line("move", "<0-3>")),
            "grid": grid,
            "agent_x": self.x,
            "agent_y": self.y,
            "goal_x": goal,
            "goal_y": goal,
            "width": self.size,
            "height": self.size,
            "moves": self.moves,
            "moves_left": MOVE_LIMIT - self.moves,
            "bumped": self.bumped,
            "open_moves": open_moves,
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        self.size = SIZES[self.difficulty]
        self.open = carve(self.size, self.seed)
        self.x = self.y = 1
        self.moves = 0
        self.bumped = False
        self.started = True
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.started:
            raise kit.not_started()
        dx, dy, _ = MOVES[kit.read_int(action, "move", 0, 3)]
        self.bumped = not self.open[self.y + dy][self.x + dx]
        if not self.bumped:
            self.x, self.y = self.x + dx, self.y + dy
        self.moves += 1
        at_goal = self.x == self.y == self.size - 2
        done = at_goal or self.moves >= MOVE_LIMIT
        return Outcome(self._observation(), 1 if at_goal else 0, done)

    def _extra_state(self) -> JsonObject:
        return {"seed": self.seed, "difficulty": self.difficulty, "moves": self.moves}
