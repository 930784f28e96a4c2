"""Per-environment rules: Kiln's interop expectations, game mechanics, difficulty effects.

The interop cases replay exactly the exchanges `miniopenenv_interop.rs` drives against the
pinned oracle (counter, bandit, connect4, maze, wordle), so our servers cannot drift from
what Kiln's own gate asserts. The bandit ranking is recomputed here with an independent
splitmix64 written from the algorithm's description, not with `oracle.rng`.
"""

from __future__ import annotations

from collections import deque

import pytest

from oracle.base import ExecutionError, Outcome
from oracle.envs import bandit, blackjack, cartpole, connect4, g2048, kuhn, maze, pong, snake
from oracle.envs import wordle as wordle_mod
from oracle.envs.bandit import BanditEnvironment
from oracle.envs.blackjack import BlackjackEnvironment
from oracle.envs.cartpole import CartpoleEnvironment
from oracle.envs.connect4 import Connect4Environment
from oracle.envs.counter import CounterEnvironment
from oracle.envs.g2048 import G2048Environment
from oracle.envs.kuhn import KuhnEnvironment
from oracle.envs.maze import MazeEnvironment
from oracle.envs.pong import PongEnvironment
from oracle.envs.snake import SnakeEnvironment
from oracle.envs.wordle import WordleEnvironment
from oracle.rng import SplitMix64

# -- counter ------------------------------------------------------------------------------


def test_counter_interop_sequence() -> None:
    env = CounterEnvironment()
    out = env.reset({"seed": 17, "episode_id": "kiln-interop"})
    assert (out.observation["total"], out.reward, out.done) == (0, None, False)
    out = env.step({"amount": 2, "note": "first"})
    assert out.observation["total"] == 2
    assert type(out.reward) is float
    assert (out.reward, out.done) == (2.0, False)
    out = env.step({"amount": 2, "note": "second"})
    assert out.observation["total"] == 4
    assert type(out.reward) is float
    assert (out.reward, out.done) == (4.0, True)
    assert env.state() == {"episode_id": "kiln-interop", "step_count": 2, "total": 4}


def test_counter_step_budget_and_bounds() -> None:
    env = CounterEnvironment()
    env.reset({})
    outs = [env.step({"amount": 0}) for _ in range(16)]
    assert [o.done for o in outs] == [False] * 15 + [True]
    env.reset({})
    with pytest.raises(ExecutionError):
        env.step({"amount": 1_000_001})
    with pytest.raises(ExecutionError):
        env.step({"amount": 1, "note": 5})
    assert env.step({"amount": -3}).reward == -3.0


# -- bandit -------------------------------------------------------------------------------


def _reference_ranks(seed: int) -> list[int]:
    """Kiln's fake-policy ranking, written out independently of `oracle.rng`."""
    mask = (1 << 64) - 1
    state = seed & mask
    order = list(range(10))
    for i in range(9, 0, -1):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        j = z % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def test_bandit_interop_sequence() -> None:
    env = BanditEnvironment()
    assert env.reset({"seed": 41}).observation["pulls"] == 0
    with pytest.raises(ExecutionError):
        env.step({"arm": 99})
    out = env.step({"arm": 0})
    assert out.observation["pulls"] == 1
    assert out.observation["last_arm"] == 0
    assert type(out.reward) is int
    assert out.reward in (0, 1)
    assert env.state()["step_count"] == 1
    assert "one digit" in out.observation["input_text"]


@pytest.mark.parametrize("seed", [0, 1, 41, 71, 2**63 + 5])
def test_bandit_ranking_is_kilns(seed: int) -> None:
    assert bandit.arm_ranks(seed) == _reference_ranks(seed)


def _one_pull(seed: int, arm: int, difficulty: int) -> int:
    env = BanditEnvironment()
    env.reset({"seed": seed, "difficulty": difficulty})
    reward = env.step({"arm": arm}).reward
    assert isinstance(reward, int)
    return reward


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("start", [0, 71, 500, 10_000])
def test_bandit_best_arm_beats_worst(start: int, difficulty: int) -> None:
    wins = 0
    for seed in range(start, start + 20):
        ranks = _reference_ranks(seed)
        best, worst = ranks.index(9), ranks.index(0)
        wins += _one_pull(seed, best, difficulty) > _one_pull(seed, worst, difficulty)
    assert wins >= 15


def test_bandit_payouts_rise_with_rank_and_difficulty_narrows_the_top() -> None:
    for d in range(1, 6):
        table = [bandit.pay_permille(rank, d) for rank in range(10)]
        assert table == sorted(table)
        assert len(set(table)) == 10
    gaps = [bandit.pay_permille(9, d) - bandit.pay_permille(8, d) for d in range(1, 6)]
    assert gaps == sorted(gaps, reverse=True)
    assert gaps[0] > gaps[-1]


def test_bandit_episode_length_and_replay() -> None:
    env = BanditEnvironment()
    env.reset({"seed": 5})
    outs = [env.step({"arm": i % 10}) for i in range(bandit.PULLS)]
    assert [o.done for o in outs] == [False] * (bandit.PULLS - 1) + [True]
    assert outs[-1].observation["total_reward"] == sum(int(o.reward or 0) for o in outs)
    env2 = BanditEnvironment()
    env2.reset({"seed": 5})
    assert [env2.step({"arm": i % 10}).reward for i in range(bandit.PULLS)] == [
        o.reward for o in outs
    ]


# -- connect4 -----------------------------------------------------------------------------


def test_connect4_interop_sequence() -> None:
    env = Connect4Environment()
    out = env.reset({"seed": 42})
    assert out.observation["legal_actions"] == [0, 1, 2, 3, 4, 5, 6]
    assert isinstance(out.observation["board"], str)
    out = env.step({"col": 3})
    assert "X" in out.observation["board"]
    assert isinstance(out.observation["legal_actions"], list)
    assert env.state()["step_count"] == 1
    assert out.observation["moves"] == 2


def test_connect4_full_column_is_an_execution_error() -> None:
    env = Connect4Environment()
    env.reset({"seed": 1, "difficulty": 1})
    while env.board.heights[0] < connect4.ROWS and not env.done:
        env.step({"col": 0})
    if not env.done:
        with pytest.raises(ExecutionError, match="full"):
            env.step({"col": 0})


def test_connect4_win_detection_and_opponent_tactics() -> None:
    board = connect4.Board()
    for col in (0, 1, 2):
        board.play(col, "X")
    assert board.wins_with(3, "X")
    assert not board.wins_with(4, "X")
    # Level 2 blocks the open three; level 2 takes its own win first.
    assert connect4.opponent_move(board, 2, SplitMix64(0)) == 3
    for _ in range(3):
        board.play(6, "O")
    assert connect4.opponent_move(board, 2, SplitMix64(0)) == 6
    diagonal = connect4.Board()
    for col, discs in enumerate(["X", "OX", "OOX", "OOOX"]):
        for disc in discs:
            diagonal.play(col, disc)
    assert diagonal.wins(3)


def _random_agent_wins(difficulty: int, seeds: range) -> int:
    wins = 0
    for seed in seeds:
        env = Connect4Environment()
        out = env.reset({"seed": seed, "difficulty": difficulty})
        rng = SplitMix64(seed + 1000)
        while not out.done:
            out = env.step({"col": rng.choice(out.observation["legal_actions"])})
        wins += out.reward == 1
    return wins


def test_connect4_difficulty_is_opponent_strength() -> None:
    assert _random_agent_wins(1, range(12)) > _random_agent_wins(3, range(12))
    assert _random_agent_wins(5, range(4)) == 0


# -- maze ---------------------------------------------------------------------------------


def _shortest_path(env: MazeEnvironment) -> list[int]:
    """BFS over the open cells, as a list of moves from the start to the goal."""
    goal = (env.size - 2, env.size - 2)
    previous: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {(1, 1): None}
    queue = deque([(1, 1)])
    while queue:
        x, y = queue.popleft()
        for move, (dx, dy, _) in maze.MOVES.items():
            nxt = (x + dx, y + dy)
            if env.open[nxt[1]][nxt[0]] and nxt not in previous:
                previous[nxt] = ((x, y), move)
                queue.append(nxt)
    moves: list[int] = []
    cell = goal
    while (link := previous[cell]) is not None:
        cell, move = link
        moves.append(move)
    return moves[::-1]


def test_maze_interop_sequence() -> None:
    env = MazeEnvironment()
    out = env.reset({"seed": 43})
    assert "A" in out.observation["grid"]
    assert "G" in out.observation["grid"]
    out = env.step({"move": 0})
    assert out.observation["goal_x"] == 13
    assert env.state()["step_count"] == 1
    assert out.observation["bumped"] is True  # the start's upper neighbour is the border


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_maze_is_perfect_and_solvable(difficulty: int) -> None:
    for seed in (0, 43, 10_002):
        env = MazeEnvironment()
        out = env.reset({"seed": seed, "difficulty": difficulty})
        size = maze.SIZES[difficulty]
        assert (out.observation["width"], out.observation["goal_x"]) == (size, size - 2)
        assert all(not env.open[0][x] and not env.open[size - 1][x] for x in range(size))
        cells = sum(row.count(True) for row in env.open)
        assert cells == 2 * ((size - 1) // 2) ** 2 - 1  # a spanning tree of the cell grid
        path = _shortest_path(env)
        assert len(path) <= maze.MOVE_LIMIT
        outs = [env.step({"move": m}) for m in path]
        assert [o.reward for o in outs] == [0] * (len(path) - 1) + [1]
        assert outs[-1].done


def test_maze_default_is_15_wide() -> None:
    assert MazeEnvironment().reset({"seed": 43}).observation["width"] == 15


# -- wordle -------------------------------------------------------------------------------


def test_wordle_interop_sequence() -> None:
    env = WordleEnvironment()
    assert env.reset({"seed": 44}).observation["guesses"] == 0
    out = env.step({"guess": "crane"})
    assert out.observation["valid"] is True
    assert out.observation["guesses"] == 1
    assert env.state()["step_count"] == 1


def test_wordle_word_list() -> None:
    words = wordle_mod.WORDS
    assert len(words) >= 300
    assert len(set(words)) == len(words)
    assert all(len(w) == 5 and w.isascii() and w.isalpha() and w.islower() for w in words)
    assert "crane" in words


@pytest.mark.parametrize(
    ("guess", "answer", "marks"),
    [
        ("crane", "crane", "GGGGG"),
        ("speed", "abide", "..Y.Y"),
        ("eerie", "there", "Y.Y.G"),
        ("llama", "hello", "YY..."),
        ("sweet", "sheep", "G.GG."),
    ],
)
def test_wordle_feedback(guess: str, answer: str, marks: str) -> None:
    assert wordle_mod.score_guess(guess, answer) == marks


def test_wordle_invalid_guesses_do_not_count_and_solving_pays() -> None:
    env = WordleEnvironment()
    env.reset({"seed": 3})
    answer = env.answer
    out = env.step({"guess": "qzxjk"})
    assert (out.observation["valid"], out.observation["guesses"], out.reward) == (False, 0, 0)
    assert out.observation["answer"] is None
    out = env.step({"guess": answer.upper()})
    assert (out.reward, out.done, out.observation["solved"]) == (1, True, True)
    assert out.observation["answer"] == answer


def test_wordle_limits_and_hard_mode() -> None:
    env = WordleEnvironment()
    env.reset({"seed": 8, "difficulty": 3})
    wrong = next(w for w in wordle_mod.WORDS if not set(w) & set(env.answer))
    first = env.step({"guess": wrong})
    hinted = next(w for w in wordle_mod.WORDS if w != env.answer and set(w) & set(env.answer))
    env.step({"guess": hinted})
    ignoring = next(w for w in wordle_mod.WORDS if w != env.answer and not set(w) & set(env.answer))
    out = env.step({"guess": ignoring})
    assert first.observation["valid"] is True
    assert out.observation["valid"] is False
    assert "hard mode" in out.observation["message"]
    easy = WordleEnvironment()
    easy.reset({"seed": 8, "difficulty": 1})
    outs = [easy.step({"guess": wrong}) for _ in range(8)]
    assert [o.done for o in outs] == [False] * 7 + [True]
    assert outs[-1].observation["answer"] == easy.answer
    spam = WordleEnvironment()
    spam.reset({"seed": 8})
    outs = [spam.step({"guess": "xxxxx"}) for _ in range(wordle_mod.MAX_INVALID)]
    assert outs[-1].done
    assert not outs[-2].done


# -- g2048 --------------------------------------------------------------------------------


def test_g2048_slides() -> None:
    assert g2048.slide_row_left([2, 2, 2, 2]) == ([4, 4, 0, 0], 8)
    assert g2048.slide_row_left([4, 0, 4, 8]) == ([8, 8, 0, 0], 8)
    board = [[2, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [2, 0, 0, 4]]
    assert g2048.slide(board, "up") == ([[4, 0, 0, 4], [0] * 4, [0] * 4, [0] * 4], 4)
    assert g2048.slide(board, "down") == ([[0] * 4, [0] * 4, [0] * 4, [4, 0, 0, 4]], 4)
    assert g2048.slide(board, "right")[0][3] == [0, 0, 2, 4]


def test_g2048_play_and_targets() -> None:
    env = G2048Environment()
    out = env.reset({"seed": 9})
    assert sum(v > 0 for row in out.observation["board"] for v in row) == 2
    illegal = [m for m in g2048.MOVES if m not in out.observation["legal_actions"]]
    for move in illegal:
        with pytest.raises(ExecutionError):
            env.step({"direction": move})
    before = sum(map(sum, out.observation["board"]))
    out = env.step({"direction": out.observation["legal_actions"][0]})
    assert sum(map(sum, out.observation["board"])) in (before + 2, before + 4)
    targets = [G2048Environment().reset({"difficulty": d}).observation["target"] for d in (1, 5)]
    assert targets[0] < targets[1]


# -- snake --------------------------------------------------------------------------------


def test_snake_eats_grows_and_crashes() -> None:
    env = SnakeEnvironment()
    out = env.reset({"seed": 4, "difficulty": 1})
    assert out.observation["length"] == 3
    with pytest.raises(ExecutionError):
        env.step({"direction": "left"})  # reversal
    # Walk to the food along x then y, without reversing.
    obs = out.observation
    while obs["eaten"] == 0 and not env.done:
        hx, hy, fx, fy = obs["head_x"], obs["head_y"], obs["food_x"], obs["food_y"]
        options = obs["legal_actions"]
        want = (["right"] if fx > hx else ["left"] if fx < hx else []) + (
            ["down"] if fy > hy else ["up"] if fy < hy else []
        )
        choice = next((d for d in want if d in options), None)
        if choice is None:
            choice = "down" if "down" in options and hy < snake.SIZE - 1 else "up"
        out = env.step({"direction": choice})
        obs = out.observation
    assert obs["eaten"] == 1
    assert out.reward == 1
    assert obs["length"] == 4
    while not env.done:
        out = env.step({"direction": "up" if "up" in obs["legal_actions"] else "right"})
        obs = out.observation
    assert out.reward == -1
    assert obs["alive"] is False


def test_snake_rocks_follow_difficulty() -> None:
    for d, (rocks, _, _) in snake.LEVELS.items():
        env = SnakeEnvironment()
        env.reset({"seed": 77, "difficulty": d})
        assert len(env.rocks) == rocks
        assert env.observation_fields  # the grid shows them
        assert env._grid().count("#") == rocks


# -- cartpole -----------------------------------------------------------------------------


def _balance(difficulty: int, seed: int, policy: str) -> Outcome:
    env = CartpoleEnvironment()
    out = env.reset({"seed": seed, "difficulty": difficulty})
    while not out.done:
        obs = out.observation
        lean = obs["angle"] + 2 * obs["angular_velocity"]
        push = 1 if policy == "right" else int(lean > 0)
        out = env.step({"push": push})
    return out


@pytest.mark.parametrize("difficulty", [1, 3, 5])
def test_cartpole_controller_survives_and_constant_push_falls(difficulty: int) -> None:
    horizon = cartpole.LEVELS[difficulty][2]
    for seed in range(3):
        good = _balance(difficulty, seed, "control")
        assert good.observation["steps"] == horizon
        assert good.reward == 1.0
        bad = _balance(difficulty, seed, "right")
        assert bad.observation["fallen"] is True
        assert bad.reward == 0.0


# -- blackjack ----------------------------------------------------------------------------


def test_blackjack_hand_values() -> None:
    assert blackjack.hand_value(["A", "K"]) == (21, True)
    assert blackjack.hand_value(["A", "A", "9"]) == (21, True)
    assert blackjack.hand_value(["A", "5", "K"]) == (16, False)
    assert blackjack.hand_value(["10", "Q", "2"]) == (22, False)


def test_blackjack_rules_by_difficulty() -> None:
    for seed in range(40):
        open_table = BlackjackEnvironment().reset({"seed": seed, "difficulty": 1})
        assert "?" not in open_table.observation["dealer_cards"]
        closed = BlackjackEnvironment()
        out = closed.reset({"seed": seed, "difficulty": 2})
        assert out.observation["dealer_cards"][1] == "?"
        out = closed.step({"action": "stand"})
        assert out.done
        assert "?" not in out.observation["dealer_cards"]
        assert out.reward in (-1.0, 0.0, 1.0, 1.5)
        if out.observation["outcome"] == "natural":
            assert out.reward == 1.5
    assert BlackjackEnvironment().reset({"difficulty": 5}).observation["decks"] == 6


def test_blackjack_bust() -> None:
    for seed in range(20):
        env = BlackjackEnvironment()
        out = env.reset({"seed": seed})
        while not out.done and "hit" in out.observation["legal_actions"]:
            out = env.step({"action": "hit"})
        if out.done:
            assert (out.reward, out.observation["outcome"]) == (-1.0, "bust")
            return
    raise AssertionError("no bust in 20 seeds")


# -- pong ---------------------------------------------------------------------------------


def _pong_score(difficulty: int, seed: int, track: bool) -> tuple[int, int]:
    env = PongEnvironment()
    out = env.reset({"seed": seed, "difficulty": difficulty})
    rng = SplitMix64(seed)
    total = 0
    while not out.done:
        obs = out.observation
        centre = obs["paddle_y"] + obs["paddle_height"] // 2
        target = obs["ball_y"] + obs["ball_dy"]
        move = "down" if target > centre else "up" if target < centre else "stay"
        out = env.step({"paddle": move if track else rng.choice(list(pong.MOVES))})
        assert isinstance(out.reward, int)
        total += out.reward
    assert total == out.observation["score"] - out.observation["opponent_score"]
    return out.observation["score"], out.observation["opponent_score"]


def test_pong_tracking_beats_flailing() -> None:
    tracked = [_pong_score(2, seed, track=True) for seed in range(5)]
    flailed = [_pong_score(2, seed, track=False) for seed in range(5)]
    assert sum(a - b for a, b in tracked) > sum(a - b for a, b in flailed)
    assert any(b == pong.POINTS_TO_WIN for _, b in flailed)


# -- kuhn ---------------------------------------------------------------------------------


def test_kuhn_settlement_table() -> None:
    assert kuhn.settle(["check", "check"], "K", "J") == 1
    assert kuhn.settle(["bet", "call"], "J", "Q") == -2
    assert kuhn.settle(["bet", "fold"], "J", "K") == 1
    assert kuhn.settle(["check", "bet", "fold"], "K", "J") == -1
    assert kuhn.settle(["check", "bet"], "K", "J") is None
    assert kuhn.legal(["bet"]) == ["call", "fold"]


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_kuhn_match(difficulty: int) -> None:
    _, hands, always_first = kuhn.LEVELS[difficulty]
    env = KuhnEnvironment()
    out = env.reset({"seed": difficulty, "difficulty": difficulty})
    positions: list[str] = []
    total = 0
    while not out.done:
        obs = out.observation
        if obs["hand"] > len(positions):
            positions.append(obs["position"])
        action = "bet" if "bet" in obs["legal_actions"] else "call"
        out = env.step({"action": action})
        total += int(out.reward or 0)
    assert len(positions) == hands
    assert total == out.observation["chips"]
    assert out.observation["legal_actions"] == []
    assert ("second" in positions) is not always_first
