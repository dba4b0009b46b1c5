"""Is a benchmark in the paper's regime? Seven conditions, each measured and set beside its target.

The paper's mechanism needs a particular situation: the backbone is a strong initialisation (Long-CLIP-L
retrieves most DOCCI captions zero-shot), fine-tuning still has room to improve on it, the errors it could
fix are confusions with near-duplicates, the trainer's micro-batches put near-duplicates together, their
captions look alike under the backbone's text tower as the paper's do (a band, not a floor), standard
InfoNCE saturates on micro-batches that hold such pairs, the fine-tuned model could learn the details that
tell twins apart, the test split resolves effects of the paper's size, and the transfer targets are
benchmarks the backbone can read. :data:`CONDITION_KEYS` names the nine conditions; :func:`regime_report`
measures them from arrays and records (no model: the features come from :mod:`hnclip.analysis.regime_job`),
for any benchmark, real or synthetic.

Shared definitions:

- caption cosine: the cosine of two captions' L2-normalised features under the *backbone's* text tower
  (the fine-tuning start), whatever model is being judged;
- near-duplicate: two captions (scenes) with caption cosine >= :data:`NEAR_DUPLICATE_COSINE`;
- plain FT: the plain Long-CLIP fine-tuning runs on the benchmark (role ``plain`` of
  :func:`hnclip.analysis.premise.run_role`: gamma 0, no token term, full data), every seed there is;
- the trainer's micro-batches: the slices of :func:`hnclip.training.batches.epoch_order` that
  :mod:`hnclip.train` trains, rebuilt from a run's summary (:func:`trainer_micro_batches`);
- a test scene: one test image with its first caption (the benchmarks here have one caption per image).

Each condition is a dict (:func:`condition`): ``key``, ``label``, ``value`` (the headline number),
``values`` (every number behind it), ``intervals`` (95 % paired bootstrap intervals, where the numbers
are means over test scenes), ``ours`` (the values as text), ``target``, ``paper``, ``met`` (True, False,
or None when something it needs was not measured), ``definition`` and ``sources``. "Met" compares the
point values with the target; the intervals say how firmly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hnclip import plan
from hnclip.analysis.bootstrap import BootstrapSettings, Estimate, Outcomes, Samples, interval, outcomes_of
from hnclip.analysis.geometry import (
    batch_geometry,
    effective_dimensions,
    least_infonce_batches,
    least_infonce_scenes,
    unit_features,
)
from hnclip.analysis.premise import PAPER, PAPER_GEOMETRY, is_plain_run, saturated_share_epoch1
from hnclip.dynamics_log import MICRO_BATCH_INFONCE, SATURATION_LOSS, parse_micro_batch_losses

__all__ = [
    "CONDITION_KEYS", "GEOMETRY_BAND", "GEOMETRY_COSINE", "NEAR_DUPLICATE_COSINE", "TARGETS", "MicroBatch", "ModelFeatures",
    "PlainRun", "batch_near_duplicate_shares", "condition", "error_near_duplicates", "format_conditions",
    "hardest_partner",
    "load_plain_runs", "load_regime", "micro_batch_has_pair", "near_duplicate_companions",
    "pairwise_outcomes", "pairwise_outcomes_as_ranks", "rank_and_top1", "regime_report",
    "saturable_micro_batches", "saturated_micro_batches", "seeds_for_half_width", "trainer_micro_batches",
]

# --------------------------------------------------------------------------------------- definitions
NEAR_DUPLICATE_COSINE = 0.9  # two captions this close under the backbone's text tower are near-duplicates
GEOMETRY_COSINE = 0.8  # the paper's "negatives at cosine >= 0.8" (appendix A.2)
# the targets, each named once: R@1 points, shares in [0, 1], cosines, counts
STRONG_INIT_MIN = 50.0  # zero-shot R@1: Long-CLIP-L starts strong on DOCCI (the paper's premise, abstract)
HEADROOM_MIN = 5.0
ERRORS_NEAR_DUPLICATE_MIN = 0.8
BATCH_NEAR_DUPLICATES_MIN = 0.5
# the paper's in-batch caption geometry (appendix A.2) as a band: crowded as the paper's captions are, and
# no more (a toy crowded past the hardest 0.95 leaves no logit gap InfoNCE could saturate on at s = 100)
GEOMETRY_BAND = {"mean_offdiag": (0.80, 0.90), "mean_hardest": (0.90, 0.95), f"frac_ge_{GEOMETRY_COSINE:g}": (0.86, 0.99)}
SATURATED_MIN = 0.5
SATURATED_WITH_PAIR_MIN = 0.5
# condition 5's diagnostic: on how many of the first plain run's epoch-1 micro-batches the least InfoNCE
# that free image features reach against the captions (geometry.least_infonce) is computed
SATURABLE_MICRO_BATCHES = 32
# ... and with one feature per scene (geometry.least_infonce_scenes) over at most this many training scenes:
# those micro-batches' scenes and a seeded draw of the rest (the toy's 1,536 all; a paper-scale split of
# ~20k x 768 would cost minutes and a gigabyte per step). Fewer scenes mean fewer captions to be set apart
# from, so a cut split errs toward saturable, never away from it
SATURABLE_SCENES_MAX = 4096
LEARNABLE_MIN = 5.0
POWER_TEST_SCENES_MIN = 1000
POWER_SEEDS_MIN = 3
POWER_HALF_WIDTH_MAX = 1.5
# a transfer target the backbone can read: zero-shot R@1 this high in both directions, so that a few points'
# difference between methods is resolvable on ~1,000 test scenes (a binomial SE of ~1.3 points at 20 %)
TRANSFER_ZEROSHOT_MIN = 20.0
# the main comparison of condition 7, by method key (labels are the config's to change)
HN_METHOD, BASELINE_METHOD = plan.REFERENCE_METHOD, plan.BASELINE_METHOD

def _share(value) -> str:
    """A share as whole percent, the report's style (80 %)."""
    return f"{100 * value:.0f} %"


CONDITION_KEYS = ("strong_init", "headroom", "errors_near_duplicate", "batch_near_duplicates", "geometry",
                  "saturation", "learnable_details", "power", "transfer_readable")
LABELS = {
    "strong_init": "a strong initialisation",
    "headroom": "headroom over the backbone",
    "errors_near_duplicate": "errors are near-duplicate confusions",
    "batch_near_duplicates": "micro-batches hold near-duplicates",
    "geometry": "in-batch caption geometry",
    "saturation": "InfoNCE saturates on near-duplicate batches",
    "learnable_details": "the details are learnable",
    "power": "the test split resolves the paper's effects",
    "transfer_readable": "the transfer targets are readable",
}


def _band(key: str, percent: bool = False) -> str:
    low, high = GEOMETRY_BAND[key]
    return f"{100 * low:.0f}–{_share(high)}" if percent else f"{low:.2f}–{high:.2f}"


TARGETS = {
    "strong_init": f"zero-shot R@1 ≥ {STRONG_INIT_MIN:g} in both directions",
    "headroom": f"≥ {HEADROOM_MIN:g} R@1 points in both directions",
    "errors_near_duplicate": f"≥ {_share(ERRORS_NEAR_DUPLICATE_MIN)} in both directions",
    "batch_near_duplicates": f"≥ {_share(BATCH_NEAR_DUPLICATES_MIN)} in every epoch",
    "geometry": (f"mean {_band('mean_offdiag')}; hardest {_band('mean_hardest')}; "
                 f"{_band(f'frac_ge_{GEOMETRY_COSINE:g}', percent=True)} of negatives ≥ {GEOMETRY_COSINE:g}"),
    "saturation": f"≥ {_share(SATURATED_MIN)} saturated; ≥ {_share(SATURATED_WITH_PAIR_MIN)} of those hold a near-duplicate pair",
    "learnable_details": f"plain FT − zero-shot ≥ {LEARNABLE_MIN:g} points in both directions",
    "power": (f"≥ {POWER_TEST_SCENES_MIN:,} test scenes; ≥ {POWER_SEEDS_MIN} seeds; "
              f"interval half-width ≤ {POWER_HALF_WIDTH_MAX:g} R@1"),
    "transfer_readable": f"zero-shot R@1 ≥ {TRANSFER_ZEROSHOT_MIN:g} in both directions on every transfer target",
}
PAPER_FIGURES = {
    "strong_init": "Long-CLIP-L on DOCCI: roughly 67 / 79 zero-shot (published Long-CLIP-L figures); InfoNCE "
                   "saturates under it (abstract)",
    "headroom": None,
    "errors_near_duplicate": None,
    "batch_near_duplicates": None,
    "geometry": (f"mean {PAPER_GEOMETRY['mean_offdiag'][0]:.2f}–{PAPER_GEOMETRY['mean_offdiag'][1]:.2f}; "
                 f"hardest {PAPER_GEOMETRY['mean_hardest'][0]:.2f}–{PAPER_GEOMETRY['mean_hardest'][1]:.2f}; "
                 f"{100 * PAPER_GEOMETRY['frac_ge_0.8'][0]:.0f}–{_share(PAPER_GEOMETRY['frac_ge_0.8'][1])} of "
                 f"negatives ≥ 0.8 (A.2)"),
    "saturation": f"{_share(PAPER['saturated_share_epoch1'])} of epoch-1 batches < 1e-3 (abstract)",
    "learnable_details": None,
    "power": "DOCCI 5,000 test images, Urban-1K 1,000; effects +2.4 to +4.3 R@1 (§3.2)",
    "transfer_readable": "Urban-1K, DCI, DOCCI, Long-DCI: benchmarks Long-CLIP-L retrieves zero-shot",
}
DEFINITIONS = {
    "strong_init": "the zero-shot backbone's test R@1 per direction, with its bootstrap interval over test images",
    "headroom": "plain FT test R@1 (mean over seeds) minus the zero-shot backbone's, per direction; paired "
                "bootstrap interval over test images (and seeds)",
    "errors_near_duplicate": f"share of plain FT's R@1 errors whose top-1 retrieved item is a near-duplicate: a "
                             f"test scene whose caption has cosine ≥ {NEAR_DUPLICATE_COSINE:g} to the query's own "
                             f"caption (backbone text tower); pooled over seeds",
    "batch_near_duplicates": f"share of the scenes trained in an epoch that share one of the trainer's "
                             f"micro-batches (epoch_order with the run's seed) with a scene of caption cosine "
                             f"≥ {NEAR_DUPLICATE_COSINE:g}; per (plain run, epoch): mean and min",
    "geometry": f"over every micro-batch the plain runs trained: the mean off-diagonal caption cosine, the mean "
                f"hardest in-batch cosine per caption and the share of off-diagonal cosines ≥ {GEOMETRY_COSINE:g}, "
                f"each within its band; beside them, the training captions' effective dimensions (participation "
                f"ratio of their covariance's eigenvalues)",
    "saturation": f"plain FT, epoch 1: share of micro-batches with standard InfoNCE < {SATURATION_LOSS:g}, and the "
                  f"share of those holding a pair of caption cosine ≥ {NEAR_DUPLICATE_COSINE:g} (rows from the "
                  f"dynamics log's per-micro-batch InfoNCE and epoch_order); beside them, what the captions allow: "
                  f"on the first {SATURABLE_MICRO_BATCHES} epoch-1 micro-batches of the first plain run, the least "
                  f"standard InfoNCE that free unit image features reach against the backbone's caption features "
                  f"at the backbone's logit scale, fitted to each micro-batch alone (no image tower reaches "
                  f"less), its median and the share below {SATURATION_LOSS:g}; and the same micro-batches' "
                  f"loss when every training scene has one free image feature, fitted to the mean loss over "
                  f"random micro-batches (as an image tower gives a scene one feature, whatever its batch)",
    "learnable_details": "pairwise accuracy on the test split against each scene's hardest near-duplicate j "
                         "(highest backbone caption cosine): I→T sim(img_i, cap_i) > sim(img_i, cap_j), T→I "
                         "sim(img_i, cap_i) > sim(img_j, cap_i); plain FT (mean over seeds) minus zero-shot, "
                         "paired bootstrap interval over test scenes (and seeds)",
    "power": f"test scenes; seeds of the main comparison ({HN_METHOD} and {BASELINE_METHOD} in the seeds "
             f"experiment where it holds both, else the main table); half-width of the paired interval of {HN_METHOD} minus {BASELINE_METHOD} on average "
             f"R@1 (mean of I→T and T→I); seeds for ±{POWER_HALF_WIDTH_MAX:g}: the seeds the half-width would need "
             f"if it shrank as 1/√seeds (a projection, not a measurement)",
    "transfer_readable": "the zero-shot backbone's test R@1 per direction on each benchmark a run trained on this "
                         "one is transferred to (experiments.transfer)",
}
DIRECTIONS = ("i2t", "t2i")
ARROWS = {"i2t": "I→T", "t2i": "T→I"}


def condition(key: str, value, values: Mapping, met: bool | None, ours: str, sources: Iterable[str],
              intervals: Mapping | None = None, **extra) -> dict:
    """One condition's record (module docstring); ``extra`` adds keys such as ``per_seed`` or ``note``."""
    return {"key": key, "label": LABELS[key], "value": _number(value), "values": _numbers(values),
            "intervals": {k: [float(a), float(b)] for k, (a, b) in (intervals or {}).items()},
            "ours": ours, "target": TARGETS[key], "paper": PAPER_FIGURES[key], "met": met,
            "definition": DEFINITIONS[key], "sources": sorted({str(s) for s in sources}), **extra}


def _number(value):
    if value is None:
        return None
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def _numbers(values: Mapping) -> dict:
    return {k: (_numbers(v) if isinstance(v, Mapping) else _number(v)) for k, v in values.items()}


def _all_met(parts: Iterable[bool | None]) -> bool | None:
    """False if any measured part fails, None if a part is unmeasured and none fails, else True."""
    parts = list(parts)
    if any(p is False for p in parts):
        return False
    return None if any(p is None for p in parts) else True


def _at_least(value, threshold) -> bool | None:
    return None if value is None else bool(float(value) >= threshold)


def _within(value, band) -> bool | None:
    return None if value is None else bool(band[0] <= float(value) <= band[1])


def _pct(value, digits: int = 1) -> str:
    return "–" if value is None else f"{100 * float(value):.{digits}f} %"


def _signed(value) -> str:
    return "–" if value is None else f"{float(value):+.1f}"


def _bracket(bounds) -> str:
    return "" if bounds is None else f" [{bounds[0]:+.1f}, {bounds[1]:+.1f}]"


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


# ------------------------------------------------------------------------------------- inputs
@dataclass
class ModelFeatures:
    """A model's L2-normalised test features: one row per test image and one per caption."""

    images: np.ndarray
    texts: np.ndarray


@dataclass
class PlainRun:
    """One plain fine-tuning run: its folder, summary, dynamics log, evaluation record on the benchmark and
    (for the model-based conditions) its test features."""

    run_dir: str
    summary: dict
    dynamics: pd.DataFrame
    record: dict
    features: ModelFeatures | None = None

    @property
    def seed(self) -> str:
        return str(self.summary.get("seed", self.summary["config"]["seed"]))


def _run_tail(run_dir) -> str:
    return "/".join(Path(run_dir).parts[-5:])


def load_plain_runs(run_dirs: Iterable, eval_paths: Iterable, benchmark: str) -> list[PlainRun]:
    """Each run folder's summary, dynamics log and evaluation record on ``benchmark`` (matched by the run's
    path, ``train_set/method/g../f../s..``), refusing a run that is not plain (:func:`is_plain_run`)."""
    from hnclip.analysis.records import load_eval, run_name

    records = {}
    for path in eval_paths:
        record = load_eval(path)
        if record["eval_benchmark"] == benchmark:
            records[run_name(record["run"])] = (str(path), record)
    runs = []
    for run_dir in run_dirs:
        run_dir = Path(run_dir)
        summary = json.loads((run_dir / "summary.json").read_text())
        summary.setdefault("run_dir", str(run_dir))
        if not is_plain_run(summary):
            raise ValueError(f"run {run_dir} does not play role 'plain' (gamma 0, no token term, full data, "
                             f"Long-CLIP framework)")
        tail = _run_tail(run_dir)
        if tail not in records:
            raise ValueError(f"no evaluation record on {benchmark} for run {run_dir} among the --evals given")
        dynamics_path = run_dir / "dynamics.csv"
        if not dynamics_path.is_file():
            raise FileNotFoundError(f"dynamics log {dynamics_path} does not exist")
        runs.append(PlainRun(str(run_dir), summary, pd.read_csv(dynamics_path, dtype={MICRO_BATCH_INFONCE: str}),
                             records[tail][1]))
    return runs


def load_regime(path) -> dict:
    """A ``results/regime/<benchmark>.json``, checked for the seven conditions in order."""
    data = json.loads(Path(path).read_text())
    keys = tuple(c.get("key") for c in data.get("conditions", []))
    if keys != CONDITION_KEYS:
        raise ValueError(f"regime file {path}: conditions {keys}, expected {CONDITION_KEYS}")
    return data


# ----------------------------------------------------------------------------------- conditions
def _samples(pairs: Sequence[tuple[str, Outcomes | None]]) -> Samples | None:
    return Samples.from_pairs(pairs)


def _mean_metric(outcomes: Sequence[Outcomes], metric: str) -> float:
    return float(np.mean([o.value(metric) for o in outcomes]))


def _difference(plain: Sequence[tuple[str, Outcomes]], reference: Outcomes, metric: str,
                settings: BootstrapSettings) -> tuple[float, tuple[float, float] | None]:
    """Mean over seeds of ``plain``'s metric minus ``reference``'s, with its paired interval."""
    value = _mean_metric([o for _, o in plain], metric) - reference.value(metric)
    estimate = (Estimate.of(_samples(plain), metric, _mean_metric([o for _, o in plain], metric))
                - Estimate.of(_samples([("reference", reference)]), metric, reference.value(metric)))
    return value, interval(estimate, settings)


def _zeroshot_r1(record: Mapping, settings: BootstrapSettings) -> tuple[dict, dict]:
    """(R@1 per direction, its bootstrap interval per direction where the record holds per-query ranks)."""
    values = {d: float(record["metrics"][f"{d}_r1"]) for d in DIRECTIONS}
    intervals = {}
    outcomes = outcomes_of(record)
    if outcomes is not None:
        samples = _samples([("zeroshot", outcomes)])
        for d in DIRECTIONS:
            bounds = interval(Estimate.of(samples, f"{d}_r1", outcomes.value(f"{d}_r1")), settings)
            if bounds is not None:
                intervals[d] = bounds
    return values, intervals


def _r1_bracket(bounds) -> str:
    return "" if bounds is None else f" [{bounds[0]:.1f}, {bounds[1]:.1f}]"


def strong_init_condition(zeroshot: Mapping, settings: BootstrapSettings, zeroshot_path: str = "") -> dict:
    """Condition "strong_init": the zero-shot backbone's test R@1, both directions, against :data:`STRONG_INIT_MIN`."""
    values, intervals = _zeroshot_r1(zeroshot, settings)
    ours = " / ".join(f"{ARROWS[d]} {values[d]:.1f}{_r1_bracket(intervals.get(d))}" for d in DIRECTIONS)
    met = _all_met(_at_least(values[d], STRONG_INIT_MIN) for d in DIRECTIONS)
    return condition("strong_init", min(values.values()), values, met, ours, [zeroshot_path], intervals)


def transfer_condition(targets: Mapping[str, tuple[Mapping, str]], settings: BootstrapSettings) -> dict:
    """Condition "transfer_readable": the zero-shot backbone's R@1 on every transfer target of this benchmark.

    ``targets``: eval benchmark -> (its zero-shot record, the record's path). None met when there is none
    (no transfer pair trains on this benchmark: nothing to read)."""
    values, intervals, parts, texts = {}, {}, [], []
    for name, (record, _) in sorted(targets.items()):
        r1, bounds = _zeroshot_r1(record, settings)
        for d in DIRECTIONS:
            values[f"{name}.{d}"] = r1[d]
            if d in bounds:
                intervals[f"{name}.{d}"] = bounds[d]
            parts.append(_at_least(r1[d], TRANSFER_ZEROSHOT_MIN))
        texts.append(f"{name}: " + " / ".join(f"{ARROWS[d]} {r1[d]:.1f}{_r1_bracket(bounds.get(d))}"
                                             for d in DIRECTIONS))
    met = _all_met(parts) if parts else None
    ours = "; ".join(texts) if texts else "no transfer target trains on this benchmark"
    return condition("transfer_readable", min(values.values()) if values else None, values, met, ours,
                     [path for _, path in targets.values()], intervals)


def headroom_condition(plain: Sequence[PlainRun], zeroshot: Mapping, settings: BootstrapSettings,
                       zeroshot_path: str = "") -> dict:
    """Condition 1: plain FT R@1 minus the zero-shot backbone's, per direction, paired over test images."""
    reference = outcomes_of(zeroshot)
    pairs = [(r.seed, outcomes_of(r.record)) for r in plain]
    values, intervals, per_seed = {}, {}, {}
    for d in DIRECTIONS:
        metric = f"{d}_r1"
        values[d] = float(np.mean([r.record["metrics"][metric] for r in plain])) - zeroshot["metrics"][metric]
        per_seed[d] = {r.seed: r.record["metrics"][metric] - zeroshot["metrics"][metric] for r in plain}
        if reference is not None and all(o is not None for _, o in pairs):
            values[d], bounds = _difference(pairs, reference, metric, settings)
            if bounds is not None:
                intervals[d] = bounds
    values["plain_i2t_r1"] = float(np.mean([r.record["metrics"]["i2t_r1"] for r in plain]))
    values["plain_t2i_r1"] = float(np.mean([r.record["metrics"]["t2i_r1"] for r in plain]))
    values["zeroshot_i2t_r1"], values["zeroshot_t2i_r1"] = zeroshot["metrics"]["i2t_r1"], zeroshot["metrics"]["t2i_r1"]
    ours = "; ".join(f"{ARROWS[d]} {_signed(values[d])}{_bracket(intervals.get(d))}" for d in DIRECTIONS)
    ours += (f" (plain FT {values['plain_i2t_r1']:.1f} / {values['plain_t2i_r1']:.1f}, zero-shot "
             f"{values['zeroshot_i2t_r1']:.1f} / {values['zeroshot_t2i_r1']:.1f})")
    met = _all_met(_at_least(values[d], HEADROOM_MIN) for d in DIRECTIONS)
    return condition("headroom", min(values[d] for d in DIRECTIONS), values, met, ours,
                     [zeroshot_path, *(r.run_dir for r in plain)], intervals, per_seed=per_seed)


def errors_condition(plain: Sequence[PlainRun], text_image, caption_features: np.ndarray,
                     agreement: Mapping[str, float] | None = None) -> dict:
    """Condition 2: the share of plain FT's R@1 errors whose top-1 is a near-duplicate, pooled over seeds."""
    totals = {d: [0, 0] for d in DIRECTIONS}
    per_seed = {d: {} for d in DIRECTIONS}
    for run in plain:
        outcomes = rank_and_top1(run.features.images, run.features.texts, text_image)
        for d in DIRECTIONS:
            errors, near = error_near_duplicates(d, outcomes[f"{d}_rank"], outcomes[f"{d}_top1"], text_image,
                                                 caption_features)
            totals[d][0] += errors
            totals[d][1] += near
            per_seed[d][run.seed] = near / errors if errors else None
    share = {d: (totals[d][1] / totals[d][0] if totals[d][0] else None) for d in DIRECTIONS}
    errors = sum(t[0] for t in totals.values())
    pooled = sum(t[1] for t in totals.values()) / errors if errors else None
    values = {**share, "pooled": pooled, **{f"{d}_errors": totals[d][0] for d in DIRECTIONS}}
    ours = "; ".join(f"{ARROWS[d]} {_pct(share[d])} of {totals[d][0]}" for d in DIRECTIONS) + f" (pooled {_pct(pooled)})"
    met = _all_met(_at_least(share[d], ERRORS_NEAR_DUPLICATE_MIN) for d in DIRECTIONS if share[d] is not None)
    if all(share[d] is None for d in DIRECTIONS):
        met = None
    extra = {"rank_agreement": dict(agreement)} if agreement else {}
    return condition("errors_near_duplicate", pooled, values, met, ours, [r.run_dir for r in plain],
                     per_seed=per_seed, **extra)


def batch_condition(plain: Sequence[PlainRun], batches: Mapping[str, list[MicroBatch]],
                    train_features: np.ndarray, train_manifest: str = "") -> dict:
    """Condition 3: per (plain run, epoch), the share of scenes batched with a near-duplicate."""
    per_seed, shares = {}, []
    for run in plain:
        by_epoch = batch_near_duplicate_shares(train_features, batches[run.run_dir])
        per_seed[run.seed] = {str(e): s for e, s in by_epoch.items()}
        shares += list(by_epoch.values())
    mean, low = float(np.mean(shares)), float(np.min(shares))
    split = split_near_duplicate_share(train_features)
    values = {"mean": mean, "min": low, "split_share": split}
    ours = f"mean {_pct(mean)}, min {_pct(low)} over {len(shares)} (run, epoch); split bound {_pct(split)}"
    return condition("batch_near_duplicates", low, values, _at_least(low, BATCH_NEAR_DUPLICATES_MIN), ours,
                     [train_manifest, *(r.run_dir for r in plain)], per_seed=per_seed,
                     note="split bound: share of training scenes with a near-duplicate anywhere in the split")


def geometry_condition(plain: Sequence[PlainRun], batches: Mapping[str, list[MicroBatch]],
                       train_features: np.ndarray, train_manifest: str = "") -> dict:
    """Condition 4: caption geometry over every micro-batch the plain runs trained."""
    stats = batch_geometry(train_features, [b.rows for run in plain for b in batches[run.run_dir]])
    frac, hardest = stats[f"frac_ge_{GEOMETRY_COSINE:g}"], stats["mean_hardest"]
    gap = hardest - stats["mean_offdiag"]
    dimensions = effective_dimensions(train_features)
    values = {"frac_ge_0.8": frac, "mean_hardest": hardest, "hardest_minus_mean": gap,
              "mean_offdiag": stats["mean_offdiag"], "n_pairs": stats["n_pairs"], "effective_dimensions": dimensions}
    ours = (f"mean {stats['mean_offdiag']:.3f}; hardest {hardest:.3f}; {_pct(frac)} ≥ {GEOMETRY_COSINE:g} "
            f"(hardest − mean {gap:.3f}); the captions spread over {dimensions:.1f} effective dimensions")
    met = _all_met(_within(values[key], GEOMETRY_BAND[key]) for key in GEOMETRY_BAND)
    return condition("geometry", frac, values, met, ours, [train_manifest, *(r.run_dir for r in plain)])


def saturable_micro_batches(train_features: np.ndarray, batches: Sequence[MicroBatch], logit_scale: float,
                            limit: int = SATURABLE_MICRO_BATCHES, max_scenes: int = SATURABLE_SCENES_MAX) -> dict:
    """What the captions allow of condition 5, on the first ``limit`` epoch-1 micro-batches (captions fixed at
    ``train_features``, one row per training scene): the least standard InfoNCE that image features fitted
    to each micro-batch alone reach (:func:`hnclip.analysis.geometry.least_infonce_batches`: no image tower
    reaches less), ``saturable_share`` below :data:`SATURATION_LOSS` and ``least_infonce_median``; and the
    micro-batches' loss when every training scene has one image feature fitted to the mean loss over random
    micro-batches (:func:`hnclip.analysis.geometry.least_infonce_scenes`, what a tower can aim at),
    ``scene_saturable_share`` and ``scene_infonce_median``, over ``n_bound_scenes`` scenes (at most
    ``max_scenes``: the micro-batches' own and a draw of the rest); ``n_bound_micro_batches``."""
    rows = [b.rows for b in batches if b.epoch == 1 and len(b.rows) >= 2][:limit]  # one caption has no negative
    if not rows:
        return {"saturable_share": None, "least_infonce_median": None, "scene_saturable_share": None,
                "scene_infonce_median": None, "n_bound_scenes": 0, "n_bound_micro_batches": 0}
    evaluation = np.stack(rows)  # the trainer's micro-batches are all one size
    least = least_infonce_batches(train_features[evaluation], logit_scale)
    scenes = np.arange(len(train_features))
    if len(scenes) > max_scenes:
        own = np.unique(evaluation)
        rest = np.setdiff1d(scenes, own)
        drawn = np.random.default_rng(0).choice(rest, max(max_scenes - len(own), 0), replace=False)
        scenes = np.concatenate([own, np.sort(drawn)])
    position = np.full(len(train_features), -1)
    position[scenes] = np.arange(len(scenes))
    scene = least_infonce_scenes(train_features[scenes], position[evaluation], logit_scale)
    return {"saturable_share": float(np.mean(least < SATURATION_LOSS)),
            "least_infonce_median": float(np.median(least)),
            "scene_saturable_share": float(np.mean(scene < SATURATION_LOSS)),
            "scene_infonce_median": float(np.median(scene)), "n_bound_scenes": len(scenes),
            "n_bound_micro_batches": len(rows)}


def saturation_condition(plain: Sequence[PlainRun], batches: Mapping[str, list[MicroBatch]],
                         train_features: np.ndarray, logit_scale: float | None = None) -> dict:
    """Condition 5: epoch-1 saturation of plain FT, and how many saturated micro-batches hold a pair.

    With the backbone's ``logit_scale``, also what the captions allow (:func:`saturable_micro_batches`),
    a diagnostic beside the condition that never decides it."""
    share = saturated_share_epoch1([{"run": r.run_dir, "dynamics": r.dynamics} for r in plain])
    saturated, active, unmeasured = [], [], 0
    for run in plain:
        split = saturated_micro_batches(run.dynamics, batches[run.run_dir])
        saturated += split["saturated"]
        active += split["active"]
        unmeasured += split["unmeasured"]
    with_pair = None
    active_with_pair = None
    if not unmeasured and (saturated or active):
        with_pair = (float(np.mean([micro_batch_has_pair(train_features, rows) for rows in saturated]))
                     if saturated else None)
        active_with_pair = (float(np.mean([micro_batch_has_pair(train_features, rows) for rows in active]))
                            if active else None)
    values = {"saturated_share_epoch1": share, "saturated_with_pair": with_pair,
              "active_with_pair": active_with_pair, "n_saturated": len(saturated) if not unmeasured else None}
    if unmeasured:
        second = "pair share not measured (dynamics logs without per-micro-batch InfoNCE)"
    else:
        second = (f"{_pct(with_pair)} of the {len(saturated)} saturated hold a pair "
                  f"(non-saturated: {_pct(active_with_pair)})")
    ours = f"{_pct(share)} saturated; {second}"
    if logit_scale is not None and plain:
        bound = saturable_micro_batches(train_features, batches[plain[0].run_dir], logit_scale)
        values.update(bound)
        if bound["n_bound_micro_batches"]:
            ours += (f"; the captions allow {_pct(bound['saturable_share'])} (least InfoNCE of free image "
                     f"features, median {bound['least_infonce_median']:.2g}, {bound['n_bound_micro_batches']} "
                     f"micro-batches), {_pct(bound['scene_saturable_share'])} with one feature per scene as a "
                     f"tower gives (median {bound['scene_infonce_median']:.2g})")
    met = _all_met([_at_least(share, SATURATED_MIN), _at_least(with_pair, SATURATED_WITH_PAIR_MIN)])
    return condition("saturation", share, values, met, ours, [r.run_dir for r in plain],
                     unmeasured_steps=unmeasured)


def learnable_condition(plain: Sequence[PlainRun], zeroshot: ModelFeatures, scene_images: np.ndarray,
                        scene_captions: np.ndarray, caption_features: np.ndarray, settings: BootstrapSettings,
                        split: str, backbone: str = "") -> dict:
    """Condition 6: pairwise accuracy against each test scene's hardest near-duplicate, plain FT minus zero-shot.

    ``scene_images``: each scene's image row; ``scene_captions``: its caption row (in the features'
    numbering); ``caption_features``: the backbone's caption features (the partner's definition)."""
    partner, partner_cosine = hardest_partner(caption_features[scene_captions])

    def outcomes(features: ModelFeatures) -> Outcomes:
        correct = pairwise_outcomes(features.images[scene_images], features.texts[scene_captions], partner)
        return pairwise_outcomes_as_ranks(correct, f"{split}|pairwise")

    reference = outcomes(zeroshot)
    pairs = [(r.seed, outcomes(r.features)) for r in plain]
    values, intervals, per_seed = {}, {}, {}
    for d in DIRECTIONS:
        metric = f"{d}_r1"
        values[d], bounds = _difference(pairs, reference, metric, settings)
        if bounds is not None:
            intervals[d] = bounds
        values[f"plain_{d}"] = _mean_metric([o for _, o in pairs], metric)
        values[f"zeroshot_{d}"] = reference.value(metric)
        per_seed[d] = {seed: o.value(metric) - reference.value(metric) for seed, o in pairs}
    values["partner_near_duplicate_share"] = float((partner_cosine >= NEAR_DUPLICATE_COSINE).mean())
    values["partner_cosine_mean"] = float(partner_cosine.mean())
    ours = "; ".join(f"{ARROWS[d]} {_signed(values[d])}{_bracket(intervals.get(d))}" for d in DIRECTIONS)
    ours += (f" (plain FT {values['plain_i2t']:.1f} / {values['plain_t2i']:.1f} %, zero-shot "
             f"{values['zeroshot_i2t']:.1f} / {values['zeroshot_t2i']:.1f} %; partner ≥ {NEAR_DUPLICATE_COSINE:g} "
             f"for {_pct(values['partner_near_duplicate_share'])})")
    met = _all_met(_at_least(values[d], LEARNABLE_MIN) for d in DIRECTIONS)
    return condition("learnable_details", min(values[d] for d in DIRECTIONS), values, met, ours,
                     [backbone, *(r.run_dir for r in plain)], intervals, per_seed=per_seed)


def seeds_for_half_width(half_width: float, seeds: int, target: float = POWER_HALF_WIDTH_MAX) -> int:
    """How many seeds would bring a paired interval of ``half_width`` (measured over ``seeds``) to
    ``target``, if it shrank as 1/√seeds: ceil(seeds · (half_width / target)²), never fewer than ``seeds``.

    Why a projection: on the toy the interval is dominated by the spread between seeds (more test scenes
    hardly narrow it; benchmarks/README.md in git history, "Condition 7"), and a mean over k seeds has a spread 1/√k of
    one seed's. Any part of the width that more seeds do not narrow makes this a lower bound."""
    if not half_width >= 0 or seeds < 1:
        raise ValueError(f"need a half-width >= 0 and at least one seed, got {half_width!r} over {seeds!r}")
    return max(int(seeds), math.ceil(seeds * (half_width / target) ** 2 - 1e-9))


def power_condition(n_test: int, main_records: Mapping[str, Sequence[tuple[str, Mapping]]] | None,
                    settings: BootstrapSettings, sources: Iterable[str] = ()) -> dict:
    """Condition 7: test scenes, seeds of the main comparison and the width of its paired interval.

    ``main_records``: method key -> [(seed, evaluation record)] of the main experiment on this benchmark,
    for :data:`HN_METHOD` and :data:`BASELINE_METHOD` (None or a method missing: not measured)."""
    seeds = half_width = difference = seeds_for_target = None
    bounds = None
    if main_records and all(main_records.get(m) for m in (HN_METHOD, BASELINE_METHOD)):
        seeds = min(len(main_records[m]) for m in (HN_METHOD, BASELINE_METHOD))
        averages = {}
        for method in (HN_METHOD, BASELINE_METHOD):
            pairs = [(seed, outcomes_of(record)) for seed, record in main_records[method]]
            samples = _samples(pairs)
            parts = []
            for d in DIRECTIONS:
                value = float(np.mean([record["metrics"][f"{d}_r1"] for _, record in main_records[method]]))
                parts.append(Estimate.of(samples, f"{d}_r1", value))
            averages[method] = (parts[0] + parts[1]) / 2
        estimate = averages[HN_METHOD] - averages[BASELINE_METHOD]
        difference = float(estimate)
        bounds = interval(estimate, settings)
        if bounds is not None:
            half_width = (bounds[1] - bounds[0]) / 2
            seeds_for_target = seeds_for_half_width(half_width, seeds)
    values = {"test_scenes": n_test, "seeds": seeds, "half_width": half_width, "difference": difference,
              "seeds_for_target": seeds_for_target}
    ours = (f"{n_test:,} test scenes; {seeds if seeds is not None else '–'} seed(s); "
            + (f"{HN_METHOD} − {BASELINE_METHOD} {difference:+.2f}{_bracket(bounds)}, half-width {half_width:.2f}"
               if half_width is not None else "no paired interval (main comparison not measured)")
            + (f" (±{POWER_HALF_WIDTH_MAX:g} at ~{seeds_for_target} seeds if it shrinks as 1/√seeds)"
               if seeds_for_target is not None and half_width > POWER_HALF_WIDTH_MAX else ""))
    met = _all_met([n_test >= POWER_TEST_SCENES_MIN, _at_least(seeds, POWER_SEEDS_MIN),
                    None if half_width is None else half_width <= POWER_HALF_WIDTH_MAX])
    return condition("power", half_width, values, met, ours, sources,
                     {"difference": bounds} if bounds is not None else None)


def regime_report(benchmark: str, plain: Sequence[PlainRun], zeroshot_record: Mapping, zeroshot: ModelFeatures,
                  train_features: np.ndarray, text_image, main_records=None,
                  settings: BootstrapSettings | None = None, sources: Mapping[str, str] | None = None,
                  agreement: Mapping[str, float] | None = None, logit_scale: float | None = None,
                  transfer: Mapping[str, tuple[Mapping, str]] | None = None) -> dict:
    """The conditions of one benchmark (``results/regime/<benchmark>.json``), in :data:`CONDITION_KEYS` order.

    ``plain``: the plain runs with their test ``features``; ``zeroshot``: the backbone's test features
    (its caption rows are the caption cosines' features); ``train_features``: the backbone's features
    of the training captions (manifest order, the trainer's row numbering); ``text_image``: each test
    caption's image index; ``main_records``: see :func:`power_condition`; ``sources``: file paths
    (``zeroshot``, ``train_manifest``, ``backbone``, ``main_spec``) named in the conditions;
    ``logit_scale``: the backbone's, for condition 5's diagnostic (None: not computed); ``transfer``: see
    :func:`transfer_condition`."""
    if not plain:
        raise ValueError(f"{benchmark}: the regime conditions need at least one plain fine-tuning run")
    settings = settings or BootstrapSettings()
    sources = dict(sources or {})
    train_features = unit_features(train_features)
    caption_features = unit_features(zeroshot.texts)
    text_image = np.asarray(text_image, dtype=np.int64)
    batches = {r.run_dir: run_micro_batches(r.summary, train_features.shape[0]) for r in plain}
    # a scene: each image with its first caption
    scene_captions = np.array([int(np.flatnonzero(text_image == i)[0]) for i in range(zeroshot.images.shape[0])])
    split = f"{zeroshot_record.get('eval_benchmark', benchmark)}/{zeroshot_record.get('split', 'test')}"
    conditions = [
        strong_init_condition(zeroshot_record, settings, sources.get("zeroshot", "")),
        headroom_condition(plain, zeroshot_record, settings, sources.get("zeroshot", "")),
        errors_condition(plain, text_image, caption_features, agreement),
        batch_condition(plain, batches, train_features, sources.get("train_manifest", "")),
        geometry_condition(plain, batches, train_features, sources.get("train_manifest", "")),
        saturation_condition(plain, batches, train_features, logit_scale),
        learnable_condition(plain, zeroshot, np.arange(zeroshot.images.shape[0]), scene_captions, caption_features,
                            settings, split, sources.get("backbone", "")),
        power_condition(int(zeroshot.images.shape[0]), main_records, settings,
                        [sources.get("main_spec", ""), *(p for p in (sources.get("main_evals") or []))]),
        transfer_condition(transfer or {}, settings),
    ]
    for c in conditions:
        c["sources"] = [s for s in c["sources"] if s]
    return {"benchmark": benchmark, "near_duplicate_cosine": NEAR_DUPLICATE_COSINE,
            "n_train": int(train_features.shape[0]), "n_test_images": int(zeroshot.images.shape[0]),
            "n_test_captions": int(text_image.size), "plain_runs": [r.run_dir for r in plain],
            "statistics": {"confidence": settings.confidence, "resamples": settings.resamples, "seed": settings.seed},
            "met": sum(c["met"] is True for c in conditions), "conditions": conditions}


MET_MARKS = {True: "✓", False: "✗", None: "–"}


def format_conditions(report: Mapping) -> str:
    """One regime file's conditions as plain text, each beside its target (``hnclip premise --regime``)."""
    lines = [f"== regime conditions, {report['benchmark']}: {report['n_test_images']} test scenes, "
             f"{len(report['plain_runs'])} plain runs; near-duplicate = caption cosine >= "
             f"{report['near_duplicate_cosine']:g} under the backbone =="]
    for c in report["conditions"]:
        lines.append(f"{MET_MARKS[c['met']]} {c['key']} ({c['label']})")
        lines.append(f"    ours:   {c['ours']}")
        lines.append(f"    target: {c['target']}" + (f"   paper: {c['paper']}" if c.get("paper") else ""))
    lines.append(f"met: {report['met']} of {len(report['conditions'])}")
    return "\n".join(lines)
