"""Connect Four against a seeded computer opponent whose strength is the difficulty.

You are X and move first; O replies within the same step. Level 1 plays a random legal
column, level 2 wins or blocks when it can, level 3 also refuses moves that hand you an
immediate win, and levels 4 and 5 search 2 and 4 plies with a window heuristic. Ties
between equally good columns are broken by a splitmix64 stream of the seed, so the
opponent is reproducible without being predictable from the rules alone. A full or
out-of-range column is an `ExecutionError` (the episode continues): the legal columns are
always listed, so an illegal one is a protocol-level mistake, not a game move.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.base import ActionField, Environment, ExecutionError, JsonObject, Outcome, ResetRequest
from oracle.envs import _gamekit as kit
from oracle.rng import SplitMix64, derive_seed

COLS, ROWS = 7, 6
WIN_SCORE = 100_000
DEPTH = {4: 2, 5: 4}

RULES = (
    "Connect Four on a 7-column, 6-row board. You are X, the computer is O; you move "
    "first. Drop a disc into a column (0-6, left to right); it falls to the lowest empty "
    "cell. Four of your discs in a row (across, down or diagonally) wins +1; four O's "
    "loses -1; a full board is a draw (0)."
)

_DIRECTIONS = ((1, 0), (0, 1), (1, 1), (1, -1))
#: Every line of four cells, as flat indices `row * COLS + col` (row 0 is the bottom).
_WINDOWS = [
    tuple((r + i * dr) * COLS + c + i * dc for i in range(4))
    for c in range(COLS)
    for r in range(ROWS)
    for dc, dr in _DIRECTIONS
    if 0 <= c + 3 * dc < COLS and 0 <= r + 3 * dr < ROWS
]
_CENTRE = [r * COLS + COLS // 2 for r in range(ROWS)]


class Board:
    """A flat 6x7 grid of "X", "O" and "." with column heights, mutated by play/undo."""

    def __init__(self) -> None:
        self.cells = ["."] * (COLS * ROWS)
        self.heights = [0] * COLS

    def legal(self) -> list[int]:
        return [c for c in range(COLS) if self.heights[c] < ROWS]

    def play(self, col: int, disc: str) -> None:
        self.cells[self.heights[col] * COLS + col] = disc
        self.heights[col] += 1

    def undo(self, col: int) -> None:
        self.heights[col] -= 1
        self.cells[self.heights[col] * COLS + col] = "."

    def wins(self, col: int) -> bool:
        """Whether the disc on top of `col` completes four in a row."""
        row = self.heights[col] - 1
        disc = self.cells[row * COLS + col]
        for dc, dr in _DIRECTIONS:
            run = 1
            for sign in (1, -1):
                c, r = col + sign * dc, row + sign * dr
                while 0 <= c < COLS and 0 <= r < ROWS and self.cells[r * COLS + c] == disc:
                    run, c, r = run + 1, c + sign * dc, r + sign * dr
            if run >= 4:
                return True
        return False

    def wins_with(self, col: int, disc: str) -> bool:
        self.play(col, disc)
        result = self.wins(col)
        self.undo(col)
        return result

    def text(self) -> str:
        rows = [" ".join(self.cells[r * COLS : (r + 1) * COLS]) for r in range(ROWS - 1, -1, -1)]
        return "\n".join([*rows, " ".join(str(c) for c in range(COLS))])


def evaluate(board: Board, disc: str) -> int:
    """Window heuristic from `disc`'s side: open threes and twos, plus the centre column."""
    other = "X" if disc == "O" else "O"
    cells = board.cells
    score = 3 * sum(1 for i in _CENTRE if cells[i] == disc)
    for a, b, c, d in _WINDOWS:
        line = cells[a] + cells[b] + cells[c] + cells[d]
        empty = line.count(".")
        if empty == 1:
            mine = line.count(disc)
            score += 5 if mine == 3 else -4 if mine == 0 else 0
        elif empty == 2 and line.count(other) == 0:
            score += 2
    return score


def _negamax(board: Board, disc: str, depth: int, alpha: int, beta: int) -> int:
    other = "X" if disc == "O" else "O"
    moves = board.legal()
    if not moves:
        return 0
    if depth == 0:
        return evaluate(board, disc)
    best = -WIN_SCORE * 2
    for col in sorted(moves, key=lambda c: abs(c - COLS // 2)):
        board.play(col, disc)
        if board.wins(col):
            value = WIN_SCORE + depth
        else:
            value = -_negamax(board, other, depth - 1, -beta, -alpha)
        board.undo(col)
        best = max(best, value)
        alpha = max(alpha, value)
        if alpha >= beta:
            break
    return best


def opponent_move(board: Board, difficulty: int, rng: SplitMix64) -> int:
    """O's column: random at level 1, tactical at 2-3, a shallow search at 4-5."""
    moves = board.legal()
    if difficulty >= 2:
        winning = [c for c in moves if board.wins_with(c, "O")]
        if winning:
            return rng.choice(winning)
        blocking = [c for c in moves if board.wins_with(c, "X")]
        if blocking:
            return rng.choice(blocking)
    if difficulty == 3:
        safe = []
        for c in moves:
            board.play(c, "O")
            if not (board.heights[c] < ROWS and board.wins_with(c, "X")):
                safe.append(c)
            board.undo(c)
        moves = safe or moves
    if difficulty >= 4:
        scores = {}
        for c in moves:
            board.play(c, "O")
            scores[c] = -_negamax(board, "X", DEPTH[difficulty] - 1, -WIN_SCORE * 2, WIN_SCORE * 2)
            board.undo(c)
        top = max(scores.values())
        moves = [c for c in moves if scores[c] == top]
    return rng.choice(moves)


class Connect4Environment(Environment):
    """Drop a disc; integer reward +1 win, -1 loss, 0 otherwise."""

    server_name = "connect4"
    env_name = "connect4_env"
    class_name = "Connect4Environment"
    description = "Connect Four against a seeded opponent of difficulty-dependent strength."
    readme = f'# connect4\n\n{RULES}\n\nAction: `{{"col": <0-6>}}`.\n'
    category = "game"
    action_title = "Connect4Action"
    action_fields = (ActionField("col", "integer", "Column to drop your disc into, 0..6."),)
    observation_title = "Connect4Observation"
    observation_fields = (
        kit.INPUT_TEXT,
        kit.str_field("board", "Rows top to bottom: X you, O computer, . empty."),
        kit.legal_actions_field("integer", "Columns that are not full."),
        kit.int_field(
            "last_opponent_col", "O's last column (null before it moves).", nullable=True
        ),
        kit.int_field("moves", "Discs on the board.", minimum=0),
        kit.str_field("winner", "X, O or draw once the game is over.", nullable=True),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed = 0
        self.difficulty = 2
        self.rng = SplitMix64(0)
        self.board = Board()
        self.last_opponent: int | None = None
        self.winner: str | None = None
        self.started = False

    def _observation(self) -> JsonObject:
        board = self.board.text()
        moves = self.board.legal() if self.winner is None else []
        last = "none yet" if self.last_opponent is None else f"column {self.last_opponent}"
        state = [
            board,
            f"Computer's last move: {last}.",
            f"Game over: {self.winner}." if self.winner else f"Legal columns: {moves}.",
        ]
        return {
            "input_text": kit.compose(
                "Connect Four.", RULES, state, kit.reply_line("col", "<0-6>")
            ),
            "board": board,
            "legal_actions": moves,
            "last_opponent_col": self.last_opponent,
            "moves": sum(self.board.heights),
            "winner": self.winner,
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        self.rng = SplitMix64(derive_seed(self.seed, "connect4"))
        self.board = Board()
        self.last_opponent = self.winner = None
        self.started = True
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.started:
            raise kit.not_started()
        col = kit.read_int(action, "col", 0, COLS - 1)
        if self.board.heights[col] >= ROWS:
            raise ExecutionError(f"column {col} is full; legal columns: {self.board.legal()}")
        self.board.play(col, "X")
        if self.board.wins(col):
            self.winner = "X"
            return Outcome(self._observation(), 1, True)
        if self.board.legal():
            reply = opponent_move(self.board, self.difficulty, self.rng)
            self.board.play(reply, "O")
            self.last_opponent = reply
            if self.board.wins(reply):
                self.winner = "O"
                return Outcome(self._observation(), -1, True)
        if not self.board.legal():
            self.winner = "draw"
            return Outcome(self._observation(), 0, True)
        return Outcome(self._observation(), 0, False)

    def _extra_state(self) -> JsonObject:
        return {"seed": self.seed, "difficulty": self.difficulty, "winner": self.winner}
