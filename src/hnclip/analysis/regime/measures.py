"""What the conditions measure: the trainer's micro-batches rebuilt, caption cosines (the near-duplicate
relation of a split, hardest partners), retrieval outcomes and the dynamics logs' saturated micro-batches."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hnclip.analysis.bootstrap import Outcomes
from hnclip.analysis.regime.definitions import (
    CHANCE_MICRO_BATCHES,
    DIRECTIONS,
    EXTREME_COSINE,
    GEOMETRY_COSINE,
    NEAR_DUPLICATE_Z,
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
@dataclass
class NearDuplicates:
    """The near-duplicate relation of one split (:data:`NEAR_DUPLICATE_TEXT`), built once by :meth:`of`.

    Why relative to each caption's own distribution: a fixed cosine admits whatever share of pairs the
    backbone's crowding gives (31 % of all test pairs under the released toy backbone at 0.9, and every
    caption's 5th-nearest above 0.949, so a floor anywhere in 0.8-0.96 never binds), and a count of nearest
    neighbours means a larger share of a smaller split. A threshold in standard deviations above a caption's
    mean cosine binds on any geometry with a spread and reads the same at any split size. Why a floor: a
    split whose captions are all far apart has no near-duplicates at all, and the conditions must be able to
    say so. ``partners[i]``: the captions near-duplicate to caption ``i``; ``z`` and ``floor``: the definition's
    parameters."""

    partners: list[frozenset]
    z: float
    floor: float

    @classmethod
    def of(cls, features: np.ndarray, z: float = NEAR_DUPLICATE_Z, floor: float = GEOMETRY_COSINE,
           chunk: int = 2048) -> NearDuplicates:
        """From L2-normalised caption features (one row per caption): i and j are near-duplicates when their
        cosine is >= max(mean_i + z sd_i, floor) or >= max(mean_j + z sd_j, floor), mean_i and sd_i over
        caption i's cosines to every other caption of the split (population spread)."""
        features = np.asarray(features, dtype=np.float64)
        n = features.shape[0]
        threshold = np.full(n, np.inf)
        if n >= 3:  # a spread needs two other captions
            total, squares = np.zeros(n), np.zeros(n)
            for start in range(0, n, chunk):
                block = features[start:start + chunk] @ features.T
                block[np.arange(block.shape[0]), np.arange(start, start + block.shape[0])] = 0.0
                total[start:start + chunk], squares[start:start + chunk] = block.sum(axis=1), (block ** 2).sum(axis=1)
            mean = total / (n - 1)
            spread = np.sqrt(np.maximum(squares / (n - 1) - mean ** 2, 0.0))
            threshold = np.maximum(mean + float(z) * spread, float(floor))
        partners: list[set] = [set() for _ in range(n)]
        for start in range(0, n, chunk):
            block = features[start:start + chunk] @ features.T
            rows = np.arange(start, start + block.shape[0])
            near = (block >= threshold[rows, None]) | (block >= threshold[None, :])
            near[np.arange(block.shape[0]), rows] = False
            for i, j in zip(*np.nonzero(near), strict=True):
                partners[start + int(i)].add(int(j))
                partners[int(j)].add(start + int(i))
        return cls([frozenset(p) for p in partners], float(z), float(floor))

    def __len__(self) -> int:
        return len(self.partners)

    def companions(self, rows) -> np.ndarray:
        """For each row of one batch, whether another row of the batch is its near-duplicate."""
        rows = [int(r) for r in np.asarray(rows).tolist()]
        inside = set(rows)
        return np.array([bool((self.partners[i] & inside) - {i}) for i in rows], dtype=bool)

    def has_pair(self, rows) -> bool:
        """Whether a batch holds at least one near-duplicate pair."""
        return bool(self.companions(rows).any())

    def pair_count(self, rows) -> int:
        """How many near-duplicate pairs a batch holds (each unordered pair once)."""
        rows = [int(r) for r in np.asarray(rows).tolist()]
        inside = set(rows)
        return sum(len(self.partners[i] & inside) for i in rows) // 2

    def base_rate(self) -> dict:
        """How common the relation is in this split: ``pair_share`` (near-duplicate pairs among all pairs),
        ``partners_mean`` (per caption) and ``with_partner`` (share of captions with at least one)."""
        n = len(self.partners)
        sizes = np.array([len(p) for p in self.partners], dtype=np.float64)
        pairs = int(sizes.sum()) // 2
        return {"pairs": pairs, "pair_share": pairs / (n * (n - 1) / 2) if n > 1 else math.nan,
                "partners_mean": float(sizes.mean()) if n else math.nan,
                "with_partner": float((sizes > 0).mean()) if n else math.nan}

    def chance_batch_share(self, size: int, draws: int = CHANCE_MICRO_BATCHES, seed: int = 0) -> float:
        """Share of ``draws`` uniformly random batches of ``size`` distinct rows that hold a pair (seeded):
        what the trainer's shuffled micro-batches should give."""
        n = len(self.partners)
        if size < 2 or n < size:
            return math.nan
        rng = np.random.default_rng(seed)
        return float(np.mean([self.has_pair(rng.choice(n, size, replace=False)) for _ in range(draws)]))


def micro_batch_has_extreme_pair(features: np.ndarray, rows, threshold: float = EXTREME_COSINE) -> bool:
    """Whether a batch holds two captions at cosine >= ``threshold`` (A.2's "extreme negatives with G >= 0.9":
    a geometry figure of the backbone's release, not the near-duplicate definition)."""
    rows = np.asarray(rows)
    if rows.size < 2:
        return False
    block = features[rows] @ features[rows].T
    np.fill_diagonal(block, -np.inf)
    return bool(block.max() >= threshold)


def batch_pair_counts(near: NearDuplicates, batches: Iterable[MicroBatch]) -> dict[int, tuple[int, int]]:
    """Per epoch: (micro-batches holding a near-duplicate pair, micro-batches trained)."""
    counts: dict[int, list[int]] = {}
    for batch in batches:
        tally = counts.setdefault(batch.epoch, [0, 0])
        tally[0] += int(near.has_pair(batch.rows))
        tally[1] += 1
    return {epoch: (k, n) for epoch, (k, n) in sorted(counts.items())}


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


def error_near_duplicates(direction: str, rank, top1, text_image, near: NearDuplicates) -> tuple[int, int, float]:
    """(R@1 errors, those whose top-1 is a near-duplicate, how many a uniformly random wrong answer to the
    same erring queries would give in expectation) of one direction.

    I→T: an image query errs when its rank is > 0; its top-1 caption is a near-duplicate when it is one of
    a caption of the image's own (``near`` numbers the captions); a random wrong answer is any caption
    not the image's own. T→I: a caption query errs when its rank is > 0; its top-1 image is a near-duplicate
    when one of that image's captions is the query's near-duplicate; a random wrong answer is any other image.
    """
    rank, top1, text_image = (np.asarray(a, dtype=np.int64) for a in (rank, top1, text_image))
    captions_of: dict[int, list[int]] = {}
    for caption, image in enumerate(text_image.tolist()):
        captions_of.setdefault(image, []).append(caption)
    n_captions, n_images = text_image.size, len(captions_of)
    errors = np.flatnonzero(rank > 0)
    hits, chance = 0, 0.0
    for query in errors.tolist():
        if direction == "i2t":
            own = set(captions_of[query])
            targets = set().union(*(near.partners[c] for c in own)) - own
            hits += int(top1[query]) in targets
            chance += len(targets) / (n_captions - len(own))
        elif direction == "t2i":
            own = int(text_image[query])
            images = {int(text_image[c]) for c in near.partners[query]} - {own}
            hits += int(top1[query]) in images
            chance += len(images) / (n_images - 1)
        else:
            raise ValueError(f"direction must be i2t or t2i, got {direction!r}")
    return int(errors.size), int(hits), float(chance)


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
