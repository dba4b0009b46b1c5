"""The regime's definitions: thresholds, the paper's figures and bands, the condition labels, targets and
wording, and the helpers that judge and format one condition."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from hnclip import plan
from hnclip.analysis.premise import PAPER, PAPER_GEOMETRY
from hnclip.dynamics_log import SATURATION_LOSS

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
