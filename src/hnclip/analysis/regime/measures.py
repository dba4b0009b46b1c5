"""What the conditions measure: the trainer's micro-batches rebuilt, caption cosines (near-duplicates,
hardest partners), retrieval outcomes and the dynamics logs' saturated micro-batches."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hnclip.analysis.bootstrap import Outcomes
from hnclip.analysis.regime.definitions import (
    DIRECTIONS,
    NEAR_DUPLICATE_COSINE,
)
from hnclip.dynamics_log import MICRO_BATCH_INFONCE, SATURATION_LOSS, parse_micro_batch_losses


# ------------------------------------------------------------------------------ the trainer's batches
@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch the trainer trained: epoch (1-based), optimizer step (1-based, global), its position
    in the step's gradient accumulation (0-based) and the training-set rows it held."""

    epoch: int
    step: int
    position: int
    rows: np.ndarray = field(compare=False)


def trainer_micro_batches(n_train: int, seed: int, micro_batch: int, accum_steps: int, epochs: int,
                          max_steps: int = 0) -> list[MicroBatch]:
    """Every micro-batch :func:`hnclip.train.train_model` trains, in order: per epoch the permutation
    :func:`hnclip.training.batches.epoch_order` cut into consecutive slices of ``micro_batch`` rows,
    ``accum_steps`` slices per optimizer step, the incomplete last effective batch dropped, and training
    stopped after ``max_steps`` steps when that is set (under torchrun the micro-batch is the global one)."""
    from hnclip.training.batches import epoch_order  # torch: only where batches are rebuilt

    effective = micro_batch * accum_steps
    steps_per_epoch = n_train // effective
    if steps_per_epoch == 0:
        raise ValueError(f"{n_train} training rows are fewer than one effective batch ({micro_batch} x {accum_steps})")
    total = epochs * steps_per_epoch
    if max_steps:
        total = min(total, max_steps)
    batches = []
    for epoch in range(math.ceil(total / steps_per_epoch)):
        order = epoch_order(n_train, seed, epoch)
        for in_epoch in range(steps_per_epoch):
            step = epoch * steps_per_epoch + in_epoch + 1
            if step > total:
                break
            for position in range(accum_steps):
                start = (in_epoch * accum_steps + position) * micro_batch
                batches.append(MicroBatch(epoch + 1, step, position, order[start:start + micro_batch]))
    return batches


def run_micro_batches(summary: Mapping, n_train: int | None = None) -> list[MicroBatch]:
    """The micro-batches of a finished run, from its ``summary.json`` (config, ``n_train``, ``steps``).

    ``n_train``: the training manifest's rows, checked against the run's (a plain run trains on all of them)."""
    config = summary["config"]
    run_n = int(summary["n_train"])
    if n_train is not None and run_n != n_train:
        raise ValueError(f"run {summary.get('run_dir', '?')} trained on {run_n} rows, the training manifest has "
                         f"{n_train}: it is not a full-data run of this manifest")
    micro_batch, accum_steps = int(config["micro_batch"]), int(config["accum_steps"])
    recorded = summary.get("steps_per_epoch")
    if recorded is not None and run_n // (micro_batch * accum_steps) != int(recorded):
        raise ValueError(f"run {summary.get('run_dir', '?')}: {recorded} steps per epoch recorded, but {run_n} rows "
                         f"in effective batches of {micro_batch} x {accum_steps} make {run_n // (micro_batch * accum_steps)}")
    return trainer_micro_batches(run_n, int(config["seed"]), micro_batch, accum_steps, int(config["epochs"]),
                                 int(summary["steps"]))


# --------------------------------------------------------------------------------- caption cosines
def near_duplicate_companions(features: np.ndarray, rows, threshold: float = NEAR_DUPLICATE_COSINE) -> np.ndarray:
    """For each row of one batch, whether another row of the batch has caption cosine >= ``threshold``."""
    rows = np.asarray(rows)
    block = features[rows] @ features[rows].T
    np.fill_diagonal(block, -np.inf)
    return block.max(axis=1) >= threshold if rows.size > 1 else np.zeros(rows.size, dtype=bool)


def micro_batch_has_pair(features: np.ndarray, rows, threshold: float = NEAR_DUPLICATE_COSINE) -> bool:
    """Whether a batch holds at least one pair of captions with cosine >= ``threshold``."""
    return bool(near_duplicate_companions(features, rows, threshold).any())


def batch_near_duplicate_shares(features: np.ndarray, batches: Iterable[MicroBatch],
                                threshold: float = NEAR_DUPLICATE_COSINE) -> dict[int, float]:
    """Per epoch: the share of the scenes trained that epoch whose micro-batch holds a near-duplicate of it."""
    hits: dict[int, int] = {}
    seen: dict[int, int] = {}
    for batch in batches:
        companions = near_duplicate_companions(features, batch.rows, threshold)
        hits[batch.epoch] = hits.get(batch.epoch, 0) + int(companions.sum())
        seen[batch.epoch] = seen.get(batch.epoch, 0) + int(companions.size)
    return {epoch: hits[epoch] / seen[epoch] for epoch in sorted(seen)}


def split_near_duplicate_share(features: np.ndarray, threshold: float = NEAR_DUPLICATE_COSINE,
                               chunk: int = 2048) -> float:
    """Share of a split's captions with a near-duplicate anywhere in the split (the most a batch can hold)."""
    n = features.shape[0]
    has = np.zeros(n, dtype=bool)
    for start in range(0, n, chunk):
        block = features[start:start + chunk] @ features.T
        block[np.arange(block.shape[0]), np.arange(start, start + block.shape[0])] = -np.inf
        has[start:start + chunk] = block.max(axis=1) >= threshold
    return float(has.mean()) if n else math.nan


def hardest_partner(features: np.ndarray, chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """(index, cosine) of each row's most similar other row (ties: the lowest index)."""
    n = features.shape[0]
    if n < 2:
        raise ValueError("a hardest partner needs at least 2 rows")
    partner = np.empty(n, dtype=np.int64)
    cosine = np.empty(n)
    for start in range(0, n, chunk):
        block = features[start:start + chunk] @ features.T
        block[np.arange(block.shape[0]), np.arange(start, start + block.shape[0])] = -np.inf
        partner[start:start + chunk] = block.argmax(axis=1)
        cosine[start:start + chunk] = block.max(axis=1)
    return partner, cosine


# ------------------------------------------------------------------------------- retrieval outcomes
def rank_and_top1(image_features: np.ndarray, text_features: np.ndarray, text_image, chunk: int = 1024
                  ) -> dict[str, np.ndarray]:
    """Per query, the rank of its best positive and its top-1 retrieved item, by cosine in float64.

    Ranks follow :func:`hnclip.evaluate.recall_at_k` (strictly higher scores only); the top-1 is the
    argmax over the gallery (ties: the lowest index), so a query with rank > 0 always retrieves a wrong
    item first. Keys: ``i2t_rank``, ``i2t_top1`` (a caption index), ``t2i_rank``, ``t2i_top1`` (an image index).
    """
    images = np.asarray(image_features, dtype=np.float64)
    texts = np.asarray(text_features, dtype=np.float64)
    text_image = np.asarray(text_image, dtype=np.int64)
    n_images = images.shape[0]
    out = {"i2t_rank": np.empty(n_images, np.int64), "i2t_top1": np.empty(n_images, np.int64),
           "t2i_rank": np.empty(len(texts), np.int64), "t2i_top1": np.empty(len(texts), np.int64)}
    for start in range(0, n_images, chunk):
        scores = images[start:start + chunk] @ texts.T
        own = text_image[None, :] == np.arange(start, start + scores.shape[0])[:, None]
        best_own = np.where(own, scores, -np.inf).max(axis=1, keepdims=True)
        out["i2t_rank"][start:start + len(scores)] = (scores > best_own).sum(axis=1)
        out["i2t_top1"][start:start + len(scores)] = scores.argmax(axis=1)
    for start in range(0, len(texts), chunk):
        scores = texts[start:start + chunk] @ images.T
        positive = scores[np.arange(len(scores)), text_image[start:start + chunk]][:, None]
        out["t2i_rank"][start:start + len(scores)] = (scores > positive).sum(axis=1)
        out["t2i_top1"][start:start + len(scores)] = scores.argmax(axis=1)
    return out


def error_near_duplicates(direction: str, rank, top1, text_image, caption_features: np.ndarray,
                          threshold: float = NEAR_DUPLICATE_COSINE) -> tuple[int, int]:
    """(R@1 errors, those whose top-1 is a near-duplicate) of one direction.

    I→T: an image query errs when its rank is > 0; its top-1 caption is a near-duplicate when its cosine
    to one of the image's own captions is >= ``threshold``. T→I: a caption query errs when its rank is > 0;
    its top-1 image is a near-duplicate when one of that image's captions has cosine >= ``threshold`` to
    the query caption. Cosines are of ``caption_features`` (the backbone's, one row per caption).
    """
    rank, top1, text_image = (np.asarray(a, dtype=np.int64) for a in (rank, top1, text_image))
    captions_of: dict[int, list[int]] = {}
    for caption, image in enumerate(text_image.tolist()):
        captions_of.setdefault(image, []).append(caption)
    errors = np.flatnonzero(rank > 0)
    near = 0
    for query in errors.tolist():
        if direction == "i2t":
            own, other = captions_of[query], int(top1[query])
            best = float((caption_features[own] @ caption_features[other]).max())
        elif direction == "t2i":
            best = float((caption_features[captions_of[int(top1[query])]] @ caption_features[query]).max())
        else:
            raise ValueError(f"direction must be i2t or t2i, got {direction!r}")
        near += best >= threshold
    return int(errors.size), int(near)


def pairwise_outcomes(image_features: np.ndarray, text_features: np.ndarray, partner) -> dict[str, np.ndarray]:
    """Per test scene i and its partner j: I→T sim(img_i, cap_i) > sim(img_i, cap_j), T→I sim(img_i, cap_i) >
    sim(img_j, cap_i) (cosines in float64; a tie counts as wrong). Rows are scenes: image i with caption i."""
    images = np.asarray(image_features, dtype=np.float64)
    texts = np.asarray(text_features, dtype=np.float64)
    partner = np.asarray(partner, dtype=np.int64)
    own = np.einsum("nd,nd->n", images, texts)
    return {"i2t": own > np.einsum("nd,nd->n", images, texts[partner]),
            "t2i": own > np.einsum("nd,nd->n", images[partner], texts)}


def pairwise_outcomes_as_ranks(correct: Mapping[str, np.ndarray], split: str) -> Outcomes:
    """Pairwise outcomes as retrieval among two candidates (rank 0 when the own one scores higher), so that
    ``value("i2t_r1")`` is the I→T pairwise accuracy in percent and :mod:`hnclip.analysis.bootstrap` pairs
    its intervals over test scenes and seeds like any R@1."""
    i2t, t2i = (np.asarray(correct[d], dtype=bool) for d in DIRECTIONS)
    return Outcomes((~i2t).astype(np.int64), (~t2i).astype(np.int64), np.arange(i2t.size), split)


# --------------------------------------------------------------------------------- dynamics logs
def saturated_micro_batches(dynamics: pd.DataFrame, batches: Iterable[MicroBatch], epoch: int = 1) -> dict:
    """The rows of epoch ``epoch``'s micro-batches, split by their logged standard InfoNCE.

    Returns ``saturated`` and ``active`` (lists of row arrays: loss < / >= :data:`SATURATION_LOSS`) and
    ``unmeasured`` (steps of that epoch without a per-micro-batch loss: logged before the column existed).
    """
    by_position = {(b.step, b.position): b.rows for b in batches if b.epoch == epoch}
    out = {"saturated": [], "active": [], "unmeasured": 0}
    frame = dynamics.loc[dynamics["epoch"] == epoch]
    column = frame[MICRO_BATCH_INFONCE] if MICRO_BATCH_INFONCE in frame.columns else [None] * len(frame)
    for step, cell in zip(frame["step"], column, strict=True):
        losses = parse_micro_batch_losses(cell)
        if losses is None:
            out["unmeasured"] += 1
            continue
        for position, loss in enumerate(losses):
            rows = by_position.get((int(step), position))
            if rows is None:
                raise ValueError(f"dynamics log: step {int(step)} has a micro-batch {position} that the run's "
                                 f"batching (epoch {epoch}) does not have")
            out["saturated" if loss < SATURATION_LOSS else "active"].append(rows)
    return out
