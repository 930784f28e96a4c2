"""Kuhn poker: a short match of three-card poker hands against a fixed, seeded strategy.

Kuhn poker is the smallest poker with bluffing and a known equilibrium, so a policy's
result has a meaningful yardstick. The opponent's choices are per-mille probabilities
from a fixed table drawn with a splitmix64 stream of the seed, and each hand is dealt
by its own derived seed, so a replay meets the same cards and the same opponent.

Difficulty sets the opponent and the seats: level 1 plays uniformly at random, level 2
plays "honestly" (bets only a king, calls a queen half the time), levels 3-5 play the
equilibrium strategy (alpha = 1/3). Through level 3 you alternate seats; at levels 4-5
you always act first, the seat that loses 1/18 chip a hand against the equilibrium; level
5 plays twice as many hands, so luck evens out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.base import (
    ActionField,
    Environment,
    JsonObject,
    ObservationField,
    Outcome,
    ResetRequest,
)
from oracle.envs import _gamekit as kit
from oracle.rng import SplitMix64, derive_seed

CARDS = ("J", "Q", "K")
#: difficulty -> (opponent strategy, hands per match, you always act first)
LEVELS = {
    1: ("random", 4, False),
    2: ("honest", 4, False),
    3: ("equilibrium", 4, False),
    4: ("equilibrium", 4, True),
    5: ("equilibrium", 8, True),
}
#: strategy -> (card, history so far) -> per-mille chance of the aggressive action
#: (bet when no bet is pending, call when facing one).
STRATEGIES: dict[str, dict[tuple[str, str], int]] = {
    "honest": {
        **{(c, ""): 1000 if c == "K" else 0 for c in CARDS},
        **{(c, "check"): 1000 if c == "K" else 0 for c in CARDS},
        **{(c, "bet"): {"J": 0, "Q": 500, "K": 1000}[c] for c in CARDS},
        **{(c, "check,bet"): {"J": 0, "Q": 500, "K": 1000}[c] for c in CARDS},
    },
    "equilibrium": {
        ("J", ""): 333, ("Q", ""): 0, ("K", ""): 1000,
        ("J", "check"): 333, ("Q", "check"): 0, ("K", "check"): 1000,
        ("J", "bet"): 0, ("Q", "bet"): 333, ("K", "bet"): 1000,
        ("J", "check,bet"): 0, ("Q", "check,bet"): 667, ("K", "check,bet"): 1000,
    },
}  # fmt: skip

RULES = (
    "Kuhn poker against the computer. The deck is J < Q < K; each player antes 1 chip and "
    "gets one card. With no bet pending you may check or bet 1 chip; facing a bet you may "
    "call (match it) or fold (lose the pot). Check-check or bet-call goes to showdown: "
    "the higher card wins the pot. Your reward is the chips you win or lose in each hand."
)


def settle(history: list[str], first_card: str, second_card: str) -> int | None:
    """Chips won by the first player once the hand is over, None while it continues."""
    key = ",".join(history)
    showdown = 1 if CARDS.index(first_card) > CARDS.index(second_card) else -1
    return {
        "check,check": showdown,
        "bet,call": 2 * showdown,
        "bet,fold": 1,
        "check,bet,call": 2 * showdown,
        "check,bet,fold": -1,
    }.get(key)


def legal(history: list[str]) -> list[str]:
    return ["call", "fold"] if history and history[-1] == "bet" else ["check", "bet"]


class KuhnEnvironment(Environment):
    """Check, bet, call or fold; integer reward = chips won or lost when a hand ends."""

    server_name = "kuhn"
    env_name = "kuhn_env"
    class_name = "KuhnEnvironment"
    description = "A short match of Kuhn poker against a seeded fixed strategy; integer chips."
    readme = f'# kuhn\n\n{RULES}\n\nAction: `{{"action": "check"|"bet"|"call"|"fold"}}`.\n'
    category = "game"
    action_title = "KuhnAction"
    action_fields = (ActionField("action", "string", "check, bet, call or fold."),)
    observation_title = "KuhnObservation"
    observation_fields = (
        kit.INPUT_TEXT,
        kit.str_field("card", "Your card in this hand: J, Q or K."),
        kit.str_field("position", "first or second to act in this hand."),
        kit.list_field("history", {"type": "string"}, "Actions of this hand so far, in order."),
        kit.int_field("hand", "Number of this hand, from 1.", minimum=1),
        kit.int_field("hands", "Hands in the match.", minimum=1),
        kit.int_field("pot", "Chips in the pot.", minimum=2),
        kit.int_field("chips", "Your net chips over the match so far."),
        ObservationField(
            "last_hand",
            {
                "type": ["object", "null"],
                "properties": {
                    "your_card": {"type": "string"},
                    "opponent_card": {"type": ["string", "null"]},
                    "history": {"type": "array", "items": {"type": "string"}},
                    "result": {"type": "integer"},
                },
            },
            "The previous hand: cards (the opponent's only at showdown), actions, result.",
        ),
        kit.legal_actions_field("string", "Actions accepted now."),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed = 0
        self.difficulty = 2
        self.rng = SplitMix64(0)
        self.hand = 0
        self.cards = ("J", "Q")  # (yours, the opponent's)
        self.history: list[str] = []
        self.chips = 0
        self.last_hand: JsonObject | None = None
        self.started = False

    def _agent_first(self) -> bool:
        return LEVELS[self.difficulty][2] or self.hand % 2 == 0

    def _pot(self) -> int:
        return 2 + sum(1 for a in self.history if a in ("bet", "call"))

    def _observation(self) -> JsonObject:
        hands = LEVELS[self.difficulty][1]
        position = "first" if self._agent_first() else "second"
        moves = legal(self.history) if self._result() is None else []
        last = self.last_hand
        state = [
            f"Hand {self.hand + 1} of {hands}. Your card: {self.cards[0]}. You act {position}.",
            f"Actions so far: {', '.join(self.history) or 'none'}. Pot: {self._pot()} chips.",
            f"Your net chips: {self.chips}.",
            *(
                [
                    f"Last hand: you had {last['your_card']}, the computer "
                    f"{last['opponent_card'] or 'did not show'}; actions "
                    f"{', '.join(last['history'])}; you won {last['result']}."
                ]
                if last
                else []
            ),
            f"Legal actions: {', '.join(moves) or 'none (the match is over)'}.",
        ]
        reply = kit.reply_line("action", '"check"|"bet"|"call"|"fold"')
        return {
            "input_text": kit.compose("Kuhn poker.", RULES, state, reply),
            "card": self.cards[0],
            "position": position,
            "history": list(self.history),
            "hand": self.hand + 1,
            "hands": hands,
            "pot": self._pot(),
            "chips": self.chips,
            "last_hand": None if last is None else dict(last),
            "legal_actions": moves,
        }

    def _opponent_acts(self) -> None:
        strategy = LEVELS[self.difficulty][0]
        key = (self.cards[1], ",".join(self.history))
        permille = 500 if strategy == "random" else STRATEGIES[strategy][key]
        aggressive = self.rng.below(1000) < permille
        facing_bet = bool(self.history) and self.history[-1] == "bet"
        if facing_bet:
            self.history.append("call" if aggressive else "fold")
        else:
            self.history.append("bet" if aggressive else "check")

    def _deal(self) -> None:
        order = list(CARDS)
        SplitMix64(derive_seed(self.seed, "kuhn-deal", self.hand)).shuffle(order)
        self.cards = (order[0], order[1])
        self.history = []
        if not self._agent_first():
            self._opponent_acts()

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        self.rng = SplitMix64(derive_seed(self.seed, "kuhn-opponent"))
        self.hand = self.chips = 0
        self.last_hand = None
        self._deal()
        self.started = True
        return Outcome(self._observation(), None, False)

    def _result(self) -> int | None:
        """Chips the agent won in the current hand, None while it continues."""
        mine, theirs = self.cards
        if self._agent_first():
            return settle(self.history, mine, theirs)
        won = settle(self.history, theirs, mine)
        return None if won is None else -won

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.started:
            raise kit.not_started()
        self.history.append(kit.read_choice(action, "action", legal(self.history)))
        result = self._result()
        if result is None:
            self._opponent_acts()
            result = self._result()
        if result is None:
            return Outcome(self._observation(), 0, False)
        showdown = self.history[-1] in ("check", "call")
        self.last_hand = {
            "your_card": self.cards[0],
            "opponent_card": self.cards[1] if showdown else None,
            "history": list(self.history),
            "result": result,
        }
        self.chips += result
        if self.hand + 1 >= LEVELS[self.difficulty][1]:
            return Outcome(self._observation(), result, True)
        self.hand += 1
        self._deal()
        return Outcome(self._observation(), result, False)

    def _extra_state(self) -> JsonObject:
        return {"seed": self.seed, "difficulty": self.difficulty, "chips": self.chips}
