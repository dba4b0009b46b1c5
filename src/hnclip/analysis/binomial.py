"""Intervals for counts: a share of k in n (Wilson's score interval) and a median (order statistics).

Why. The premise figures (§2.4, appendix C) are shares of micro-batches or probed steps: "the loss falls
below 1e-3 on 80 % of batches", "positive in 98 % of measurements". A share of 35 in 36 against 0.98 is
no verdict without its interval, as no retrieval margin is; these are the intervals the premise claims
are decided by. Wilson's interval keeps its coverage near 0 and 1, where the premise's shares live (the
plain Wald interval collapses to a point at k = 0 or k = n). The median's interval is distribution-free:
the number of values below the true median is binomial(n, 1/2).

Micro-batches of one run are not independent draws (neighbouring steps share weights), so these
intervals are narrower than a between-run interval would be; they say what the counted measurements
resolve, no more. Pure Python and numpy (the report's environment).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

__all__ = ["median_interval", "newcombe_interval", "wilson_interval"]


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of the share k / n at ``confidence`` (two-sided)."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"a share needs 0 <= k <= n and n > 0, got k={k}, n={n}")
    z = _z(confidence)
    p = k / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / denominator
    # at k = 0 (k = n) the bound is exactly 0 (1); rounding must not put it on the other side
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def newcombe_interval(k1: int, n1: int, k2: int, n2: int, confidence: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval (his method 10) of the difference k1/n1 - k2/n2 of two independent
    shares, built from their Wilson intervals: it keeps Wilson's coverage near 0 and 1, where a plain Wald
    difference collapses (two shares both at 1 would read as a difference of exactly 0 with no width)."""
    p1, p2 = k1 / n1, k2 / n2
    low1, high1 = wilson_interval(k1, n1, confidence)
    low2, high2 = wilson_interval(k2, n2, confidence)
    difference = p1 - p2
    return (difference - math.sqrt((p1 - low1) ** 2 + (high2 - p2) ** 2),
            difference + math.sqrt((high1 - p1) ** 2 + (p2 - low2) ** 2))


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval of the median of the population ``values`` were drawn from: the order
    statistics x_(j) <= x_(n+1-j) with the largest j such that P(j <= B <= n - j) >= ``confidence``,
    B ~ binomial(n, 1/2) (the values below the median). With too few values for any j (n <= 5 at 95 %),
    the whole range (min, max), which covers with probability 1 - 2^(1-n), less than asked."""
    ordered = sorted(float(v) for v in values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median_interval needs at least one value")
    # cumulative binomial(n, 1/2): P(B < j) for j = 0..n
    log_half = n * math.log(0.5)
    below = [0.0]
    for i in range(n):
        log_pmf = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half
        below.append(below[-1] + math.exp(log_pmf))
    best = 1
    for j in range(1, n // 2 + 1):
        if 1.0 - 2.0 * below[j] >= confidence:
            best = j
    return ordered[best - 1], ordered[n - best]
