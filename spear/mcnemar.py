"""The exact two-sided McNemar test of a paired eval (seed 001 step 8: "exact McNemar p-value on
the observed discordant counts").

Two models answer the same tasks; only the discordant pairs carry evidence: b tasks the first
passes and the second fails, c the reverse. Under the null hypothesis (no difference) each
discordant pair goes either way with probability 1/2, so min(b, c) is binomial(b + c, 1/2) in
its lower tail, doubled for two sides. Exact integer arithmetic: the counts of a paired eval are
small, and a p-value near the threshold must not depend on rounding.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb


def p_value_exact(b: int, c: int) -> Fraction:
    """The two-sided exact p-value as a fraction: min(1, 2 * P[X <= min(b, c)]), X ~ Bin(b+c, 1/2).

    No discordant pairs is no evidence either way: 1.
    """
    if isinstance(b, bool) or isinstance(c, bool) or not isinstance(b, int) \
            or not isinstance(c, int) or b < 0 or c < 0:
        raise ValueError(f"discordant counts are integers >= 0, got b={b!r}, c={c!r}")
    n = b + c
    if n == 0:
        return Fraction(1)
    tail = sum(comb(n, i) for i in range(min(b, c) + 1))
    return min(Fraction(1), Fraction(2 * tail, 2 ** n))


def p_value(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value of discordant counts b and c."""
    return float(p_value_exact(b, c))
