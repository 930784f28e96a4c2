"""2048 on a 4x4 board with seeded tile spawns and a target tile that rises with difficulty.

The spawn position and value (a 2, or a 4 one time in ten) come from one splitmix64 stream
consumed in order, so a replay of the same moves spawns the same tiles. Reaching 2048 would
take about a thousand moves, far beyond a bounded episode, so the goal is a smaller target
tile within a move budget; the hardest level keeps the 256 target and cuts the budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.base import ActionField, Environment, JsonObject, Outcome, ResetRequest
from oracle.envs import _gamekit as kit
from oracle.rng import SplitMix64, derive_seed

SIZE = 4
MOVES = ("up", "right", "down", "left")
#: difficulty -> (target tile, move budget)
LEVELS = {1: (32, 200), 2: (64, 200), 3: (128, 200), 4: (256, 200), 5: (256, 140)}
Board = list[list[int]]

RULES = (
    "Slide the tiles of a 4x4 board up, right, down or left. Equal tiles that collide merge "
    "into their sum, which is added to your reward; after every move a new tile (2, or "
    "sometimes 4) appears on an empty cell. A move that changes nothing is not allowed. "
    "Reach the target tile before the moves run out or the board locks."
)


def slide_row_left(row: list[int]) -> tuple[list[int], int]:
    """One row slid left: merged row and the merge score (each tile merges at most once)."""
    tiles = [v for v in row if v]
    out: list[int] = []
    score = 0
    i = 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(tiles[i] * 2)
            score += tiles[i] * 2
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return out + [0] * (len(row) - len(out)), score


def slide(board: Board, move: str) -> tuple[Board, int]:
    """The board after a move and the move's merge score, by rotating to a left slide."""
    turns = {"left": 0, "down": 1, "right": 2, "up": 3}[move]
    grid = [row[:] for row in board]
    for _ in range(turns):  # rotate clockwise
        grid = [list(r) for r in zip(*grid[::-1], strict=True)]
    score = 0
    slid: Board = []
    for row in grid:
        new, gained = slide_row_left(row)
        slid.append(new)
        score += gained
    for _ in range((4 - turns) % 4):
        slid = [list(r) for r in zip(*slid[::-1], strict=True)]
    return slid, score


class G2048Environment(Environment):
    """Slide the board; integer reward = sum of the tiles merged by the move."""

    server_name = "g2048"
    env_name = "g2048_env"
    class_name = "G2048Environment"
    description = "2048 on a 4x4 board with seeded spawns; reward is the merge score."
    readme = f'# g2048\n\n{RULES}\n\nAction: `{{"direction": "up"|"right"|"down"|"left"}}`.\n'
    category = "game"
    action_title = "G2048Action"
    action_fields = (ActionField("direction", "string", "One of up, right, down, left."),)
    observation_title = "G2048Observation"
    observation_fields = (
        kit.INPUT_TEXT,
        kit.list_field(
            "board", {"type": "array", "items": {"type": "integer"}}, "Rows of tiles; 0 is empty."
        ),
        kit.int_field("score", "Sum of all merges so far.", minimum=0),
        kit.int_field("max_tile", "The largest tile on the board.", minimum=0),
        kit.int_field("target", "The tile that wins the game.", minimum=2),
        kit.int_field("moves", "Moves made so far.", minimum=0),
        kit.int_field("moves_left", "Moves left in the budget.", minimum=0),
        kit.legal_actions_field("string", "Directions that change the board."),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed = 0
        self.difficulty = 2
        self.rng = SplitMix64(0)
        self.board: Board = [[0] * SIZE for _ in range(SIZE)]
        self.score = self.moves = 0
        self.started = False

    def _spawn(self) -> None:
        empty = [(r, c) for r in range(SIZE) for c in range(SIZE) if not self.board[r][c]]
        if empty:
            r, c = self.rng.choice(empty)
            self.board[r][c] = 4 if self.rng.below(10) == 0 else 2

    def _legal(self) -> list[str]:
        return [m for m in MOVES if slide(self.board, m)[0] != self.board]

    def _observation(self) -> JsonObject:
        target, budget = LEVELS[self.difficulty]
        legal = self._legal()
        max_tile = max(max(row) for row in self.board)
        rows = [" ".join(f"{v or '.':>4}" for v in row) for row in self.board]
        state = [
            *rows,
            f"Score {self.score}; largest tile {max_tile}; target {target}.",
            f"Moves used {self.moves} of {budget}. Legal moves: {', '.join(legal) or 'none'}.",
        ]
        reply = kit.reply_line("direction", '"up"|"right"|"down"|"left"')
        return {
            "input_text": kit.compose("2048.", RULES, state, reply),
            "board": [row[:] for row in self.board],
            "score": self.score,
            "max_tile": max_tile,
            "target": target,
            "moves": self.moves,
            "moves_left": budget - self.moves,
            "legal_actions": legal,
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        self.rng = SplitMix64(derive_seed(self.seed, "g2048"))
        self.board = [[0] * SIZE for _ in range(SIZE)]
        self._spawn()
        self._spawn()
        self.score = self.moves = 0
        self.started = True
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.started:
            raise kit.not_started()
        move = kit.read_choice(action, "direction", self._legal())
        self.board, gained = slide(self.board, move)
        self.score += gained
        self.moves += 1
        self._spawn()
        target, budget = LEVELS[self.difficulty]
        won = any(v >= target for row in self.board for v in row)
        observation = self._observation()
        done = won or self.moves >= budget or not observation["legal_actions"]
        return Outcome(observation, gained, done)

    def _extra_state(self) -> JsonObject:
        return {"seed": self.seed, "difficulty": self.difficulty, "score": self.score}
