"""Wilson's interval against published values and the median's order-statistic interval by hand."""

import pytest

from hnclip.analysis.binomial import median_interval, wilson_interval


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    # Newcombe (1998), Statistics in Medicine 17:857-872, Table II, method 3 (Wilson score, no correction)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_interval_matches_newcombes_table(k, n, low, high):
    assert wilson_interval(k, n, 0.95) == pytest.approx((low, high), abs=1e-4)


def test_wilson_interval_is_exact_at_the_ends_and_refuses_impossible_counts():
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0
    # 35 of 36 positive: the point 0.972 is below 0.98, the interval is not
    low, high = wilson_interval(35, 36)
    assert low < 0.98 < high
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(0, 0)


def test_median_interval_takes_the_order_statistics_a_binomial_half_allows():
    # n = 10: P(B <= 1) = 11/1024, so [x_(2), x_(9)] covers with 1 - 22/1024 = 0.979 >= 0.95, while
    # [x_(3), x_(8)] covers with 1 - 2 * 56/1024 = 0.891
    values = [10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0]
    assert median_interval(values, 0.95) == (2.0, 9.0)
    assert median_interval(values, 0.80) == (3.0, 8.0)  # 0.891 >= 0.80; [x_(4), x_(7)]: 1 - 2 * 176/1024 = 0.656
    # too few values for any order statistic at 95 %: the whole range
    assert median_interval([3.0, 1.0, 2.0], 0.95) == (1.0, 3.0)
    # thousands of values: no overflow of 2^n
    big = list(range(5001))
    low, high = median_interval(big, 0.95)
    assert low < 2500 < high and high - low < 200


def test_newcombe_difference_matches_his_published_examples():
    """Newcombe (1998), "Interval estimation for the difference between independent proportions", Statistics
    in Medicine 17: 873-890, Table II, method 10 (hybrid score, from Wilson's intervals)."""
    from hnclip.analysis.binomial import newcombe_interval

    assert newcombe_interval(56, 70, 48, 80) == pytest.approx((0.0524, 0.3339), abs=5e-5)
    assert newcombe_interval(9, 10, 3, 10) == pytest.approx((0.1705, 0.8090), abs=5e-5)
    # equal shares: an interval around 0, symmetric when the counts are
    low, high = newcombe_interval(5, 10, 5, 10)
    assert low == pytest.approx(-high) and low < 0 < high
