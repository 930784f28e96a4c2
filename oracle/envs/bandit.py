"""A ten-armed Bernoulli bandit whose arm ranking Kiln's tests can recompute from the seed.

Kiln's training lane ranks the arms without asking the server: it shuffles `[0..9]` with
splitmix64 seeded by the episode seed and reads `payout_rank[arm] = order[arm]`. The oracle
uses exactly that ranking, and pays the best arm so often and the worst so rarely that a
one-pull episode on the best arm beats one on the worst in nearly every seed (the tests
check at least 15 of any 20 consecutive seeds). Every draw is a pure function of
(seed, pull index, arm), so a replay of the same actions is byte-identical.

Difficulty narrows the gap between the best arm and the runner-up (the ends stay fixed at
98% and 2%), so finding the best arm takes more exploration on harder levels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.base import ActionField, Environment, JsonObject, Outcome, ResetRequest
from oracle.envs import _gamekit as kit
from oracle.rng import SplitMix64, derive_seed

ARMS = 10
PULLS = 20
#: Pay probabilities in per mille: the best arm and the worst arm at every difficulty.
BEST_PERMILLE = 980
WORST_PERMILLE = 20
#: How far (per mille) the runner-up sits below the best arm, by difficulty 1..5.
RUNNER_UP_GAP = {1: 400, 2: 250, 3: 150, 4: 80, 5: 40}

RULES = (
    f"There are {ARMS} slot-machine arms, numbered 0-{ARMS - 1}. Each pull pays 1 point with "
    "a fixed hidden probability that differs between arms, otherwise 0. You have "
    f"{PULLS} pulls; collect as many points as you can by finding the best arm."
)


def arm_ranks(seed: int) -> list[int]:
    """`payout_rank[arm]` (0 worst .. 9 best): splitmix64 Fisher-Yates of `[0..9]`."""
    order = list(range(ARMS))
    SplitMix64(seed).shuffle(order)
    return order


def pay_permille(rank: int, difficulty: int) -> int:
    """Pay probability of a rank: linear from the worst to the runner-up, then the best."""
    if rank == ARMS - 1:
        return BEST_PERMILLE
    runner_up = BEST_PERMILLE - RUNNER_UP_GAP[difficulty]
    return WORST_PERMILLE + rank * (runner_up - WORST_PERMILLE) // (ARMS - 2)


def pays(seed: int, pull: int, arm: int, permille: int) -> bool:
    """The deterministic draw of one (seed, pull index, arm)."""
    return SplitMix64(derive_seed(seed, "bandit-pull", pull, arm)).below(1000) < permille


class BanditEnvironment(Environment):
    """Pull one of ten arms per step; reward is the integer 0 or 1."""

    server_name = "bandit"
    env_name = "bandit_env"
    class_name = "BanditEnvironment"
    description = f"Ten-armed Bernoulli bandit, {PULLS} pulls, integer 0/1 rewards."
    readme = f'# bandit\n\n{RULES}\n\nAction: `{{"arm": <0-9>}}`.\n'
    category = "game"
    action_title = "BanditAction"
    action_fields = (ActionField("arm", "integer", f"The arm to pull, 0..{ARMS - 1}."),)
    observation_title = "BanditObservation"
    observation_fields = (
        kit.INPUT_TEXT,
        kit.int_field("arms", "Number of arms.", minimum=1),
        kit.int_field("pulls", "Pulls made so far this episode.", minimum=0),
        kit.int_field("pulls_left", "Pulls remaining.", minimum=0),
        kit.int_field(
            "last_arm", "The arm pulled last (null before the first pull).", nullable=True
        ),
        kit.int_field(
            "last_reward", "The reward of the last pull (null before it).", nullable=True
        ),
        kit.int_field("total_reward", "Points collected so far.", minimum=0),
        kit.list_field("arm_pulls", {"type": "integer"}, "Pulls per arm."),
        kit.list_field("arm_wins", {"type": "integer"}, "Paying pulls per arm."),
        kit.legal_actions_field("integer", "The arms that may be pulled."),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed = 0
        self.difficulty = 2
        self.permille: list[int] = []
        self.arm_pulls = [0] * ARMS
        self.arm_wins = [0] * ARMS
        self.last_arm: int | None = None
        self.last_reward: int | None = None
        self.started = False

    def _observation(self) -> JsonObject:
        pulls = sum(self.arm_pulls)
        table = [
            f"  arm {arm}: pulled {n} times, paid {w}"
            for arm, (n, w) in enumerate(zip(self.arm_pulls, self.arm_wins, strict=True))
        ]
        last = (
            "No pulls yet."
            if self.last_arm is None
            else f"Last pull: arm {self.last_arm} paid {self.last_reward}."
        )
        state = [
            f"Pulls used: {pulls} of {PULLS}; points: {sum(self.arm_wins)}.",
            last,
            "Arm history:",
            *table,
        ]
        reply = kit.reply_line("arm", f"<0-{ARMS - 1}>") + " Name the arm with one digit."
        return {
            "input_text": kit.compose("Multi-armed bandit.", RULES, state, reply),
            "arms": ARMS,
            "pulls": pulls,
            "pulls_left": PULLS - pulls,
            "last_arm": self.last_arm,
            "last_reward": self.last_reward,
            "total_reward": sum(self.arm_wins),
            "arm_pulls": list(self.arm_pulls),
            "arm_wins": list(self.arm_wins),
            "legal_actions": list(range(ARMS)),
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        self.permille = [pay_permille(rank, self.difficulty) for rank in arm_ranks(self.seed)]
        self.arm_pulls = [0] * ARMS
        self.arm_wins = [0] * ARMS
        self.last_arm = self.last_reward = None
        self.started = True
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.started:
            raise kit.not_started()
        arm = kit.read_int(action, "arm", 0, ARMS - 1)
        pull = sum(self.arm_pulls)
        reward = 1 if pays(self.seed, pull, arm, self.permille[arm]) else 0
        self.arm_pulls[arm] += 1
        self.arm_wins[arm] += reward
        self.last_arm, self.last_reward = arm, reward
        return Outcome(self._observation(), reward, pull + 1 >= PULLS)

    def _extra_state(self) -> JsonObject:
        return {
            "seed": self.seed,
            "difficulty": self.difficulty,
            "pulls": sum(self.arm_pulls),
            "total_reward": sum(self.arm_wins),
        }
