"""Qualitative retrieval gallery: for a few captions, the top-k images two (or more) models retrieve.

Independent of the model code on purpose: it takes feature matrices, a scoring function and a store-like
``read(rows)`` that returns images for image-store rows, so it runs on cached features and tests run on
hand-made arrays.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from hnclip.analysis.figures import plt, save_figure

__all__ = ["DISAGREEMENT_KINDS", "choose_disagreements", "cosine_scores", "disagreements", "plot_retrieval_gallery",
           "top_k_retrievals", "true_ranks"]

# the queries where two models disagree at R@1, in the order the gallery shows them
DISAGREEMENT_KINDS = ("first alone right", "second alone right", "both wrong")


def cosine_scores(text_features, image_features) -> np.ndarray:
    """[Q, N] text->image scores of L2-normalised features (the evaluation's score)."""
    return np.asarray(text_features, dtype=np.float64) @ np.asarray(image_features, dtype=np.float64).T


def top_k_retrievals(text_features, image_features, queries: Sequence[int], k: int = 5,
                     score_fn: Callable = cosine_scores) -> tuple[np.ndarray, np.ndarray]:
    """Image rows [Q, k] and scores [Q, k] of each query caption's k best images, best first.

    Ties keep the lower image row first (stable sort), so the gallery is reproducible.
    """
    text = np.asarray(text_features)
    n_images = np.asarray(image_features).shape[0]
    if not 1 <= k <= n_images:
        raise ValueError(f"k must be in [1, {n_images}] (the number of images), got {k}")
    bad = [q for q in queries if not 0 <= q < text.shape[0]]
    if bad:
        raise IndexError(f"query caption row {bad[0]} is outside [0, {text.shape[0]})")
    scores = np.asarray(score_fn(text[list(queries)], image_features), dtype=np.float64)
    if scores.shape != (len(queries), n_images):
        raise ValueError(f"score_fn returned shape {scores.shape}, expected {(len(queries), n_images)}")
    rows = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return rows, np.take_along_axis(scores, rows, axis=1)


def true_ranks(text_features, image_features, queries: Sequence[int], true_rows: Sequence[int],
               score_fn: Callable = cosine_scores) -> list[int]:
    """Where each query's own image ranks among all images (1 = retrieved first): one plus the images that
    score strictly higher, the evaluation's rank (its ties count for the query). The paper reports the
    strongest baseline's ground truth at ranks 18-52 in its examples (appendix F)."""
    if len(true_rows) != len(queries):
        raise ValueError(f"{len(queries)} queries but {len(true_rows)} ground-truth rows")
    scores = np.asarray(score_fn(np.asarray(text_features)[list(queries)], image_features), dtype=np.float64)
    own = scores[np.arange(len(queries)), np.asarray(true_rows, dtype=int)]
    return [1 + int(n) for n in (scores > own[:, None]).sum(axis=1)]


def disagreements(first_ranks: Sequence[int], second_ranks: Sequence[int]) -> dict[str, list[int]]:
    """The queries (positions in the rank lists, 1 = retrieved first) where two models do not both retrieve
    the ground truth first, by kind (:data:`DISAGREEMENT_KINDS`), each in query order."""
    if len(first_ranks) != len(second_ranks):
        raise ValueError(f"{len(first_ranks)} and {len(second_ranks)} ranks: the two models ranked different queries")
    out: dict[str, list[int]] = {kind: [] for kind in DISAGREEMENT_KINDS}
    for q, (a, b) in enumerate(zip(first_ranks, second_ranks, strict=True)):
        if a == 1 and b != 1:
            out["first alone right"].append(q)
        elif b == 1 and a != 1:
            out["second alone right"].append(q)
        elif a != 1 and b != 1:
            out["both wrong"].append(q)
    return out


def choose_disagreements(kinds: dict[str, list[int]], n: int) -> list[int]:
    """``n`` queries, chosen by a rule stated in the figure: the kinds share ``n`` as evenly as they can (in
    :data:`DISAGREEMENT_KINDS` order the first kinds take the remainder; a kind with too few queries passes its
    share on), and within a kind the queries are evenly spaced over its list (query order), never by score."""
    sizes = {kind: 0 for kind in DISAGREEMENT_KINDS}
    left = min(n, sum(len(kinds.get(k, [])) for k in DISAGREEMENT_KINDS))
    while left:
        open_kinds = [k for k in DISAGREEMENT_KINDS if sizes[k] < len(kinds.get(k, []))]
        for kind in open_kinds[:left]:
            sizes[kind] += 1
            left -= 1
    chosen = []
    for kind in DISAGREEMENT_KINDS:
        pool = kinds.get(kind, [])
        if sizes[kind]:
            chosen += [pool[i] for i in np.linspace(0, len(pool) - 1, sizes[kind]).round().astype(int).tolist()]
    return chosen


def plot_retrieval_gallery(captions: Sequence[str], queries: Sequence[int], true_rows: Sequence[int],
                           models: Mapping[str, tuple], read: Callable[[Sequence[int]], Sequence],
                           out_prefix, k: int = 5, score_fn: Callable = cosine_scores,
                           caption_chars: int = 240, title: str | None = None,
                           labels: Sequence[str] | None = None) -> list[Path]:
    """Draw, per query caption, each model's top-k images with scores; the ground-truth image is framed green
    and each model's row says where it ranks the ground truth (:func:`true_ranks`).

    ``captions``: every caption (indexed by ``queries``); ``true_rows[i]``: image-store row of query i's
    own image; ``models``: name -> (text_features [N_text, D], image_features [N_img, D]); ``read(rows)``
    returns images (PIL images or HxW[xC] arrays) for image-store rows; ``title``: the figure's heading (what
    was chosen and how); ``labels``: a short tag per query (its kind), shown before its caption.
    """
    if len(true_rows) != len(queries):
        raise ValueError(f"{len(queries)} queries but {len(true_rows)} ground-truth rows")
    retrieved = {name: top_k_retrievals(t, i, queries, k, score_fn) for name, (t, i) in models.items()}
    ranks = {name: true_ranks(t, i, queries, true_rows, score_fn) for name, (t, i) in models.items()}
    n_rows = len(queries) * (len(models) + 1)
    ratios = [0.45 if r % (len(models) + 1) == 0 else 1.0 for r in range(n_rows)]
    fig = plt.figure(figsize=(1.9 * k, 1.9 * sum(ratios) + 0.3), layout="constrained")
    grid = fig.add_gridspec(n_rows, k, height_ratios=ratios)
    for qi, query in enumerate(queries):
        base = qi * (len(models) + 1)
        caption_ax = fig.add_subplot(grid[base, :])
        caption_ax.axis("off")
        text = textwrap.shorten(str(captions[query]), caption_chars, placeholder=" …")
        tag = f" [{labels[qi]}]" if labels else ""
        label = caption_ax.text(0, 0.5, f"Q{qi + 1}{tag}: " + "\n".join(textwrap.wrap(text, 18 * k)), fontsize=7,
                                va="center", ha="left", transform=caption_ax.transAxes)
        label.set_in_layout(False)  # long captions must not squeeze the image grid
        for mi, (name, (rows, scores)) in enumerate(retrieved.items()):
            images = read(list(rows[qi]))
            for j in range(k):
                ax = fig.add_subplot(grid[base + 1 + mi, j])
                ax.imshow(np.asarray(images[j]))
                ax.set_xticks([])
                ax.set_yticks([])
                is_true = int(rows[qi, j]) == int(true_rows[qi])
                for spine in ax.spines.values():
                    spine.set_edgecolor("#1a9850" if is_true else "0.7")
                    spine.set_linewidth(4 if is_true else 0.5)
                ax.set_title(f"{scores[qi, j]:.3f}" + (" ✓" if is_true else ""), fontsize=7,
                             color="#1a9850" if is_true else "black")
                if j == 0:
                    ax.set_ylabel(f"{name}\nGT at rank {ranks[name][qi]}", fontsize=8)
    if title:
        fig.suptitle("\n".join(textwrap.wrap(title, 20 * k)), fontsize=7)
    return save_figure(fig, out_prefix)
