"""Caption geometry (appendix A.2) against a brute-force pair loop and a hand-computed 3-caption case."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hnclip.analysis.geometry import caption_geometry, sample_batches


def _unit_rows(n, d, seed):
    """Captions clustered around one direction, so many cosines sit above 0.8 as in dense captions."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * 0.35 + np.ones(d)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_geometry_matches_brute_force_pair_loop():
    feats = _unit_rows(40, 6, seed=3)
    batch_size, n_batches, seed, bins = 8, 5, 11, 40
    geo = caption_geometry(feats, batch_size, n_batches, seed, bins=bins)

    pairs, hardest = [], []
    counts = [0] * bins
    for idx in sample_batches(40, batch_size, n_batches, seed):
        for i in idx:
            best = -math.inf
            for j in idx:
                if i == j:
                    continue
                c = math.fsum(float(a) * float(b) for a, b in zip(feats[i], feats[j], strict=True))
                pairs.append(c)
                best = max(best, c)
                counts[min(int((c + 1.0) / 2.0 * bins), bins - 1)] += 1
            hardest.append(best)
    assert geo["n_pairs"] == len(pairs) == n_batches * batch_size * (batch_size - 1)
    assert geo["mean_offdiag"] == pytest.approx(math.fsum(pairs) / len(pairs), abs=1e-12)
    assert geo["mean_hardest"] == pytest.approx(math.fsum(hardest) / len(hardest), abs=1e-12)
    assert geo["frac_ge_0.8"] == pytest.approx(sum(c >= 0.8 for c in pairs) / len(pairs))
    assert geo["frac_ge_0.9"] == pytest.approx(sum(c >= 0.9 for c in pairs) / len(pairs))
    assert 0 < geo["frac_ge_0.9"] < geo["frac_ge_0.8"] < 1  # the fixture exercises both thresholds
    assert geo["histogram"]["counts"] == counts
    assert geo["histogram"]["bin_edges"][0] == -1.0 and geo["histogram"]["bin_edges"][-1] == 1.0


def test_geometry_of_three_captions_by_hand():
    # angles 0, 60 and 90 degrees: cos = 0.5 (0,1), 0 (0,2), cos 30 = 0.8660 (1,2)
    angles = np.radians([0.0, 60.0, 90.0])
    feats = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    geo = caption_geometry(feats, batch_size=3, n_batches=2, seed=0)
    c12 = math.sqrt(3) / 2
    assert geo["mean_offdiag"] == pytest.approx((0.5 + 0.0 + c12) / 3)
    assert geo["mean_hardest"] == pytest.approx((0.5 + c12 + c12) / 3)  # per caption: 0.5, c12, c12
    assert geo["frac_ge_0.8"] == pytest.approx(1 / 3)  # the (1,2) pair, counted in both orders
    assert geo["frac_ge_0.9"] == 0.0


def test_batches_are_distinct_within_and_reproducible_per_seed():
    a = sample_batches(100, 16, 4, seed=7)
    b = sample_batches(100, 16, 4, seed=7)
    c = sample_batches(100, 16, 4, seed=8)
    assert all(len(set(x.tolist())) == 16 for x in a)
    assert all((x == y).all() for x, y in zip(a, b, strict=True))
    assert any((x != y).any() for x, y in zip(a, c, strict=True))


def test_geometry_rejects_unnormalised_features_and_oversized_batches():
    feats = _unit_rows(10, 4, seed=0)
    feats[3] *= 2
    with pytest.raises(ValueError, match="row 3 has norm 2"):
        caption_geometry(feats, 4, 1, 0)
    with pytest.raises(ValueError, match="batch_size must be in"):
        caption_geometry(_unit_rows(10, 4, seed=0), 11, 1, 0)
