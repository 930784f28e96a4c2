"""change: money arithmetic and making change with the fewest coins and bills.

A customer buys a few items, maybe uses a coupon, and pays; all amounts are whole cents.
Difficulty: 1 change (in cents) for one item; 2 several items with quantities; 3 the fewest
US coins and bills for the change; 4 the same with a coupon and a larger denomination set;
5 a made-up currency whose denominations defeat the greedy method, so the fewest pieces
need real search (answered here by dynamic programming). The US sets of levels 3 and 4 are
canonical coin systems, so the greedy count is optimal there (the tests prove it for every
amount those levels can produce).
"""

from __future__ import annotations

from oracle.envs.math.exact import ExactAnswerEnvironment, Problem, between, canonical
from oracle.rng import SplitMix64

ITEMS = ("pencil", "notebook", "eraser", "marker", "folder", "ruler", "stapler", "glue")
BILLS = (500, 1000, 2000, 5000, 10000)
US = (1, 5, 10, 25, 100, 500, 1000, 2000)
EXTENDED = (1, 5, 10, 25, 50, 100, 200, 500, 1000, 2000, 5000)
#: Item counts and maximum quantity per item, by difficulty.
BASKETS = {1: (1, 1), 2: (3, 4), 3: (3, 4), 4: (4, 5), 5: (3, 3)}


def money(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


def greedy_pieces(amount: int, denominations: tuple[int, ...]) -> int:
    pieces = 0
    for value in sorted(denominations, reverse=True):
        pieces += amount // value
        amount %= value
    return pieces


def fewest_pieces(amount: int, denominations: tuple[int, ...]) -> int:
    """Dynamic programming over every amount up to `amount` (1 must be a denomination)."""
    best = [0] * (amount + 1)
    for total in range(1, amount + 1):
        best[total] = 1 + min(best[total - v] for v in denominations if v <= total)
    return best[amount]


def _payment(total: int) -> int:
    """The smallest single bill above the total, or whole $100 bills beyond that."""
    for bill in BILLS:
        if bill > total:
            return bill
    return (total // BILLS[-1] + 1) * BILLS[-1]


def _currency(rng: SplitMix64) -> tuple[int, ...]:
    values = {1}
    while len(values) < 4:
        values.add(between(rng, 3, 40))
    return tuple(sorted(values))


class ChangeEnvironment(ExactAnswerEnvironment):
    server_name = "change"
    env_name = "change_env"
    class_name = "ChangeEnvironment"
    description = "Shopping arithmetic and making change with the fewest coins and bills."
    action_title = "ChangeAction"
    observation_title = "ChangeObservation"

    @classmethod
    def generate(cls, rng: SplitMix64, difficulty: int) -> Problem:
        kinds, most = BASKETS[difficulty]
        names = list(ITEMS)
        rng.shuffle(names)
        count = 1 if kinds == 1 else between(rng, 2, kinds)
        lines, total = ["A customer buys:"], 0
        for name in names[:count]:
            quantity, price = between(rng, 1, most), between(rng, 25, 1500)
            lines.append(f"  {quantity} x {name} at {money(price)} each")
            total += quantity * price
        if difficulty == 4:
            coupon = 5 * between(rng, 1, min(100, (total - 1) // 5))
            lines.append(f"A coupon takes {money(coupon)} off the total.")
            total -= coupon
        paid = (total // 500 + 1) * 500 if difficulty == 5 else _payment(total)
        lines.append(f"They pay with {money(paid)}.")
        change = paid - total
        if difficulty <= 2:
            lines.append("How much change do they receive, in cents?")
            return Problem("\n".join(lines), canonical(change), "integer")
        denominations = {3: US, 4: EXTENDED}.get(difficulty) or _currency(rng)
        lines.append(
            "The cashier hands over the change using the fewest possible coins and bills, "
            "with an unlimited supply of each of these denominations (in cents): "
            f"{', '.join(map(str, denominations))}."
        )
        lines.append("How many coins and bills does the cashier hand over?")
        pieces = (
            fewest_pieces(change, denominations)
            if difficulty == 5
            else greedy_pieces(change, denominations)
        )
        return Problem("\n".join(lines), canonical(pieces), "integer")
