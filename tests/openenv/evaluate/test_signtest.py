"""The exact sign test against independently computed binomial sums."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.openenv.evaluate import sign_test, sign_test_p

counts = st.integers(min_value=0, max_value=300)


def reference(improved: int, regressed: int) -> Fraction:
    n = improved + regressed
    if n == 0:
        return Fraction(1)
    k = min(improved, regressed)
    tail = 0
    for i in range(k + 1):
        tail += math.factorial(n) // (math.factorial(i) * math.factorial(n - i))
    return min(Fraction(1), Fraction(2 * tail) / Fraction(2**n))


def test_twenty_to_zero_is_exactly_two_over_two_to_the_twenty() -> None:
    p = sign_test_p(20, 0)
    assert p == Fraction(2, 2**20)
    assert sign_test(20, 0).p_value == 0.0000019073486328125
    assert sign_test(0, 20).p_value == 2 / 2**20


def test_no_untied_groups_gives_one() -> None:
    assert sign_test_p(0, 0) == 1
    assert sign_test(0, 0).p_value == 1.0
    assert not sign_test(0, 0).significant


@settings(deadline=None)
@given(counts, counts)
def test_matches_the_binomial_sum(improved: int, regressed: int) -> None:
    exact = sign_test_p(improved, regressed)
    assert exact == reference(improved, regressed)
    n, k = improved + regressed, min(improved, regressed)
    if n:
        assert exact == min(1, Fraction(2 * sum(math.comb(n, i) for i in range(k + 1)), 2**n))
    assert sign_test(improved, regressed).p_value == float(exact)


@settings(deadline=None)
@given(counts, counts)
def test_symmetric_and_bounded(improved: int, regressed: int) -> None:
    p = sign_test_p(improved, regressed)
    assert p == sign_test_p(regressed, improved)
    assert 0 < p <= 1
    assert 0.0 < sign_test(improved, regressed).p_value <= 1.0
    if improved == regressed:
        assert p == 1


@given(st.integers(min_value=1, max_value=60))
def test_more_lopsided_is_more_significant(n: int) -> None:
    values = [sign_test_p(n - k, k) for k in range(n // 2 + 1)]
    assert values == sorted(values)


def test_significance_threshold_is_exact() -> None:
    # 15 vs 5: p = 2 * sum_{i<=5} C(20, i) / 2^20 = 0.0413...; 14 vs 6: 0.1153...
    assert sign_test(15, 5).significant
    assert not sign_test(14, 6).significant
    assert sign_test(5, 0).p_value == 0.0625
    assert not sign_test(5, 0).significant
    assert sign_test(6, 0).significant


@pytest.mark.parametrize("bad", [-1, True, 1.0])
def test_counts_must_be_non_negative_integers(bad: object) -> None:
    with pytest.raises(ValueError, match="non-negative integer"):
        sign_test_p(bad, 0)  # type: ignore[arg-type]
