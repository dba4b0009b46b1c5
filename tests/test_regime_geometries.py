"""The near-duplicate conditions separate split geometries: near-duplicates common (tight clusters of four
captions), rare (two planted twin pairs) and absent (captions spread over 64 dimensions). Each geometry's
relation is checked against a brute-force count in float64; condition 2 (errors are near-duplicate
confusions) must be met on the first and not on the others, the micro-batches' descriptive figure must
match the chance rate worked out by hand, and a condition met only at the chance rate is not met."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hnclip.analysis import regime as R

N, DIM, BATCH, EPOCHS = 192, 64, 16, 2


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _split(kind: str, rng: np.random.Generator) -> np.ndarray:
    """N caption features: ``common`` 48 clusters of 4 (cosine ~0.95 inside), ``rare`` spread captions with
    two planted twin pairs, ``absent`` spread captions (cosines ~N(0, 1/64): none near 0.8)."""
    if kind == "common":
        centres = _unit(rng.normal(size=(N // 4, DIM)))
        return _unit(np.repeat(centres, 4, axis=0) + 0.03 * rng.normal(size=(N, DIM)))
    features = _unit(rng.normal(size=(N, DIM)))
    if kind == "rare":
        features[1] = _unit(features[0] + 0.03 * rng.normal(size=DIM))
        features[3] = _unit(features[2] + 0.03 * rng.normal(size=DIM))
    return features


def _brute_partners(features: np.ndarray, z: float = R.NEAR_DUPLICATE_Z, floor: float = R.GEOMETRY_COSINE):
    """The relation by a plain loop: i and j are near-duplicates when their cosine is >= max(mean + z sd,
    floor) of either one's cosines to the others (population sd)."""
    cos = features @ features.T
    n = len(features)
    threshold = []
    for i in range(n):
        others = np.array([cos[i, j] for j in range(n) if j != i])
        threshold.append(max(others.mean() + z * others.std(), floor))
    return [{j for j in range(n) if j != i and (cos[i, j] >= threshold[i] or cos[i, j] >= threshold[j])}
            for i in range(n)]


def _plain_run(features: np.ndarray, noise: float, rng: np.random.Generator) -> R.PlainRun:
    """A "plain FT" run whose image features are its captions' plus noise of norm about ``noise``: it errs
    where captions crowd, and everywhere when the noise drowns the caption."""
    images = _unit(features + noise / np.sqrt(DIM) * rng.normal(size=features.shape))
    run = R.PlainRun("runs/toy/longclip/g0/f1/s0", {"seed": 0, "config": {"seed": 0}}, pd.DataFrame(), {})
    run.features = R.ModelFeatures(images, features)
    return run


def _shuffled_batches(rng: np.random.Generator) -> list[R.MicroBatch]:
    batches = []
    for epoch in range(1, EPOCHS + 1):
        order = rng.permutation(N)
        batches += [R.MicroBatch(epoch, epoch * 100 + b, 0, order[b * BATCH:(b + 1) * BATCH]) for b in range(N // BATCH)]
    return batches


@pytest.fixture(scope="module")
def judged():
    out = {}
    for kind, noise in (("common", 0.8), ("rare", 3.0), ("absent", 3.0)):
        rng = np.random.default_rng(7)
        features = _split(kind, rng)
        near = R.NearDuplicates.of(features)
        run = _plain_run(features, noise, rng)
        batches = {run.run_dir: _shuffled_batches(rng)}
        out[kind] = {"features": features, "near": near,
                     "errors": R.errors_condition([run], np.arange(N), near),
                     "batches": R.batch_figures([run], batches, near)}
    return out


@pytest.mark.parametrize("kind", ["common", "rare", "absent"])
def test_the_relation_matches_a_brute_force_count(judged, kind):
    near, features = judged[kind]["near"], judged[kind]["features"]
    brute = _brute_partners(features)
    assert [set(p) for p in near.partners] == brute
    pairs = sum(len(p) for p in brute) // 2
    assert near.base_rate()["pairs"] == pairs
    assert near.base_rate()["pair_share"] == pytest.approx(pairs / (N * (N - 1) / 2))


def test_the_base_rate_orders_the_geometries(judged):
    rates = {kind: judged[kind]["near"].base_rate() for kind in judged}
    # four to a cluster: every caption has its three cluster-mates (0.95 is above the floor and far above a
    # caption's mean + 1.5 sd, about 0.015 + 1.5 x 0.17)
    assert rates["common"]["partners_mean"] == pytest.approx(3.0) and rates["common"]["with_partner"] == 1.0
    assert rates["rare"]["pairs"] == 2 and rates["rare"]["with_partner"] == pytest.approx(4 / N)
    assert rates["absent"]["pairs"] == 0


def test_errors_are_near_duplicate_confusions_only_where_near_duplicates_crowd(judged):
    common = judged["common"]["errors"]
    for d in R.DIRECTIONS:
        # enough errors to resolve the share, nearly all of them cluster-mates, far above a random wrong
        # answer's 3 of 191
        assert common["values"][f"{d}_errors"] >= 20
        assert common["values"][d] >= 0.95
        assert common["chance"][d] == pytest.approx(3 / (N - 1))
    assert common["decision"] == "met"
    for kind in ("rare", "absent"):
        cond = judged[kind]["errors"]
        assert cond["values"]["i2t_errors"] >= 20 and cond["decision"] == "not met"
        assert cond["values"]["pooled"] <= 0.05


def test_micro_batches_hold_near_duplicates_at_the_shuffled_rate(judged):
    common = judged["common"]["batches"]
    # a random micro-batch misses every pair when its 16 captions come from 16 distinct clusters, one of four
    # captions each: C(48, 16) 4^16 of C(192, 16) batches
    exact = 1 - math.comb(48, 16) * 4 ** 16 / math.comb(N, 16)
    assert common["chance_share"] == pytest.approx(exact, abs=0.02) and exact > 0.85
    assert common["mean_share"] >= 0.8
    rare, absent = judged["rare"]["batches"], judged["absent"]["batches"]
    # a batch holding {0, 1} or {2, 3}: inclusion-exclusion over the two planted pairs
    exact = (2 * math.comb(N - 2, 14) - math.comb(N - 4, 12)) / math.comb(N, 16)
    assert rare["chance_share"] == pytest.approx(exact, abs=0.01) and rare["mean_share"] < 0.3
    assert absent["mean_share"] == 0.0 and absent["chance_share"] == 0.0 and absent["mean_pairs"] == 0.0


def test_a_share_met_only_at_the_chance_rate_is_not_met():
    """Errors whose top-1 lands on a near-duplicate exactly as often as a random wrong answer would: the
    target (80 %) is cleared, chance is not, so the condition is not met. Every caption's three cluster-mates
    are its near-duplicates; with four images and captions to a cluster and one cluster, a wrong answer is
    always a cluster-mate (chance 1)."""
    rng = np.random.default_rng(3)
    features = _unit(np.ones((4, DIM)) + 0.03 * rng.normal(size=(4, DIM)))
    # four captions: the largest of three cosines is at most mean + sqrt(2) sd, below z = 1.5, so the floor
    # decides here (z far below): every pair of the cluster is a near-duplicate
    near = R.NearDuplicates.of(features, z=-10.0)
    assert all(len(p) == 3 for p in near.partners)
    run = _plain_run(features, 0.5, rng)
    cond = R.errors_condition([run], np.arange(4), near)
    errors = cond["values"]["i2t_errors"] + cond["values"]["t2i_errors"]
    assert errors > 0 and cond["values"]["pooled"] == 1.0
    assert all(cond["chance"][d] == 1.0 for d in R.DIRECTIONS if cond["values"][d] is not None)
    assert cond["decision"] == "not met"
