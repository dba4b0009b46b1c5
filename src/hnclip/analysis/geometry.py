"""Caption geometry (the paper's appendix A.2): how near-duplicate a training batch's captions are.

The HN margin only matters if captions in a batch resemble each other: the paper reports, for DOCCI-like
benchmarks under Long-CLIP-L's text encoder, a mean off-diagonal caption-caption cosine of 0.84-0.88, a
hardest companion (per caption, its most similar other caption) of 0.92-0.94, and 86-99 % of negatives
at cosine >= 0.8. We measure the same quantities over random batches of the training batch size, because
the loss only ever sees captions batched together, never the whole split.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["THRESHOLDS", "batch_geometry", "caption_geometry", "sample_batches", "unit_features"]

THRESHOLDS = (0.8, 0.9)
_NORM_TOLERANCE = 1e-3


def sample_batches(n: int, batch_size: int, n_batches: int, seed: int) -> list[np.ndarray]:
    """``n_batches`` index arrays, each ``batch_size`` distinct captions drawn without replacement.

    Batches are independent draws (captions may recur across batches), like epochs of a shuffled loader.
    """
    if n < 2:
        raise ValueError(f"caption geometry needs at least 2 captions, got {n}")
    if not 2 <= batch_size <= n:
        raise ValueError(f"batch_size must be in [2, {n}] (the number of captions), got {batch_size}")
    if n_batches < 1:
        raise ValueError(f"n_batches must be >= 1, got {n_batches}")
    rng = np.random.default_rng(seed)
    return [rng.choice(n, size=batch_size, replace=False) for _ in range(n_batches)]


def caption_geometry(text_features, batch_size: int, n_batches: int, seed: int, bins: int = 200) -> dict:
    """Statistics of off-diagonal caption-caption cosine within random training batches.

    ``text_features``: [N, D] L2-normalised caption features (numpy array or CPU tensor), in float64 for
    the statistics. Pairs are pooled over batches: ``mean_offdiag`` and ``frac_ge_*`` are over all ordered
    off-diagonal pairs (i != j) of all batches, ``mean_hardest`` over every caption of every batch of its
    max cosine to the batch's other captions. The histogram covers [-1, 1] in ``bins`` equal bins.
    """
    features = unit_features(text_features)
    batches = sample_batches(features.shape[0], batch_size, n_batches, seed)
    return {
        "n_captions": int(features.shape[0]),
        "batch_size": int(batch_size),
        "n_batches": int(n_batches),
        "seed": int(seed),
        **batch_geometry(features, batches, bins),
    }


def unit_features(text_features) -> np.ndarray:
    """``text_features`` as a float64 [N, D] array, refused unless every row has norm 1 (to 1e-3)."""
    features = np.asarray(text_features, dtype=np.float64)
    if features.ndim != 2:
        raise ValueError(f"text_features must be [N, D], got shape {features.shape}")
    norms = np.linalg.norm(features, axis=1)
    bad = np.flatnonzero(np.abs(norms - 1.0) > _NORM_TOLERANCE)
    if bad.size:
        raise ValueError(f"text_features row {bad[0]} has norm {norms[bad[0]]:.4f}; L2-normalise the features first")
    return features


def batch_geometry(features: np.ndarray, batches: Iterable[np.ndarray], bins: int = 200) -> dict:
    """The pooled statistics of :func:`caption_geometry` over given batches (index arrays into ``features``,
    each of at least 2 distinct rows; sizes may differ): ``n_pairs``, ``mean_offdiag``, ``mean_hardest``,
    ``frac_ge_<t>`` for each of :data:`THRESHOLDS` and the histogram. ``features``: L2-normalised [N, D]
    float64 rows (:func:`unit_features`). The regime conditions measure the trainer's own micro-batches
    with it (:mod:`hnclip.analysis.regime`)."""
    edges = np.linspace(-1.0, 1.0, bins + 1)
    counts = np.zeros(bins, dtype=np.int64)
    total = hardest_sum = 0.0
    n_pairs = n_captions = 0
    at_least = dict.fromkeys(THRESHOLDS, 0)
    for idx in batches:
        idx = np.asarray(idx)
        if idx.size < 2:
            raise ValueError(f"a batch needs at least 2 captions, got {idx.size}")
        off_diagonal = ~np.eye(idx.size, dtype=bool)
        batch = features[idx]
        sims = np.clip(batch @ batch.T, -1.0, 1.0)
        pairs = sims[off_diagonal]
        counts += np.histogram(pairs, bins=edges)[0]
        total += pairs.sum()
        n_pairs += pairs.size
        for t in THRESHOLDS:
            at_least[t] += int((pairs >= t).sum())
        hardest_sum += np.where(off_diagonal, sims, -np.inf).max(axis=1).sum()
        n_captions += idx.size
    if not n_pairs:
        raise ValueError("batch_geometry needs at least one batch")
    return {
        "n_pairs": int(n_pairs),
        "mean_offdiag": float(total / n_pairs),
        "mean_hardest": float(hardest_sum / n_captions),
        **{f"frac_ge_{t:g}": at_least[t] / n_pairs for t in THRESHOLDS},
        "histogram": {"counts": counts.tolist(), "bin_edges": edges.tolist()},
    }
