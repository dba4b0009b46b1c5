"""The bootstrap behind every interval, against independent computations (issue: every number with its
uncertainty): a direct numpy bootstrap, the binomial standard error, calibration on synthetic pairs,
pairing and the size a difference needs to be decided."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hnclip.analysis.bootstrap import (
    BootstrapSettings,
    Estimate,
    Outcomes,
    Samples,
    interval,
    judge,
    replicates,
)
from hnclip.evaluate import recall_at_k


def _outcomes(i2t_hits, t2i_hits=None, text_image=None, split="bench/test"):
    i2t = np.where(np.asarray(i2t_hits, bool), 0, 9)
    t2i_hits = i2t_hits if t2i_hits is None else t2i_hits
    t2i = np.where(np.asarray(t2i_hits, bool), 0, 9)
    text_image = np.arange(len(t2i)) if text_image is None else text_image
    return Outcomes(i2t, t2i, text_image, split)


def _cell(outcomes, metric="i2t_r1", seed="0"):
    return Estimate.of(Samples((seed,), (outcomes,)), metric, outcomes.value(metric))


def test_bootstrap_of_a_known_rank_array_matches_a_direct_numpy_bootstrap():
    rng = np.random.default_rng(7)
    hits = rng.random(400) < 0.7
    settings = BootstrapSettings(resamples=20000, seed=3)
    ours = interval(_cell(_outcomes(hits)), settings)
    # the textbook percentile bootstrap, written out: resample queries, R@1 of each resample
    ref_rng = np.random.default_rng(123)
    draws = hits[ref_rng.integers(0, hits.size, size=(20000, hits.size))].mean(axis=1) * 100
    low, high = np.quantile(draws, [0.025, 0.975])
    assert ours[0] == pytest.approx(low, abs=0.4) and ours[1] == pytest.approx(high, abs=0.4)
    # and the binomial standard error: 100 * sqrt(p (1 - p) / n)
    p = hits.mean()
    se = 100 * math.sqrt(p * (1 - p) / hits.size)
    assert (ours[1] - ours[0]) / (2 * 1.96) == pytest.approx(se, rel=0.06)


def test_captions_are_resampled_with_their_image():
    # 3 captions per image, all of one image hit or all miss: the caption-level R@1 varies like the
    # image-level one (n images), not like 3n independent captions
    rng = np.random.default_rng(0)
    image_hit = rng.random(300) < 0.5
    text_image = np.repeat(np.arange(300), 3)
    outcomes = _outcomes(image_hit, image_hit[text_image], text_image)
    width = np.subtract(*interval(_cell(outcomes, "t2i_r1"), BootstrapSettings(resamples=5000))[::-1])
    se_images = 100 * math.sqrt(0.25 / 300)
    assert width / (2 * 1.96) == pytest.approx(se_images, rel=0.1)  # sqrt(3) wider than captions alone


def test_ranks_stored_by_the_evaluation_recompute_its_recall():
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    images = torch.nn.functional.normalize(torch.randn(30, 8, generator=gen), dim=1)
    texts = torch.nn.functional.normalize(images.repeat_interleave(2, 0) + 0.8 * torch.randn(60, 8, generator=gen), dim=1)
    ids = torch.arange(30).repeat_interleave(2)
    metrics = recall_at_k(images, texts, (1, 5), ids, return_ranks=True)
    ranks = metrics["ranks"]
    outcomes = Outcomes(ranks["i2t"], ranks["t2i"], ranks["text_image"])
    for metric in ("i2t_r1", "i2t_r5", "t2i_r1", "t2i_r5"):
        assert outcomes.value(metric) == pytest.approx(metrics[metric])


def test_paired_interval_of_two_identical_models_covers_zero_about_95_percent_of_the_time():
    # two models with the same per-query difficulty and independent luck: the true difference is 0
    covered, repetitions = 0, 300
    for rep in range(repetitions):
        rng = np.random.default_rng(1000 + rep)
        difficulty = rng.beta(2, 1, size=300)
        a = _outcomes(rng.random(300) < difficulty)
        b = _outcomes(rng.random(300) < difficulty)
        low, high = interval(_cell(a) - _cell(b), BootstrapSettings(resamples=1000, seed=rep))
        covered += low <= 0 <= high
    share = covered / repetitions
    se = math.sqrt(0.95 * 0.05 / repetitions)
    assert abs(share - 0.95) < 3 * se, share


def test_pairing_narrows_the_interval_of_correlated_models():
    rng = np.random.default_rng(5)
    base = rng.random(500) < 0.6
    other = base.copy()
    flip = rng.choice(500, 25, replace=False)
    other[flip] = ~other[flip]
    settings = BootstrapSettings(resamples=4000)
    paired = interval(_cell(_outcomes(base)) - _cell(_outcomes(other)), settings)
    # the same outcomes on a split of another name: drawn independently (unpaired)
    unpaired = interval(_cell(_outcomes(base)) - _cell(_outcomes(other, split="elsewhere/test")), settings)
    assert (paired[1] - paired[0]) < 0.5 * (unpaired[1] - unpaired[0])


@pytest.mark.parametrize("n, decided", [(5000, True), (100, False)])
def test_three_points_are_decided_on_5000_queries_not_on_100(n, decided):
    rng = np.random.default_rng(11)
    a = rng.random(n) < 0.70
    b = rng.random(n) < 0.70
    # move B's hit rate exactly 3 points below A's
    a_rate, target = a.mean(), a.mean() - 0.03
    b = np.zeros(n, bool)
    b[rng.permutation(n)[: round(target * n)]] = True
    margin = _cell(_outcomes(a)) - _cell(_outcomes(b))
    assert float(margin) == pytest.approx(3.0, abs=100 / n)
    condition = judge(margin, False, BootstrapSettings())
    assert (condition.status == "met") is decided
    assert a_rate > 0


def test_seeds_are_resampled_then_queries_and_paired_by_seed():
    rng = np.random.default_rng(2)
    seeds_a = [_outcomes(rng.random(200) < 0.6) for _ in range(3)]
    cell_a = Estimate(np.mean([o.value("i2t_r1") for o in seeds_a]),
                      ((1.0, Samples(("0", "1", "2"), tuple(seeds_a)), "i2t_r1"),))
    values = replicates(cell_a, BootstrapSettings(resamples=3000))
    assert values.shape == (3000,)
    # one seed's interval alone is narrower than the three seeds' when the seeds differ a lot
    spread = [_outcomes(rng.random(200) < p) for p in (0.3, 0.6, 0.9)]
    wide = Estimate(60.0, ((1.0, Samples(("0", "1", "2"), tuple(spread)), "i2t_r1"),))
    low, high = interval(wide, BootstrapSettings(resamples=3000))
    single_low, single_high = interval(_cell(spread[1]), BootstrapSettings(resamples=3000))
    assert high - low > 2 * (single_high - single_low)
    # a difference of a cell with itself is exactly zero in every replicate (same seed draw, same queries)
    assert np.all(replicates(wide - wide, BootstrapSettings()) == 0)


def test_intervals_are_deterministic_and_independent_of_order():
    rng = np.random.default_rng(4)
    a, b = _outcomes(rng.random(300) < 0.5), _outcomes(rng.random(300) < 0.6)
    first = interval(_cell(a), BootstrapSettings(seed=9))
    interval(_cell(b), BootstrapSettings(seed=9))
    assert interval(_cell(a), BootstrapSettings(seed=9)) == first
    assert not np.array_equal(replicates(_cell(a), BootstrapSettings(seed=10)),
                              replicates(_cell(a), BootstrapSettings(seed=9)))


def test_ties_pass_conditions_hold_unless_refuted():
    assert judge(Estimate.constant(0.0), True).status == "met"
    assert judge(1.0, True, bounds=(-0.5, 2.0)).status == "met"
    assert judge(-1.0, True, bounds=(-2.0, -0.1)).status == "failed"
    assert judge(1.0, False, bounds=(-0.5, 2.0)).status == "undecided"
    assert judge(1.0, False, bounds=(0.1, 2.0)).status == "met"


def _record(method, hits, seed=0, gamma=0.0):
    ranks = [0 if h else 4 for h in hits]
    r1 = 100.0 * float(np.mean(hits))
    metrics = {f"{d}_r{k}": (r1 if k == 1 else 100.0) for d in ("i2t", "t2i") for k in (1, 5, 10)}
    run = {"train_set": "bench", "method": method, "gamma": gamma, "fraction": 1.0, "seed": seed}
    return ({"row": method, "group": "Bench", "variant": None, "x": None, "run": run, "eval_benchmark": "bench"},
            {"run": run, "eval_benchmark": "bench", "metrics": metrics,
             "ranks": {"i2t": ranks, "t2i": ranks, "text_image": list(range(len(ranks)))}})


def test_tables_carry_intervals_in_their_csv_and_text(tmp_path):
    from hnclip.analysis.table_format import read_table_csv
    from hnclip.analysis.tables import build_table, write_table

    rng = np.random.default_rng(0)
    cells = [_record("A", rng.random(200) < 0.7), _record("B", rng.random(200) < 0.5)]
    spec = {"experiment": "main", "scale": "toy", "cells": [c for c, _ in cells],
            "statistics": {"resamples": 500, "seed": 1}}
    table = build_table(spec, [r for _, r in cells])
    low = table.loc["A", ("Bench", "I->T", "R@1", "ci_low")]
    high = table.loc["A", ("Bench", "I->T", "R@1", "ci_high")]
    mean = table.loc["A", ("Bench", "I->T", "R@1", "mean")]
    p = mean / 100
    half = 1.96 * 100 * math.sqrt(p * (1 - p) / 200)  # the binomial interval, independently
    assert low < mean < high and (high - low) / 2 == pytest.approx(half, rel=0.2)
    paths = write_table(table, tmp_path / "main", "Main table")
    tidy = read_table_csv(paths["csv"])
    line = tidy[(tidy["method"] == "A") & (tidy["direction"] == "I->T") & (tidy["metric"] == "R@1")].iloc[0]
    assert line["ci_low"] == pytest.approx(low) and line["ci_high"] == pytest.approx(high)
    assert f"[{low:.1f}, {high:.1f}]" in paths["md"].read_text()


def test_epoch_outcomes_are_read_back_from_the_training_log(tmp_path):
    from hnclip.analysis.records import load_epoch_outcomes

    (tmp_path / "epoch_ranks.csv").write_text("epoch,i2t,t2i,text_image\n1,0 3 0,0 0 2 1,0 0 1 2\n2,0 0 0,0 0 0 0,0 0 1 2\n")
    outcomes = load_epoch_outcomes(tmp_path, "bench/test")
    assert sorted(outcomes) == [1, 2]
    assert outcomes[1].value("i2t_r1") == pytest.approx(200 / 3)
    assert outcomes[1].value("t2i_r1") == pytest.approx(50.0)  # captions 3 and 4 miss at rank 1
    assert outcomes[2].value("t2i_r1") == 100.0
    assert load_epoch_outcomes(tmp_path / "none", "bench/test") == {}
