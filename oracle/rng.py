"""Seeded randomness that is identical in every process and on every platform.

Python's `random.Random` is deterministic for integer seeds too, but splitmix64 is what
Kiln's tests use to rank bandit arms, and a tiny explicit generator keeps every
environment's draws reproducible from the algorithm alone, without trusting a library.
"""

from __future__ import annotations

from collections.abc import MutableSequence, Sequence
from typing import TypeVar

_MASK = (1 << 64) - 1
_T = TypeVar("_T")


class SplitMix64:
    """The splitmix64 generator (state += golden gamma, then two xor-shift-multiplies)."""

    def __init__(self, seed: int) -> None:
        self.state = seed & _MASK

    def next_u64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, bound: int) -> int:
        """A value in `[0, bound)`; plain modulo, as Kiln's bandit ranking uses."""
        if bound <= 0:
            raise ValueError("bound must be positive")
        return self.next_u64() % bound

    def unit(self) -> float:
        """A float in `[0, 1)` built from the top 53 bits."""
        return (self.next_u64() >> 11) / float(1 << 53)

    def choice(self, items: Sequence[_T]) -> _T:
        return items[self.below(len(items))]

    def shuffle(self, items: MutableSequence[_T]) -> None:
        """Fisher-Yates from the last index down to 1, `j = next mod (i + 1)`."""
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]


def _first_output(state: int) -> int:
    """`SplitMix64(state).next_u64()` without building an object (bandit's hot path)."""
    z = (state + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def derive_seed(seed: int, *labels: str | int) -> int:
    """A child seed for an independent stream (`derive_seed(seed, "payout", arm)`).

    Each label byte (and a NUL after each label) is folded in as
    `value = SplitMix64(value ^ byte).next_u64()`.
    """
    value = _first_output(seed & _MASK)
    for label in labels:
        for byte in str(label).encode("utf-8") + b"\x00":
            value = _first_output(value ^ byte)
    return value
