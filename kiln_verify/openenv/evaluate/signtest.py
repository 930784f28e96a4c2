"""The exact two-sided sign test of ``paired_return_sign_test_v1`` (kiln-openenv-contract §9).

Kiln computes ``p = min(1, 2 * sum_{i=0..k} C(n, i) / 2^n)`` in log space with ``f64``;
here it is computed exactly with integers and :class:`fractions.Fraction` (``n`` is at
most ``MAX_GROUPS``, so the binomial sum is a modest big integer), and the float is the
correctly rounded value of the exact fraction. ``n = improved + regressed`` (ties are
dropped), ``k = min(improved, regressed)``; ``n = 0`` gives ``p = 1``. Example: 20
improved, 0 regressed gives exactly ``2 / 2^20`` = ``1.9073486328125e-06``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

__all__ = ["ALPHA", "SignTest", "sign_test", "sign_test_p"]

ALPHA: Final = Fraction(1, 20)
"""``exact_sign_test_alpha`` (0.05) as an exact fraction; ``p < ALPHA`` is compared exactly."""


def sign_test_p(improved: int, regressed: int) -> Fraction:
    """The exact two-sided sign-test p value of ``improved`` vs ``regressed`` groups."""
    for name, value in (("improved", improved), ("regressed", regressed)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer")
    n = improved + regressed
    if n == 0:
        return Fraction(1)
    k = min(improved, regressed)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(Fraction(1), Fraction(2 * tail, 1 << n))


@dataclass(frozen=True, slots=True)
class SignTest:
    """One sign test: the counts, the exact p value and its float."""

    improved: int
    regressed: int
    p_exact: Fraction

    @property
    def p_value(self) -> float:
        """The correctly rounded float of :attr:`p_exact` (``exact_sign_test_p_value``)."""
        return float(self.p_exact)

    @property
    def significant(self) -> bool:
        """``p < 0.05``, compared exactly (``p_exact < 1/20``)."""
        return self.p_exact < ALPHA


def sign_test(improved: int, regressed: int) -> SignTest:
    """Run the sign test on ``improved`` vs ``regressed`` non-tied groups."""
    return SignTest(improved, regressed, sign_test_p(improved, regressed))
