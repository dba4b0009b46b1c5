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

__all__ = ["LEAST_INFONCE_STEPS", "THRESHOLDS", "batch_geometry", "caption_geometry", "effective_dimensions",
           "least_infonce", "least_infonce_batches", "least_infonce_scenes", "sample_batches", "unit_features"]

THRESHOLDS = (0.8, 0.9)
_NORM_TOLERANCE = 1e-3
# Adam steps and rate of :func:`least_infonce`: on the toy's default slice 2,000 steps found the same share
# of micro-batches below 1e-3 as 600 (benchmarks/README.md in git history, "toy_slice.py")
LEAST_INFONCE_STEPS = 600
LEAST_INFONCE_LR = 0.02
# :func:`least_infonce_scenes`: Adam steps, each on this many random partitions of the scenes; on the toy's
# default slice 1,000 to 5,000 steps at rates 0.005-0.1 found the same median within 0.002
# (benchmarks/README.md in git history, "toy_slice.py")
LEAST_INFONCE_SCENE_STEPS = 1000
LEAST_INFONCE_SCENE_PARTITIONS = 4


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


def effective_dimensions(features) -> float:
    """In how many directions the rows spread: the participation ratio (sum l)^2 / sum l^2 of the
    eigenvalues l of their covariance (k for rows spread evenly over k orthogonal directions, 1 for rows on
    one line). Why it matters for saturation: captions crowded at one mean cosine leave an image feature room
    to beat every other caption by the ~0.1 cosine that InfoNCE < 1e-3 needs only if they differ in enough
    directions (benchmarks/README.md in git history, "caption_rank.py": isotropic captions at the toy's mean cosine reproduce
    its geometry and its unsaturable micro-batches in 4 dimensions, the paper's geometry and saturation in
    12-16)."""
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2:
        raise ValueError(f"features must be [N, D] with N >= 2, got shape {x.shape}")
    variances = np.linalg.svd(x - x.mean(0), compute_uv=False) ** 2
    total = variances.sum()
    return float(total ** 2 / (variances ** 2).sum()) if total > 0 else 0.0


def least_infonce(captions: np.ndarray, logit_scale: float, steps: int = LEAST_INFONCE_STEPS,
                  lr: float = LEAST_INFONCE_LR) -> float:
    """The least symmetric standard InfoNCE of one batch over every choice of unit image features.

    What the captions' geometry leaves of saturation (the paper's §2.4: InfoNCE < 1e-3): with the text
    features fixed (``captions``, unit [B, D] rows, B >= 2), the batch's B image features are free unit
    vectors, started at the captions and moved by Adam on the loss at ``logit_scale``; the least loss
    seen is returned. No image tower reaches less against these captions. The value found is an upper
    estimate of that least loss (the loss is not convex on the sphere, and far below the threshold it is
    too flat to descend): against the closed form for two captions at cosine c, log(1 + exp(-s sqrt(2 (1 -
    c)))), it is within 2 % at half a degree and s = 100 (0.35), within 10 % at 5 degrees (1.6e-4, near
    the saturation threshold 1e-3), and 1e8 times too high at 20 degrees (8e-8 for 8e-16), so a share
    below the threshold may be undercounted, never overcounted. A repeated caption costs log 2 on each of
    its rows, which it finds. float64 throughout, deterministic on one machine.
    """
    return float(least_infonce_batches(np.asarray(captions)[None], logit_scale, steps, lr)[0])


def least_infonce_batches(captions: np.ndarray, logit_scale: float, steps: int = LEAST_INFONCE_STEPS,
                          lr: float = LEAST_INFONCE_LR) -> np.ndarray:
    """:func:`least_infonce` of K batches of the same size at once (``captions`` [K, B, D]): one Adam run on
    the sum of their losses, which is K independent runs (Adam moves each coordinate by its own gradient,
    and each batch's loss touches only its own image features), at the cost of about one."""
    import torch  # lazy: the geometry statistics above need numpy only

    captions = np.asarray(captions, dtype=np.float64)
    if captions.ndim != 3 or captions.shape[1] < 2:
        raise ValueError(f"captions must be [K, B, D] with B >= 2, got shape {captions.shape}")
    k, b, d = captions.shape
    texts = torch.from_numpy(unit_features(captions.reshape(k * b, d)).reshape(k, b, d))
    free = texts.clone().requires_grad_(True)
    optimiser = torch.optim.Adam([free], lr=lr)
    least = torch.full((k,), float("inf"), dtype=torch.float64)
    for _ in range(steps + 1):
        losses = _batched_infonce(torch.nn.functional.normalize(free, dim=-1), texts, logit_scale)
        least = torch.minimum(least, losses.detach())
        optimiser.zero_grad()
        losses.sum().backward()
        optimiser.step()
    return least.numpy()


def least_infonce_scenes(captions: np.ndarray, evaluation: np.ndarray, logit_scale: float,
                         steps: int = LEAST_INFONCE_SCENE_STEPS, lr: float = LEAST_INFONCE_LR,
                         partitions: int = LEAST_INFONCE_SCENE_PARTITIONS, seed: int = 0) -> np.ndarray:
    """Standard InfoNCE of each ``evaluation`` micro-batch when each scene has one image feature, chosen for
    the least mean loss over random micro-batches: what the captions leave of saturation to an image tower.

    :func:`least_infonce_batches` fits a batch's image features to that batch's captions alone, so a scene
    may point one way in one batch and another way in the next. An image tower cannot: it gives a scene one
    feature whatever batch the scene lands in, and must set it apart from every caption it might meet.
    Here ``captions`` ([N, D] unit rows, one per scene) are fixed and the N image features are free unit
    vectors, started at the captions and moved by Adam on the mean loss over ``partitions`` fresh random
    partitions of the N scenes into micro-batches of the evaluation's size B per step (``seed`` draws them;
    a remainder of N mod B sits out that partition). The losses returned are those of the ``evaluation``
    micro-batches ([K, B] row indices) at the final features: a partition the features were not fitted to,
    as epoch 1's micro-batches are to a pretrained tower. No image tower reaches a lower mean loss over
    random micro-batches against these captions (up to the optimiser's upper estimate, as in
    :func:`least_infonce`); a tower could trade mean loss for a larger share below a threshold, so a share
    read from these losses describes the optimum of the mean, not a strict bound. With N = B there is one
    partition, and the loss approaches :func:`least_infonce`'s closed forms. float64, deterministic on one machine.
    """
    import torch

    texts = torch.from_numpy(unit_features(np.asarray(captions, dtype=np.float64)))
    evaluation = np.asarray(evaluation)
    if evaluation.ndim != 2 or evaluation.shape[1] < 2 or evaluation.shape[1] > len(texts):
        raise ValueError(f"evaluation must be [K, B] row indices with 2 <= B <= {len(texts)} (the captions), "
                         f"got shape {evaluation.shape}")
    n, b = len(texts), evaluation.shape[1]
    rng = np.random.default_rng(seed)
    free = texts.clone().requires_grad_(True)
    optimiser = torch.optim.Adam([free], lr=lr)
    for _ in range(steps):
        rows = torch.from_numpy(np.concatenate([rng.permutation(n)[:n // b * b].reshape(-1, b)
                                                for _ in range(partitions)]))
        loss = _batched_infonce(torch.nn.functional.normalize(free, dim=-1)[rows], texts[rows], logit_scale).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        rows = torch.from_numpy(evaluation)
        return _batched_infonce(torch.nn.functional.normalize(free, dim=-1)[rows], texts[rows], logit_scale).numpy()


def _batched_infonce(images, texts, logit_scale: float):
    """Symmetric standard InfoNCE of K micro-batches at once: images and texts [K, B, D] unit rows -> [K]."""
    import torch

    k, b, _ = images.shape
    labels = torch.arange(b).repeat(k)
    logits = float(logit_scale) * images @ texts.transpose(1, 2)
    i2t = torch.nn.functional.cross_entropy(logits.reshape(k * b, b), labels, reduction="none")
    t2i = torch.nn.functional.cross_entropy(logits.transpose(1, 2).reshape(k * b, b), labels, reduction="none")
    return 0.5 * (i2t.view(k, b).mean(1) + t2i.view(k, b).mean(1))
