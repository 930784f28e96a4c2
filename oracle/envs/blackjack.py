"""One hand of blackjack against a rule-bound dealer, dealt from a seeded shoe.

The shoe is shuffled by splitmix64 Fisher-Yates from the seed, so a replay deals the same
cards. Rewards are floats because a natural pays 1.5 (or 1.2 on the harder tables), which
also gives the oracle a game whose reward type is float. The dealer does not peek: a
dealer natural is revealed when the hand is settled, so a reset never ends the episode
and every hand needs at least one decision.

Difficulty changes the table, the way casinos do: at level 1 the hole card is dealt face
up; from level 3 the dealer hits soft 17 and the shoe has more decks; from level 4 a
natural pays 6:5 instead of 3:2.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.base import ActionField, Environment, JsonObject, Outcome, ResetRequest
from oracle.envs import _gamekit as kit
from oracle.rng import SplitMix64, derive_seed

RANKS = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
#: difficulty -> (decks, hole card face up, dealer hits soft 17, natural pays)
LEVELS = {
    1: (1, True, False, 1.5),
    2: (1, False, False, 1.5),
    3: (2, False, True, 1.5),
    4: (4, False, True, 1.2),
    5: (6, False, True, 1.2),
}

RULES = (
    "Blackjack, one hand. Cards 2-10 count their value, J/Q/K count 10, an ace counts 11 "
    "or 1. Get closer to 21 than the dealer without going over. 'hit' takes a card, "
    "'stand' ends your turn; the dealer then draws to 17 or more. Win +1.0, lose -1.0, "
    "tie 0.0; a two-card 21 (natural) pays more unless the dealer also has one."
)


def hand_value(cards: list[str]) -> tuple[int, bool]:
    """Best total of a hand and whether it is soft (an ace still counted as 11)."""
    total = sum(11 if c == "A" else 10 if c in ("J", "Q", "K") else int(c) for c in cards)
    aces = cards.count("A")
    while total > 21 and aces:
        total -= 10
        aces -= 1
    return total, aces > 0


def _natural(cards: list[str]) -> bool:
    return len(cards) == 2 and hand_value(cards)[0] == 21


class BlackjackEnvironment(Environment):
    """Hit or stand; float reward settles the hand (+1.0, -1.0, 0.0, or the natural bonus)."""

    server_name = "blackjack"
    env_name = "blackjack_env"
    class_name = "BlackjackEnvironment"
    description = "One hand of blackjack from a seeded shoe; float rewards."
    readme = f'# blackjack\n\n{RULES}\n\nAction: `{{"action": "hit"|"stand"}}`.\n'
    category = "game"
    action_title = "BlackjackAction"
    action_fields = (ActionField("action", "string", "hit or stand."),)
    observation_title = "BlackjackObservation"
    observation_fields = (
        kit.INPUT_TEXT,
        kit.list_field("player_cards", {"type": "string"}, "Your cards."),
        kit.int_field("player_total", "Best total of your cards.", minimum=0),
        kit.bool_field("soft", "Whether your total counts an ace as 11."),
        kit.list_field("dealer_cards", {"type": "string"}, "Dealer cards; '?' is face down."),
        kit.int_field("dealer_total", "Total of the dealer's visible cards.", minimum=0),
        kit.str_field("outcome", "win, lose, push, natural or bust once settled.", nullable=True),
        kit.int_field("decks", "Decks in the shoe.", minimum=1),
        kit.bool_field("dealer_hits_soft_17", "Whether the dealer draws on a soft 17."),
        kit.legal_actions_field("string", "Actions accepted now."),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed = 0
        self.difficulty = 2
        self.shoe: list[str] = []
        self.player: list[str] = []
        self.dealer: list[str] = []
        self.outcome: str | None = None
        self.started = False

    def _legal(self) -> list[str]:
        if self.outcome is not None:
            return []
        return ["stand"] if hand_value(self.player)[0] >= 21 else ["hit", "stand"]

    def _observation(self) -> JsonObject:
        _, face_up, soft17, pays = LEVELS[self.difficulty]
        shown = self.dealer if face_up or self.outcome is not None else [self.dealer[0], "?"]
        total, soft = hand_value(self.player)
        dealer_total = hand_value([c for c in shown if c != "?"])[0]
        legal = self._legal()
        state = [
            f"Your cards: {' '.join(self.player)} (total {total}{', soft' if soft else ''}).",
            f"Dealer shows: {' '.join(shown)} (visible total {dealer_total}).",
            f"Table: dealer {'hits' if soft17 else 'stands on'} soft 17; naturals pay {pays}.",
            f"Result: {self.outcome}." if self.outcome else f"Legal actions: {', '.join(legal)}.",
        ]
        return {
            "input_text": kit.compose(
                "Blackjack.", RULES, state, kit.reply_line("action", '"hit"|"stand"')
            ),
            "player_cards": list(self.player),
            "player_total": total,
            "soft": soft,
            "dealer_cards": list(shown),
            "dealer_total": dealer_total,
            "outcome": self.outcome,
            "decks": LEVELS[self.difficulty][0],
            "dealer_hits_soft_17": soft17,
            "legal_actions": legal,
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        self.shoe = list(RANKS) * 4 * LEVELS[self.difficulty][0]
        SplitMix64(derive_seed(self.seed, "blackjack")).shuffle(self.shoe)
        first = [self.shoe.pop() for _ in range(4)]  # dealt alternately: you, dealer, ...
        self.player, self.dealer = first[0::2], first[1::2]
        self.outcome = None
        self.started = True
        return Outcome(self._observation(), None, False)

    def _settle(self) -> float:
        """Play out the dealer and return the player's result."""
        _, _, soft17, pays = LEVELS[self.difficulty]
        while True:
            total, soft = hand_value(self.dealer)
            if total < 17 or (total == 17 and soft and soft17):
                self.dealer.append(self.shoe.pop())
            else:
                break
        mine, theirs = hand_value(self.player)[0], hand_value(self.dealer)[0]
        if _natural(self.player) and not _natural(self.dealer):
            self.outcome = "natural"
            return pays
        if _natural(self.dealer) and not _natural(self.player):
            self.outcome = "lose"
            return -1.0
        if theirs > 21 or mine > theirs:
            self.outcome = "win"
            return 1.0
        self.outcome = "push" if mine == theirs else "lose"
        return 0.0 if mine == theirs else -1.0

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.started:
            raise kit.not_started()
        move = kit.read_choice(action, "action", self._legal())
        if move == "hit":
            self.player.append(self.shoe.pop())
            if hand_value(self.player)[0] > 21:
                self.outcome = "bust"
                return Outcome(self._observation(), -1.0, True)
            return Outcome(self._observation(), 0.0, False)
        reward = self._settle()
        return Outcome(self._observation(), reward, True)

    def _extra_state(self) -> JsonObject:
        return {"seed": self.seed, "difficulty": self.difficulty, "outcome": self.outcome}
