"""Is a benchmark in the paper's regime? Eight conditions, each measured, set beside its target and decided by
its interval.

The paper's mechanism needs a particular situation: the backbone is a strong but imperfect initialisation
(Long-CLIP-L retrieves most DOCCI captions zero-shot, not all), fine-tuning still has room to improve on it,
the errors it could fix are confusions with near-duplicates, the captions look alike under the backbone's
text tower as the paper's do (a band, not a floor), standard InfoNCE saturates while near-duplicates stay
unresolved (the saturated micro-batches are those with fewer of them), the fine-tuned model could learn the
details that tell twins apart, the test split resolves effects of the paper's size, and the transfer targets
are benchmarks the backbone can read. What the trainer's micro-batches hold is a descriptive figure, not a
condition (arithmetic in the relation's base rate and the shuffling). :data:`CONDITION_KEYS` names the
eight conditions; :func:`regime_report`
measures them from arrays and records (no model: the features come from :mod:`hnclip.analysis.regime_job`),
for any benchmark, real or synthetic.

Shared definitions:

- caption cosine: the cosine of two captions' L2-normalised features under the *backbone's* text tower
  (the fine-tuning start), whatever model is being judged;
- near-duplicate: two captions whose caption cosine is at least :data:`NEAR_DUPLICATE_Z` standard deviations
  above either one's mean cosine to the split, and at least :data:`GEOMETRY_COSINE` (:class:`NearDuplicates`;
  relative to each caption's own distribution, so its base rate is printed with every condition that uses it);
- plain FT: the plain Long-CLIP fine-tuning runs on the benchmark (role ``plain`` of
  :func:`hnclip.analysis.premise.run_role`: gamma 0, no token term, full data), every seed there is;
- the trainer's micro-batches: the slices of :func:`hnclip.training.batches.epoch_order` that
  :mod:`hnclip.train` trains, rebuilt from a run's summary (:func:`trainer_micro_batches`);
- a test scene: one test image with its first caption (the benchmarks here have one caption per image).

Each condition is a dict (:func:`condition`): ``key``, ``label``, ``value`` (the headline number),
``values`` (every number behind it), ``intervals`` (95 % paired bootstrap intervals, where the numbers
are means over test scenes; Wilson intervals where they are counted shares), ``ours`` (the values as text),
``target``, ``paper``, ``decision`` (met, not met, undecided, not measured: each part decided by its
interval as a claim's margin is, :func:`decide`), ``met`` (its bool: True, False, None when undecided or
unmeasured), ``chance`` where chance gives a rate, ``definition`` and ``sources``.

The package, one module per job: :mod:`.definitions` (thresholds, targets, wording), :mod:`.measures`
(micro-batches, caption cosines, retrieval outcomes, logs), :mod:`.inputs` (the runs and files read and the
report file), :mod:`.conditions` (each condition, the report and its text). Every name is importable from
``hnclip.analysis.regime``.
"""

from __future__ import annotations

from hnclip.analysis.regime.conditions import (
    MET_MARKS,
    batch_figures,
    errors_condition,
    format_conditions,
    geometry_condition,
    headroom_condition,
    learnable_condition,
    power_condition,
    regime_report,
    saturable_micro_batches,
    saturation_condition,
    seed_average_difference,
    seeds_for_half_width,
    strong_init_condition,
    transfer_condition,
)
from hnclip.analysis.regime.definitions import (
    ARROWS,
    BASELINE_METHOD,
    CONDITION_KEYS,
    DECISIONS,
    DEFINITIONS,
    DIRECTIONS,
    ERRORS_NEAR_DUPLICATE_MIN,
    EXTREME_COSINE,
    GEOMETRY_BAND,
    GEOMETRY_COSINE,
    HEADROOM_MIN,
    HN_METHOD,
    LABELS,
    LEARNABLE_FIXED_MIN,
    NEAR_DUPLICATE_TEXT,
    NEAR_DUPLICATE_Z,
    PAPER_FIGURES,
    POWER_HALF_WIDTH_MAX,
    POWER_SEEDS_MIN,
    POWER_TEST_SCENES_MIN,
    SATURABLE_MICRO_BATCHES,
    SATURABLE_SCENES_MAX,
    SATURATED_MIN,
    STRONG_INIT_MAX,
    STRONG_INIT_MIN,
    TARGETS,
    TRANSFER_ZEROSHOT_MIN,
    _all_met,
    combine,
    condition,
    decide,
)
from hnclip.analysis.regime.inputs import (
    ModelFeatures,
    PlainRun,
    load_plain_runs,
    load_regime,
)
from hnclip.analysis.regime.measures import (
    MicroBatch,
    NearDuplicates,
    batch_pair_counts,
    error_near_duplicates,
    hardest_partner,
    micro_batch_has_extreme_pair,
    pairwise_outcomes,
    pairwise_outcomes_as_ranks,
    rank_and_top1,
    run_micro_batches,
    saturated_micro_batches,
    trainer_micro_batches,
)
from hnclip.dynamics_log import SATURATION_LOSS

__all__ = [
    "ARROWS",
    "BASELINE_METHOD",
    "CONDITION_KEYS",
    "DECISIONS",
    "DEFINITIONS",
    "DIRECTIONS",
    "ERRORS_NEAR_DUPLICATE_MIN",
    "EXTREME_COSINE",
    "GEOMETRY_BAND",
    "GEOMETRY_COSINE",
    "HEADROOM_MIN",
    "HN_METHOD",
    "LABELS",
    "LEARNABLE_FIXED_MIN",
    "MET_MARKS",
    "NEAR_DUPLICATE_Z",
    "NEAR_DUPLICATE_TEXT",
    "PAPER_FIGURES",
    "POWER_HALF_WIDTH_MAX",
    "POWER_SEEDS_MIN",
    "POWER_TEST_SCENES_MIN",
    "SATURABLE_MICRO_BATCHES",
    "SATURABLE_SCENES_MAX",
    "SATURATED_MIN",
    "SATURATION_LOSS",
    "STRONG_INIT_MAX",
    "STRONG_INIT_MIN",
    "TARGETS",
    "TRANSFER_ZEROSHOT_MIN",
    "MicroBatch",
    "ModelFeatures",
    "NearDuplicates",
    "PlainRun",
    "batch_figures",
    "batch_pair_counts",
    "combine",
    "condition",
    "decide",
    "error_near_duplicates",
    "errors_condition",
    "format_conditions",
    "geometry_condition",
    "hardest_partner",
    "headroom_condition",
    "learnable_condition",
    "load_plain_runs",
    "load_regime",
    "micro_batch_has_extreme_pair",
    "pairwise_outcomes",
    "pairwise_outcomes_as_ranks",
    "power_condition",
    "seed_average_difference",
    "rank_and_top1",
    "regime_report",
    "run_micro_batches",
    "saturable_micro_batches",
    "saturated_micro_batches",
    "saturation_condition",
    "seeds_for_half_width",
    "strong_init_condition",
    "trainer_micro_batches",
    "transfer_condition",
]

_all_met = _all_met  # tests/test_regime.py reads the private helper through this module
