"""The exact McNemar p-value (spear/mcnemar.py) against values computed independently: by hand
from the binomial tail, and by brute force over every outcome of the discordant pairs."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from spear.mcnemar import p_value, p_value_exact


@pytest.mark.parametrize("b,c,expected", [
    (1, 9, 0.021484375),  # 2 * (1 + 10) / 1024
    (0, 5, 0.0625),  # 2 / 32
    (5, 5, 1.0),  # the tail past the middle: capped at 1
    (0, 0, 1.0),  # no discordant pair: no evidence
    (2, 10, 158 / 4096),  # 2 * (1 + 12 + 66) / 4096
    (3, 3, 1.0),
    (0, 1, 1.0),  # 2 * 1/2
    (4, 16, 12392 / 2**20),  # 2 * (1 + 20 + 190 + 1140 + 4845) / 2**20
])
def test_known_values(b, c, expected):
    assert p_value(b, c) == expected


def test_the_p_value_is_symmetric_in_b_and_c():
    for b, c in itertools.product(range(12), repeat=2):
        assert p_value_exact(b, c) == p_value_exact(c, b)


def brute_force(b: int, c: int) -> Fraction:
    """Sum the probability of every way the b + c discordant pairs could fall that is at least
    as extreme (as far from the middle) as what was seen."""
    n = b + c
    seen = abs(b - c)
    extreme = sum(1 for outcome in itertools.product((0, 1), repeat=n)
                  if abs(2 * sum(outcome) - n) >= seen)
    return Fraction(extreme, 2 ** n)


@pytest.mark.parametrize("b,c", [(0, 3), (1, 6), (2, 2), (3, 8), (0, 12), (5, 7), (6, 1)])
def test_equals_the_brute_force_sum_over_all_outcomes(b, c):
    assert p_value_exact(b, c) == min(Fraction(1), brute_force(b, c))


@pytest.mark.parametrize("b,c", [(-1, 3), (1.5, 2), (True, 3), ("2", 2)])
def test_a_count_that_is_not_a_natural_number_is_refused(b, c):
    with pytest.raises(ValueError, match="discordant counts are integers >= 0"):
        p_value(b, c)
