"""Nested deterministic fraction subsets and their one-id-per-line files."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import numpy as np
import pytest

from hnclip.data.subsets import read_subset, subset_ids, write_subset

IDS = [f"img_{k:05d}" for k in range(1000)]
FRACTIONS = (0.01, 0.1, 0.25, 0.5, 0.75, 1.0)


def _ceil_decimal(fraction: str, n: int) -> int:
    """ceil(fraction * n) in integer arithmetic from the decimal string: the hand reference."""
    whole, _, digits = fraction.partition(".")
    numerator, denominator = int(whole + digits), 10 ** len(digits)
    return max(1, -(-numerator * n // denominator))


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_smaller_fraction_is_subset_of_larger(seed):
    subsets = [set(subset_ids(IDS, f, seed)) for f in FRACTIONS]
    for small, large in itertools.pairwise(subsets):
        assert small < large
    assert subsets[-1] == set(IDS)


def test_same_set_and_seed_give_same_subset_whatever_the_input_order():
    shuffled = IDS[:]
    random.Random(5).shuffle(shuffled)
    for fraction in FRACTIONS:
        chosen = subset_ids(IDS, fraction, seed=2)
        again = subset_ids(shuffled, fraction, seed=2)
        assert set(again) == set(chosen)
        assert again == [i for i in shuffled if i in set(chosen)]  # returned in the input's order
        assert chosen == [i for i in IDS if i in set(chosen)]


@pytest.mark.parametrize(("n", "fraction"), [
    (30, "0.1"), (100, "0.07"), (100, "0.55"), (1000, "0.01"), (7, "0.5"), (3, "0.001"), (1, "0.25"),
    (100, "1.0"), (49, "0.02"),
])
def test_size_is_ceil_of_fraction_times_n_at_least_one(n, fraction):
    # 0.07 and 0.55: the float product lands just above an integer (7.000000000000001, 55.00000000000001)
    ids = [str(k) for k in range(n)]
    assert len(subset_ids(ids, float(fraction), seed=0)) == _ceil_decimal(fraction, n)


def test_fraction_objects_and_integer_ids_work():
    assert len(subset_ids(range(9), Fraction(1, 3), seed=0)) == 3
    assert set(subset_ids(range(100), 0.2, seed=0)) <= set(range(100))


def test_seeds_draw_different_subsets_spread_over_the_ids():
    draws = [subset_ids(IDS, 0.1, seed) for seed in range(5)]
    assert len({tuple(d) for d in draws}) == 5
    for draw in draws:
        positions = np.array([IDS.index(i) for i in draw])
        # a uniform draw of 100 of 1000 has mean position 499.5 with sd ~27: not a prefix, not a stride
        assert abs(positions.mean() - 499.5) < 120
        assert len(np.unique(np.diff(positions))) > 10


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, float("nan"), float("inf"), True, "0.5", None])
def test_fraction_outside_zero_one_is_rejected_naming_the_value(fraction):
    with pytest.raises(ValueError, match=f"fraction .*{repr(fraction)[:4]}"):
        subset_ids(IDS, fraction, seed=0)


def test_duplicate_or_no_ids_are_rejected():
    with pytest.raises(ValueError, match="'img_00003'"):
        subset_ids(IDS + ["img_00003"], 0.5, seed=0)
    with pytest.raises(ValueError, match="empty"):
        subset_ids([], 0.5, seed=0)


def test_subset_file_round_trip_keeps_order(tmp_path):
    chosen = subset_ids(IDS, 0.25, seed=3)
    write_subset(chosen, tmp_path / "sub" / "f0.25_s3.txt")
    assert read_subset(tmp_path / "sub" / "f0.25_s3.txt") == chosen
    assert (tmp_path / "sub" / "f0.25_s3.txt").read_text(encoding="utf-8") == "".join(i + "\n" for i in chosen)


def test_subset_file_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("a\nb\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.txt:3: id 'a' repeats line 1"):
        read_subset(path)
    path.write_text("a\n\nb\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.txt:2: blank line"):
        read_subset(path)
    with pytest.raises(ValueError, match="'x\\\\ny'"):
        write_subset(["ok", "x\ny"], tmp_path / "w.txt")
    assert not (tmp_path / "w.txt").exists()
