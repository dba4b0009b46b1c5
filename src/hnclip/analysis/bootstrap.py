"""Uncertainty of every retrieval number: percentile bootstrap over test queries (and seeds), paired.

Why this shape. A Recall@K on a test split of n images is a mean of n per-query outcomes, so its noise
is the test set's sampling noise (about 2.8 points for R@1 near 70 % on 256 images) plus the seed's. The
paper's effects (+2.4 to +4.3 R@1) are of that size, so every number carries a 95 % interval and every
difference a *paired* one: both models' outcomes on the same resampled queries, so the shared difficulty
of the test set cancels.

- The resampling unit is the test **image**. I->T outcomes are per image; T->I outcomes are per caption,
  and an image's captions are resampled with it (several captions per image are not independent), so
  T->I R@K of a resample is (hits of the drawn images' captions) / (their caption count). Averages over
  the two directions ("average R@1") are taken on the same drawn images.
- One query draw per test split (seeded by the settings' seed and the split's identity), shared by every
  number on that split: the intervals do not depend on the order in which they are computed, and any two
  numbers on one split are paired automatically.
- Seeds: a cell with several seeds is resampled seeds first, then queries (each replicate draws as many
  seeds as the cell has, with replacement, and averages their R@K on the replicate's queries). Two cells
  with the same seeds are paired by seed (the same seed draw); others draw their seeds independently.
- A number is an :class:`Estimate`: its point value and the linear combination of (coefficient, cell,
  metric) it is made of. Sums, differences and scalings of estimates stay estimates, so a claim's margin
  ("HN-CLIP minus the strongest competitor", "the margin at 20 % minus the margin at 100 %") gets its
  paired interval from the same code as a table cell.

Everything here is numpy; the per-query outcomes come from the evaluation records (``ranks``: the rank of
each image's best own caption, of each caption's image, and each caption's image index).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

__all__ = ["EDGE_BLOCKS", "EDGE_COVERAGE", "BootstrapSettings", "Estimate", "Outcomes", "Samples", "bound_band",
           "interval", "outcomes_of", "replicates", "resolution", "settings_from_config"]

# one replicate chunk's index matrix is at most this many entries (memory: 8 bytes each)
_CHUNK_ENTRIES = 4_000_000
# A verdict must not depend on the resampling seed. A percentile bound drawn from B replicates has Monte
# Carlo error: its order statistic could have been any of those within the binomial band of
# :func:`bound_band` (coverage EDGE_COVERAGE). When 0 lies in that band the decision at that bound is the
# seed's, so :func:`judge` draws EDGE_BLOCKS - 1 further independent blocks of ``resamples`` replicates
# (10x the replicates, a band ~3x narrower) and, when 0 still lies in the band, calls the condition
# "on the edge": undecided, whichever side the point bound fell (over 20 seeds the T->I lower bound of a
# toy main-table column ranged from -0.39 to +0.1 at 2,000 resamples).
EDGE_COVERAGE = 0.999
EDGE_BLOCKS = 10


@dataclass(frozen=True)
class BootstrapSettings:
    """How intervals are drawn; the defaults are declared in the config schema (``statistics``)."""

    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0

    def __post_init__(self):
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"statistics.confidence must lie in (0, 1), got {self.confidence}")
        if int(self.resamples) < 100:
            raise ValueError(f"statistics.resamples must be at least 100, got {self.resamples}")


def settings_from_config(config: Mapping | None) -> BootstrapSettings:
    """The ``statistics`` section of a workflow config (absent keys: the dataclass defaults)."""
    section = dict((config or {}).get("statistics") or {})
    return BootstrapSettings(**{k: section[k] for k in ("confidence", "resamples", "seed") if k in section})


# ------------------------------------------------------------------------------------------ outcomes
class Outcomes:
    """Per-query outcomes of one evaluation: ranks of the best positive, per image and per caption."""

    __slots__ = ("i2t_rank", "t2i_rank", "text_image", "split_key", "_per_image")

    def __init__(self, i2t_rank, t2i_rank, text_image, split: str = ""):
        self.i2t_rank = np.asarray(i2t_rank, dtype=np.int64)
        self.t2i_rank = np.asarray(t2i_rank, dtype=np.int64)
        self.text_image = np.asarray(text_image, dtype=np.int64)
        n_images = self.i2t_rank.shape[0]
        if self.t2i_rank.shape != self.text_image.shape:
            raise ValueError(f"outcomes of {split or 'an evaluation'}: {self.t2i_rank.shape[0]} caption ranks but "
                             f"{self.text_image.shape[0]} caption image ids")
        if self.text_image.size and (self.text_image.min() < 0 or self.text_image.max() >= n_images):
            raise ValueError(f"outcomes of {split or 'an evaluation'}: caption image ids outside [0, {n_images})")
        # the split's identity: two evaluations on it share the query draw (and so are paired)
        digest = zlib.crc32(self.text_image.tobytes()) if self.text_image.size else 0
        self.split_key = f"{split}|{n_images}|{self.text_image.size}|{digest}"
        self._per_image: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def n_images(self) -> int:
        return int(self.i2t_rank.shape[0])

    def __deepcopy__(self, memo):  # immutable; pandas deep-copies DataFrame.attrs on every operation
        return self

    def per_image(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """(hits, queries) per image for ``i2t_r{k}`` or ``t2i_r{k}``: R@K of a set of images is
        100 * sum(hits) / sum(queries) over it."""
        if metric not in self._per_image:
            direction, k = _parse_metric(metric)
            if direction == "i2t":
                hits = (self.i2t_rank < k).astype(np.float64)
                count = np.ones(self.n_images)
            else:
                hits = np.bincount(self.text_image, weights=(self.t2i_rank < k).astype(np.float64),
                                   minlength=self.n_images)
                count = np.bincount(self.text_image, minlength=self.n_images).astype(np.float64)
            self._per_image[metric] = (hits, count)
        return self._per_image[metric]

    def value(self, metric: str) -> float:
        hits, count = self.per_image(metric)
        return 100.0 * float(hits.sum()) / float(count.sum())


def _parse_metric(metric: str) -> tuple[str, int]:
    direction, _, k = metric.partition("_r")
    if direction not in ("i2t", "t2i") or not k.isdigit():
        raise ValueError(f"metric {metric!r}: expected i2t_r<k> or t2i_r<k>")
    return direction, int(k)


def outcomes_of(record: Mapping, split: str | None = None) -> Outcomes | None:
    """The per-query outcomes an evaluation record stores (``record['ranks']``), or None for a record
    written before they were stored."""
    ranks = record.get("ranks")
    if not ranks:
        return None
    split = split if split is not None else f"{record.get('eval_benchmark', '')}/{record.get('split', 'test')}"
    return Outcomes(ranks["i2t"], ranks["t2i"], ranks["text_image"], split)


@dataclass(frozen=True, eq=False)
class Samples:
    """The outcomes behind one table cell: one :class:`Outcomes` per seed, all on the same test split."""

    seeds: tuple[str, ...]
    outcomes: tuple[Outcomes, ...]

    def __post_init__(self):
        if len(self.seeds) != len(self.outcomes) or not self.outcomes:
            raise ValueError("Samples needs one outcome per seed, and at least one")
        keys = {o.split_key for o in self.outcomes}
        if len(keys) != 1:
            raise ValueError(f"the seeds of one cell were evaluated on different test splits: {sorted(keys)}")

    @property
    def split_key(self) -> str:
        return self.outcomes[0].split_key

    def __deepcopy__(self, memo):
        return self

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, Outcomes | None]]) -> Samples | None:
        """From (seed, outcomes) pairs; None when any seed's outcomes are missing (no interval then)."""
        pairs = list(pairs)
        if not pairs or any(o is None for _, o in pairs):
            return None
        return cls(tuple(str(s) for s, _ in pairs), tuple(o for _, o in pairs))


# ------------------------------------------------------------------------------------------ estimates
@dataclass(frozen=True, eq=False)
class Estimate:
    """A number (``value``) and, when its per-query outcomes are known, the linear combination of cell
    metrics it is: ``terms`` = ((coefficient, samples, metric), ...). ``exact`` is False when some part of
    it has no outcomes (then it has no interval). Behaves as a float in comparisons and ``float()``."""

    value: float
    terms: tuple[tuple[float, Samples, str], ...] = ()
    exact: bool = True

    @classmethod
    def of(cls, samples: Samples | None, metric: str, value: float) -> Estimate:
        if samples is None:
            return cls(float(value), (), False)
        return cls(float(value), ((1.0, samples, metric),), True)

    @classmethod
    def constant(cls, value: float) -> Estimate:
        return cls(float(value), (), True)

    @property
    def has_interval(self) -> bool:
        return self.exact and bool(self.terms) and math.isfinite(self.value)

    def _combine(self, other, sign: float) -> Estimate:
        if not isinstance(other, Estimate):
            other = Estimate.constant(float(other))
        return Estimate(self.value + sign * other.value,
                        self.terms + tuple((sign * c, s, m) for c, s, m in other.terms),
                        self.exact and other.exact)

    def __add__(self, other):
        return self._combine(other, 1.0)

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, -1.0)

    def __rsub__(self, other):
        return Estimate.constant(float(other))._combine(self, -1.0)

    def __neg__(self):
        return Estimate(-self.value, tuple((-c, s, m) for c, s, m in self.terms), self.exact)

    def __mul__(self, factor):
        if isinstance(factor, Estimate):
            raise TypeError("an Estimate times an Estimate is not linear; bootstrap replicates instead")
        return Estimate(self.value * factor, tuple((c * factor, s, m) for c, s, m in self.terms), self.exact)

    __rmul__ = __mul__

    def __truediv__(self, divisor):
        if isinstance(divisor, Estimate):
            raise TypeError("an Estimate over an Estimate is not linear; bootstrap replicates instead")
        return self * (1.0 / divisor)

    def __float__(self):
        return float(self.value)

    def __lt__(self, other):
        return self.value < float(other)

    def __le__(self, other):
        return self.value <= float(other)

    def __gt__(self, other):
        return self.value > float(other)

    def __ge__(self, other):
        return self.value >= float(other)

    def __eq__(self, other):
        try:
            return self.value == float(other)
        except (TypeError, ValueError):
            return NotImplemented

    def __hash__(self):
        return hash(self.value)

    def __round__(self, digits=None):
        return round(self.value, digits)

    def __repr__(self):
        return f"Estimate({self.value!r}, {len(self.terms)} terms)"

    def __deepcopy__(self, memo):
        return self


def mean_of(values: Sequence) -> Estimate | float:
    """Mean of estimates (an estimate) or of plain numbers."""
    values = list(values)
    if not values:
        return math.nan
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total / len(values)


# ----------------------------------------------------------------------------------------- replicates
class _Draws:
    """The shared draws: one query-index matrix per test split, one seed draw per seed set; and each
    (outcomes, metric)'s replicate values on its split's draw, computed once. ``block`` > 0: a further
    independent block of as many replicates (:data:`EDGE_BLOCKS`), drawn only for a bound on the edge."""

    def __init__(self, settings: BootstrapSettings, block: int = 0):
        self.settings = settings
        self.block = block
        self._queries: dict[str, np.ndarray] = {}
        self._seed_draws: dict[tuple, np.ndarray] = {}
        self._values: dict[tuple[int, str], np.ndarray] = {}

    def _rng(self, *parts) -> np.random.Generator:
        if self.block:
            parts = (f"block {self.block}", *parts)
        text = "|".join(str(p) for p in parts).encode()
        return np.random.default_rng([int(self.settings.seed), zlib.crc32(text)])

    def queries(self, split_key: str, n_images: int) -> np.ndarray:
        if split_key not in self._queries:
            rng = self._rng("queries", split_key)
            self._queries[split_key] = rng.integers(0, n_images, size=(self.settings.resamples, n_images),
                                                    dtype=np.int32 if n_images < 2**31 else np.int64)
        return self._queries[split_key]

    def seed_draw(self, seeds: tuple[str, ...]) -> np.ndarray:
        key = tuple(sorted(seeds))
        if key not in self._seed_draws:
            rng = self._rng("seeds", *key)
            self._seed_draws[key] = rng.integers(0, len(key), size=(self.settings.resamples, len(key)))
        return self._seed_draws[key]

    def values(self, outcomes: Outcomes, metric: str) -> np.ndarray:
        key = (id(outcomes), metric)
        if key not in self._values:
            hits, count = outcomes.per_image(metric)
            idx = self.queries(outcomes.split_key, outcomes.n_images)
            out = np.empty(idx.shape[0])
            step = max(1, _CHUNK_ENTRIES // max(1, idx.shape[1]))
            for start in range(0, idx.shape[0], step):
                block = idx[start:start + step]
                out[start:start + step] = 100.0 * hits[block].sum(axis=1) / count[block].sum(axis=1)
            self._values[key] = (out, outcomes)  # keep outcomes alive so id() stays unique
        return self._values[key][0]

    def cell(self, samples: Samples, metric: str) -> np.ndarray:
        """Replicates of a cell's seed-averaged metric: seeds resampled (sorted-label draw), then queries."""
        per_seed = np.stack([self.values(o, metric) for o in samples.outcomes])  # [S, B]
        if len(samples.seeds) == 1:
            return per_seed[0]
        order = sorted(range(len(samples.seeds)), key=lambda i: samples.seeds[i])
        draw = np.asarray(order)[self.seed_draw(samples.seeds)]  # [B, S] indices into samples.outcomes
        return per_seed[draw, np.arange(per_seed.shape[1])[:, None]].mean(axis=1)


_DRAWS: dict[BootstrapSettings, _Draws] = {}


def _draws(settings: BootstrapSettings) -> _Draws:
    if settings not in _DRAWS:
        _DRAWS.clear()  # one settings object per process in practice; keep memory bounded
        _DRAWS[settings] = _Draws(settings)
    return _DRAWS[settings]


def replicates(estimate: Estimate, settings: BootstrapSettings = BootstrapSettings(),
               blocks: int = 1) -> np.ndarray | None:
    """The estimate's bootstrap replicates ([resamples * blocks]), or None when it has no per-query outcomes.

    Cells with the same seeds share their seed draw (paired by seed); cells on one test split share its
    query draw (paired by query); constants add as they are. ``blocks`` > 1 appends independent blocks of
    ``resamples`` replicates each (every term of the estimate on the same block's draws, so still paired).
    """
    if not estimate.has_interval:
        return None
    values = [_block_replicates(estimate, _draws(settings) if b == 0 else _Draws(settings, b))
              for b in range(blocks)]
    return values[0] if blocks == 1 else np.concatenate(values)


def _block_replicates(estimate: Estimate, draws: _Draws) -> np.ndarray:
    settings = draws.settings
    constant = estimate.value - sum(c * _point(s, m) for c, s, m in estimate.terms)
    total = np.full(settings.resamples, constant)
    for coefficient, samples, metric in estimate.terms:
        total += coefficient * draws.cell(samples, metric)
    return total


def _point(samples: Samples, metric: str) -> float:
    return float(np.mean([o.value(metric) for o in samples.outcomes]))


def interval(estimate, settings: BootstrapSettings = BootstrapSettings()) -> tuple[float, float] | None:
    """Percentile interval at ``settings.confidence`` of an estimate (None without outcomes)."""
    if not isinstance(estimate, Estimate):
        return None
    values = replicates(estimate, settings)
    if values is None:
        return None
    return percentile_interval(values, settings.confidence)


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)


def bound_band(values: np.ndarray, level: float, coverage: float = EDGE_COVERAGE) -> tuple[float, float]:
    """Where the ``level`` quantile of the replicates' distribution lies, given these B replicates: the
    order statistics at ranks B * level -/+ z * sqrt(B * level * (1 - level)) (the number of replicates
    below the true quantile is binomial), z for ``coverage``. Distribution-free; its width is the Monte
    Carlo error of a percentile bound."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    n = ordered.size
    spread = NormalDist().inv_cdf(0.5 + coverage / 2.0) * math.sqrt(n * level * (1.0 - level))
    low_rank = max(0, math.floor(n * level - spread) - 1)
    high_rank = min(n - 1, math.ceil(n * level + spread) - 1)
    return float(ordered[low_rank]), float(ordered[high_rank])


def resolution(estimate, settings: BootstrapSettings = BootstrapSettings(), power: float = 0.8) -> float | None:
    """The minimal detectable difference of a paired difference at this test size and these seeds: the
    true difference that a two-sided test at ``1 - confidence`` detects with probability ``power``,
    (z_{1-alpha/2} + z_power) times the bootstrap standard error."""
    if not isinstance(estimate, Estimate):
        return None
    values = replicates(estimate, settings)
    if values is None:
        return None
    z = NormalDist().inv_cdf
    return float((z(0.5 + settings.confidence / 2.0) + z(power)) * values.std(ddof=1))


@dataclass
class Condition:
    """One inequality a claim needs, with its interval: ``margin > 0`` (``>= 0`` when a tie passes).

    ``edge``: a bound lies within its Monte Carlo error of 0 even at :data:`EDGE_BLOCKS` times the
    resamples, so which side it falls is the resampling seed's (the status is then "undecided");
    ``resamples``: the replicates the interval was drawn from (None: not resampled)."""

    value: float
    ties_pass: bool
    low: float | None = None
    high: float | None = None
    status: str = field(default="undecided")  # met / failed / undecided
    edge: bool = False
    resamples: int | None = None


def _status(low: float, high: float, ties_pass: bool) -> str:
    if ties_pass:
        return "failed" if high < 0 else "met"
    return "met" if low > 0 else ("failed" if high <= 0 else "undecided")


def _on_edge(values: np.ndarray, confidence: float, ties_pass: bool) -> bool:
    """Whether a decision the interval takes at one of its bounds could go the other way on another draw of
    as many replicates: 0 lies inside the Monte Carlo band (:func:`bound_band`) of the bound that decides
    it. Strict: "met" is decided at the lower bound (> 0), "failed" at the upper (<= 0); a tie-passing
    condition fails at its upper bound (< 0). A degenerate band at exactly 0 decides nothing by chance."""
    alpha = (1.0 - confidence) / 2.0
    high_lo, high_hi = bound_band(values, 1.0 - alpha)
    if ties_pass:
        return high_lo < 0 <= high_hi
    low_lo, low_hi = bound_band(values, alpha)
    return (low_lo <= 0 < low_hi) or (high_lo <= 0 < high_hi)


def judge(margin, ties_pass: bool, settings: BootstrapSettings = BootstrapSettings(),
          bounds: tuple[float, float] | None = None) -> Condition:
    """A condition's status from its interval.

    Strict (``margin > 0``): met when the interval lies above 0, failed when it lies at or below 0,
    undecided when it straddles 0. A condition a tie meets (``>= 0``: "best or tied", "does not help"):
    met unless the interval lies wholly below 0. Without an interval (``bounds`` None and no outcomes):
    undecided, unless the value is exact (a constant) or infinite.
    """
    value = float(margin)
    if bounds is None and isinstance(margin, Estimate) and margin.has_interval:
        return _judge_replicates(margin, ties_pass, settings)
    if bounds is None and isinstance(margin, Estimate) and margin.exact and not margin.terms:
        bounds = (value, value)  # a constant: no sampling noise
    if bounds is None and not math.isfinite(value):
        bounds = (value, value)
    if bounds is None:
        return Condition(value, ties_pass, None, None, "undecided")
    low, high = bounds
    return Condition(value, ties_pass, low, high, _status(low, high, ties_pass))


def _judge_replicates(margin: Estimate, ties_pass: bool, settings: BootstrapSettings) -> Condition:
    """A resampled condition, its decision checked against the bounds' Monte Carlo error (:func:`_on_edge`):
    on the edge at ``resamples``, drawn again at :data:`EDGE_BLOCKS` times as many; still on the edge, the
    condition is undecided and says so."""
    values = replicates(margin, settings)
    edge = _on_edge(values, settings.confidence, ties_pass)
    if edge and EDGE_BLOCKS > 1:
        values = replicates(margin, settings, blocks=EDGE_BLOCKS)
        edge = _on_edge(values, settings.confidence, ties_pass)
    low, high = percentile_interval(values, settings.confidence)
    status = "undecided" if edge else _status(low, high, ties_pass)
    return Condition(float(margin), ties_pass, low, high, status, edge, int(values.size))

