"""The eight conditions, each measured, set beside its target and decided by its interval (met, not met,
undecided, not measured: :func:`hnclip.analysis.regime.definitions.decide`); the benchmark's report
(:func:`regime_report`) and its text (:func:`format_conditions`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist

import numpy as np

from hnclip.analysis.binomial import newcombe_interval, wilson_interval
from hnclip.analysis.bootstrap import BootstrapSettings, Estimate, Outcomes, Samples, interval, outcomes_of
from hnclip.analysis.geometry import (
    batch_geometry,
    effective_dimensions,
    least_infonce_batches,
    least_infonce_scenes,
    unit_features,
)
from hnclip.analysis.premise import saturated_share_epoch1
from hnclip.analysis.regime.definitions import (
    ARROWS,
    BASELINE_METHOD,
    DIRECTIONS,
    ERRORS_NEAR_DUPLICATE_MIN,
    GEOMETRY_BAND,
    GEOMETRY_COSINE,
    HEADROOM_MIN,
    HN_METHOD,
    LEARNABLE_FIXED_MIN,
    NEAR_DUPLICATE_TEXT,
    NEAR_DUPLICATE_Z,
    POWER_HALF_WIDTH_MAX,
    POWER_SEEDS_MIN,
    POWER_TEST_SCENES_MIN,
    SATURABLE_MICRO_BATCHES,
    SATURABLE_SCENES_MAX,
    SATURATED_MIN,
    STRONG_INIT_MAX,
    STRONG_INIT_MIN,
    TRANSFER_ZEROSHOT_MIN,
    _all_met,
    _at_least,
    _bracket,
    _pct,
    _signed,
    _within,
    combine,
    condition,
    decide,
)
from hnclip.analysis.regime.inputs import (
    ModelFeatures,
    PlainRun,
)
from hnclip.analysis.regime.measures import (
    MicroBatch,
    NearDuplicates,
    batch_pair_counts,
    error_near_duplicates,
    hardest_partner,
    pairwise_outcomes,
    rank_and_top1,
    run_micro_batches,
    saturated_micro_batches,
)
from hnclip.dynamics_log import SATURATION_LOSS
from hnclip.plan import competitor_key


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
    """Condition "strong_init": the zero-shot backbone's test R@1, both directions, at least
    :data:`STRONG_INIT_MIN` (strong) and at most :data:`STRONG_INIT_MAX` (imperfect), each by its interval."""
    values, intervals = _zeroshot_r1(zeroshot, settings)
    ours = " / ".join(f"{ARROWS[d]} {values[d]:.1f}{_r1_bracket(intervals.get(d))}" for d in DIRECTIONS)
    parts = []
    for d in DIRECTIONS:
        bounds = intervals.get(d)
        parts.append(decide(values[d], bounds, STRONG_INIT_MIN))
        # at most the ceiling: -R@1 >= -max, the interval mirrored
        parts.append(decide(-values[d], None if bounds is None else (-bounds[1], -bounds[0]), -STRONG_INIT_MAX))
    met = combine(parts)
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
            parts.append(decide(r1[d], bounds.get(d), TRANSFER_ZEROSHOT_MIN))
        texts.append(f"{name}: " + " / ".join(f"{ARROWS[d]} {r1[d]:.1f}{_r1_bracket(bounds.get(d))}"
                                             for d in DIRECTIONS))
    met = combine(parts) if parts else "not measured"
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
    met = combine(decide(values[d], intervals.get(d), HEADROOM_MIN) for d in DIRECTIONS)
    return condition("headroom", min(values[d] for d in DIRECTIONS), values, met, ours,
                     [zeroshot_path, *(r.run_dir for r in plain)], intervals, per_seed=per_seed)


def _wilson(k: int, n: int, confidence: float) -> tuple[float, float] | None:
    return wilson_interval(k, n, confidence) if n else None


def _pct_interval(bounds) -> str:
    return "" if bounds is None else f" [{100 * bounds[0]:.1f}, {100 * bounds[1]:.1f}]"


def _base_rate_text(rate: Mapping) -> str:
    return (f"{_pct(rate['pair_share'], 2)} of pairs near-duplicate, {rate['partners_mean']:.1f} per caption, "
            f"{_pct(rate['with_partner'])} of captions have one")


def errors_condition(plain: Sequence[PlainRun], text_image, near: NearDuplicates,
                     agreement: Mapping[str, float] | None = None, confidence: float = 0.95) -> dict:
    """Condition 2: the share of plain FT's R@1 errors whose top-1 is a near-duplicate (``near``: the test
    captions' relation), pooled over seeds, against the target and against a random wrong answer's rate.

    Both are decided by the share's Wilson interval (errors of one model are not independent draws, so it
    says what the counted errors resolve, no more): met when it lies at or above the target and above the
    chance rate, which is exact (no interval) for the queries that erred."""
    totals = {d: [0, 0, 0.0] for d in DIRECTIONS}
    per_seed = {d: {} for d in DIRECTIONS}
    for run in plain:
        outcomes = rank_and_top1(run.features.images, run.features.texts, text_image)
        for d in DIRECTIONS:
            errors, hits, chance = error_near_duplicates(d, outcomes[f"{d}_rank"], outcomes[f"{d}_top1"],
                                                         text_image, near)
            for i, x in enumerate((errors, hits, chance)):
                totals[d][i] += x
            per_seed[d][run.seed] = hits / errors if errors else None
    share = {d: (totals[d][1] / totals[d][0] if totals[d][0] else None) for d in DIRECTIONS}
    chance = {d: (totals[d][2] / totals[d][0] if totals[d][0] else None) for d in DIRECTIONS}
    bounds = {d: _wilson(totals[d][1], totals[d][0], confidence) for d in DIRECTIONS}
    errors = sum(t[0] for t in totals.values())
    pooled = sum(t[1] for t in totals.values()) / errors if errors else None
    values = {**share, "pooled": pooled, **{f"{d}_errors": totals[d][0] for d in DIRECTIONS},
              **{f"{d}_chance": chance[d] for d in DIRECTIONS}}
    ours = "; ".join(f"{ARROWS[d]} {_pct(share[d])}{_pct_interval(bounds[d])} of {totals[d][0]} (chance "
                     f"{_pct(chance[d])})" for d in DIRECTIONS) + f" (pooled {_pct(pooled)})"
    ours += f"; test split: {_base_rate_text(near.base_rate())}"
    parts = [p for d in DIRECTIONS if share[d] is not None
             for p in (decide(share[d], bounds[d], ERRORS_NEAR_DUPLICATE_MIN),
                       decide(share[d], bounds[d], chance[d], ties_pass=False))]
    met = combine(parts) if parts else "not measured"
    extra = {"rank_agreement": dict(agreement)} if agreement else {}
    return condition("errors_near_duplicate", pooled, values, met, ours, [r.run_dir for r in plain],
                     {d: b for d, b in bounds.items() if b is not None}, per_seed=per_seed,
                     chance={d: chance[d] for d in DIRECTIONS}, **extra)


def batch_figures(plain: Sequence[PlainRun], batches: Mapping[str, list[MicroBatch]], near: NearDuplicates,
                  confidence: float = 0.95) -> dict:
    """What the trainer's micro-batches hold, a descriptive figure and no condition: per (plain run, epoch)
    the share holding a near-duplicate pair (``near``: the training captions' relation), the mean pairs per
    micro-batch, and what uniformly random micro-batches of that size hold. The trainer shuffles and HN-CLIP
    does not change the batch (§2.2), so these are arithmetic in the relation's base rate and the
    micro-batch's size: a condition on them would restate the shuffling."""
    shares, pairs, size, lowest = [], [], 0, None
    for run in plain:
        for k, n in batch_pair_counts(near, batches[run.run_dir]).values():
            shares.append(k / n)
            if lowest is None or k / n < lowest[0]:
                lowest = (k / n, _wilson(k, n, confidence))
        pairs += [near.pair_count(b.rows) for b in batches[run.run_dir]]
        size = max([size, *(len(b.rows) for b in batches[run.run_dir])])
    chance = near.chance_batch_share(size) if size else None
    return {"mean_share": float(np.mean(shares)) if shares else None, "min_share": lowest[0] if lowest else None,
            "min_share_interval": list(lowest[1]) if lowest and lowest[1] else None,
            "mean_pairs": float(np.mean(pairs)) if pairs else None, "micro_batch": size,
            "chance_share": None if chance is None or math.isnan(chance) else chance, "run_epochs": len(shares)}


def _batch_figures_text(figures: Mapping) -> str:
    return (f"micro-batches of {figures['micro_batch']} holding a pair: mean {_pct(figures['mean_share'])} over "
            f"{figures['run_epochs']} (run, epoch), min {_pct(figures['min_share'])}; random micro-batches "
            f"{_pct(figures['chance_share'])}; {figures['mean_pairs'] or 0:.1f} pairs per micro-batch")


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
    met = combine(_within(values[key], GEOMETRY_BAND[key]) for key in GEOMETRY_BAND)  # on values: every pair
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


def _mean_difference(first: Sequence[float], second: Sequence[float], confidence: float
                     ) -> tuple[float | None, tuple[float, float] | None]:
    """mean(first) - mean(second) with Welch's normal interval (micro-batches are many: hundreds per run)."""
    if not first or not second:
        return None, None
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    difference = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return difference, None
    half = NormalDist().inv_cdf(0.5 + confidence / 2) * math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return difference, (difference - half, difference + half)


def _saturation_split(plain: Sequence[PlainRun], batches: Mapping[str, list[MicroBatch]]) -> tuple[list, list, int]:
    saturated, active, unmeasured = [], [], 0
    for run in plain:
        split = saturated_micro_batches(run.dynamics, batches[run.run_dir])
        saturated += split["saturated"]
        active += split["active"]
        unmeasured += split["unmeasured"]
    return saturated, active, unmeasured


def saturation_condition(plain: Sequence[PlainRun], batches: Mapping[str, list[MicroBatch]],
                         train_features: np.ndarray, logit_scale: float | None = None,
                         near: NearDuplicates | None = None, confidence: float = 0.95) -> dict:
    """Condition 5: epoch-1 saturation of plain FT, and whether the saturated micro-batches hold *fewer*
    near-duplicate pairs than the non-saturated ones.

    The paper's mechanism (abstract: "a few highly similar negatives remain unresolved after the easy
    majority has already been separated"; §2: "this saturation leaves highly similar negatives unresolved
    despite rapid separation of easier negatives"): an unresolved near-duplicate keeps its micro-batch's
    InfoNCE above the threshold, so the saturated ones are those with fewer near-duplicate pairs. The
    saturated share is decided by its Wilson interval against :data:`SATURATED_MIN`; the pair sub-test by
    Welch's interval of (mean pairs per saturated micro-batch) - (per non-saturated one), met when it lies
    below 0. Beside it, the shares holding any pair (Newcombe's interval). With the backbone's
    ``logit_scale``, also what the captions allow (:func:`saturable_micro_batches`), a diagnostic beside the
    condition that never decides it."""
    near = near if near is not None else NearDuplicates.of(train_features)
    share = saturated_share_epoch1([{"run": r.run_dir, "dynamics": r.dynamics} for r in plain])
    saturated, active, unmeasured = _saturation_split(plain, batches)
    counted = not unmeasured and bool(saturated or active)
    sat_pairs = [near.pair_count(rows) for rows in saturated] if counted else []
    act_pairs = [near.pair_count(rows) for rows in active] if counted else []
    k_sat, k_act = sum(c > 0 for c in sat_pairs), sum(c > 0 for c in act_pairs)
    with_pair = k_sat / len(saturated) if counted and saturated else None
    active_with_pair = k_act / len(active) if counted and active else None
    share_bounds = _wilson(len(saturated), len(saturated) + len(active), confidence) if counted else None
    share_difference = share_difference_bounds = None
    if with_pair is not None and active_with_pair is not None:
        share_difference = with_pair - active_with_pair
        share_difference_bounds = newcombe_interval(k_sat, len(saturated), k_act, len(active), confidence)
    difference, difference_bounds = _mean_difference(sat_pairs, act_pairs, confidence)
    values = {"saturated_share_epoch1": share, "saturated_with_pair": with_pair,
              "active_with_pair": active_with_pair, "share_difference": share_difference,
              "saturated_pairs_mean": float(np.mean(sat_pairs)) if sat_pairs else None,
              "active_pairs_mean": float(np.mean(act_pairs)) if act_pairs else None,
              "pair_difference": difference,
              "n_saturated": len(saturated) if not unmeasured else None,
              "n_active": len(active) if not unmeasured else None}
    if unmeasured:
        second = "pair counts not measured (dynamics logs without per-micro-batch InfoNCE)"
    else:
        second = (f"{_count(values['saturated_pairs_mean'])} near-duplicate pairs per saturated micro-batch "
                  f"({len(saturated)}), {_count(values['active_pairs_mean'])} per non-saturated one ({len(active)}) "
                  f"(difference {_count(difference, '+')}{_bracket2(difference_bounds)}); holding any pair "
                  f"{_pct(with_pair)} / {_pct(active_with_pair)}")
    ours = f"{_pct(share)}{_pct_interval(share_bounds)} saturated; {second}"
    if logit_scale is not None and plain:
        bound = saturable_micro_batches(train_features, batches[plain[0].run_dir], logit_scale)
        values.update(bound)
        if bound["n_bound_micro_batches"]:
            ours += (f"; the captions allow {_pct(bound['saturable_share'])} (least InfoNCE of free image "
                     f"features, median {bound['least_infonce_median']:.2g}, {bound['n_bound_micro_batches']} "
                     f"micro-batches), {_pct(bound['scene_saturable_share'])} with one feature per scene as a "
                     f"tower gives (median {bound['scene_infonce_median']:.2g})")
    if difference is not None and difference_bounds is None:
        fewer = "undecided"  # fewer than two micro-batches on a side: no interval, nothing resolved
    else:
        fewer = decide(None if difference is None else -difference,
                       None if difference_bounds is None else (-difference_bounds[1], -difference_bounds[0]),
                       0.0, ties_pass=False)
    met = combine([decide(share, share_bounds, SATURATED_MIN), fewer])
    intervals = {}
    if share_bounds:
        intervals["saturated_share_epoch1"] = share_bounds
    if difference_bounds:
        intervals["pair_difference"] = difference_bounds
    if share_difference_bounds:
        intervals["share_difference"] = share_difference_bounds
    return condition("saturation", share, values, met, ours, [r.run_dir for r in plain], intervals,
                     unmeasured_steps=unmeasured, chance=active_with_pair)


def _count(value, sign: str = "") -> str:
    return "–" if value is None else f"{float(value):{sign}.2f}"


def _bracket2(bounds) -> str:
    return "" if bounds is None else f" [{bounds[0]:+.2f}, {bounds[1]:+.2f}]"


def learnable_condition(plain: Sequence[PlainRun], zeroshot: ModelFeatures, scene_images: np.ndarray,
                        scene_captions: np.ndarray, caption_features: np.ndarray, settings: BootstrapSettings,
                        split: str, backbone: str = "", near: NearDuplicates | None = None) -> dict:
    """Condition 6: of the test scenes the backbone gets wrong pairwise against its hardest near-duplicate,
    the share plain FT gets right (pooled over seeds, Wilson interval), per direction.

    Why a share of the backbone's errors rather than a difference of accuracies: a backbone that already
    tells 96 % of scenes from their twin leaves at most 4 points to gain, so a fixed number of points can be
    out of reach whatever fine-tuning learns; the share fixed reads the same at any zero-shot level
    (docs/toy-design.md, "Learnable details"). ``scene_images``: each scene's image row; ``scene_captions``:
    its caption row (in the features' numbering); ``caption_features``: the backbone's caption features (the
    partner's definition); ``near``: the test captions' relation (how many partners are near-duplicates)."""
    partner, partner_cosine = hardest_partner(caption_features[scene_captions])
    confidence = settings.confidence

    def correct(features: ModelFeatures) -> dict[str, np.ndarray]:
        return pairwise_outcomes(features.images[scene_images], features.texts[scene_captions], partner)

    reference = correct(zeroshot)
    runs = [(r.seed, correct(r.features)) for r in plain]
    values, intervals, per_seed, parts = {}, {}, {}, []
    for d in DIRECTIONS:
        wrong, right = ~reference[d], reference[d]
        fixed = sum(int((c[d] & wrong).sum()) for _, c in runs)
        broken = sum(int((~c[d] & right).sum()) for _, c in runs)
        n_wrong, n_right = int(wrong.sum()) * len(runs), int(right.sum()) * len(runs)
        values[d] = fixed / n_wrong if n_wrong else None
        values[f"{d}_broken"] = broken / n_right if n_right else None
        values[f"{d}_backbone_errors"] = int(wrong.sum())
        values[f"plain_{d}"] = float(np.mean([100 * c[d].mean() for _, c in runs]))
        values[f"zeroshot_{d}"] = float(100 * reference[d].mean())
        bounds = _wilson(fixed, n_wrong, confidence)
        if bounds is not None:
            intervals[d] = bounds
        per_seed[d] = {seed: (float((c[d] & wrong).sum() / wrong.sum()) if wrong.any() else None) for seed, c in runs}
        parts.append(decide(values[d], bounds, LEARNABLE_FIXED_MIN))
    is_near = (np.array([int(partner[i]) in near.partners[int(c)] for i, c in enumerate(scene_captions)])
               if near is not None else partner_cosine >= 0)
    values["partner_near_duplicate_share"] = float(is_near.mean())
    values["partner_cosine_mean"] = float(partner_cosine.mean())
    ours = "; ".join(f"{ARROWS[d]} {_pct(values[d])}{_pct_interval(intervals.get(d))} of "
                     f"{values[f'{d}_backbone_errors']} fixed (broken {_pct(values[f'{d}_broken'])})"
                     for d in DIRECTIONS)
    ours += (f" (pairwise accuracy plain FT {values['plain_i2t']:.1f} / {values['plain_t2i']:.1f} %, zero-shot "
             f"{values['zeroshot_i2t']:.1f} / {values['zeroshot_t2i']:.1f} %; the hardest partner is a "
             f"near-duplicate for {_pct(values['partner_near_duplicate_share'])})")
    present = [values[d] for d in DIRECTIONS if values[d] is not None]
    return condition("learnable_details", min(present) if present else None, values,
                     combine(parts), ours, [backbone, *(r.run_dir for r in plain)], intervals, per_seed=per_seed)


def seeds_for_half_width(half_width: float, seeds: int, target: float = POWER_HALF_WIDTH_MAX) -> int:
    """How many seeds would bring a paired interval of ``half_width`` (measured over ``seeds``) to
    ``target``, if it shrank as 1/√seeds: ceil(seeds · (half_width / target)²), never fewer than ``seeds``.

    Why a projection: on the toy the interval is dominated by the spread between seeds (more test scenes
    hardly narrow it; benchmarks/README.md in git history, "Condition 7"), and a mean over k seeds has a spread 1/√k of
    one seed's. Any part of the width that more seeds do not narrow makes this a lower bound."""
    if not half_width >= 0 or seeds < 1:
        raise ValueError(f"need a half-width >= 0 and at least one seed, got {half_width!r} over {seeds!r}")
    return max(int(seeds), math.ceil(seeds * (half_width / target) ** 2 - 1e-9))


def seed_average_difference(main_records: Mapping[str, Sequence[tuple[str, Mapping]]], method: str, against: str,
                            settings: BootstrapSettings) -> dict | None:
    """``method`` minus ``against`` in average R@1 (mean of both directions, over each one's seeds), with its
    paired interval (the same seeds paired, both on the same resampled test images): the headline comparison.
    None when either has no records."""
    if not (main_records and main_records.get(method) and main_records.get(against)):
        return None
    averages = {}
    for key in (method, against):
        samples = _samples([(seed, outcomes_of(record)) for seed, record in main_records[key]])
        parts = []
        for d in DIRECTIONS:
            value = float(np.mean([record["metrics"][f"{d}_r1"] for _, record in main_records[key]]))
            parts.append(Estimate.of(samples, f"{d}_r1", value))
        averages[key] = (parts[0] + parts[1]) / 2
    estimate = averages[method] - averages[against]
    bounds = interval(estimate, settings)
    return {"method": method, "against": against, "difference": float(estimate),
            "interval": list(bounds) if bounds is not None else None,
            "seeds": min(len(main_records[method]), len(main_records[against]))}


def power_condition(n_test: int, main_records: Mapping[str, Sequence[tuple[str, Mapping]]] | None,
                    settings: BootstrapSettings, sources: Iterable[str] = (), against: str = BASELINE_METHOD) -> dict:
    """Condition 7: test scenes, seeds of the main comparison and the width of its paired interval.

    ``main_records``: method key -> [(seed, evaluation record)] of the main experiment on this benchmark,
    for :data:`HN_METHOD` and ``against`` (the strongest competitor where the config names one, else
    :data:`BASELINE_METHOD`; None or a method missing: not measured)."""
    seeds = half_width = difference = seeds_for_target = None
    bounds = None
    compared = seed_average_difference(main_records, HN_METHOD, against, settings)
    if compared is not None:
        seeds, difference = compared["seeds"], compared["difference"]
        bounds = tuple(compared["interval"]) if compared["interval"] is not None else None
        if bounds is not None:
            half_width = (bounds[1] - bounds[0]) / 2
            seeds_for_target = seeds_for_half_width(half_width, seeds)
    values = {"test_scenes": n_test, "seeds": seeds, "half_width": half_width, "difference": difference,
              "seeds_for_target": seeds_for_target}
    ours = (f"{n_test:,} test scenes; {seeds if seeds is not None else '–'} seed(s); "
            + (f"{HN_METHOD} − {against} {difference:+.2f}{_bracket(bounds)}, half-width {half_width:.2f}"
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
                  transfer: Mapping[str, tuple[Mapping, str]] | None = None, competitor: str | None = None,
                  near_z: float = NEAR_DUPLICATE_Z) -> dict:
    """The conditions of one benchmark (``results/regime/<benchmark>.json``), in :data:`CONDITION_KEYS` order.

    ``plain``: the plain runs with their test ``features``; ``zeroshot``: the backbone's test features
    (its caption rows are the caption cosines' features); ``train_features``: the backbone's features
    of the training captions (manifest order, the trainer's row numbering); ``text_image``: each test
    caption's image index; ``main_records``: see :func:`power_condition`; ``sources``: file paths
    (``zeroshot``, ``train_manifest``, ``backbone``, ``main_spec``) named in the conditions;
    ``logit_scale``: the backbone's, for condition 5's diagnostic (None: not computed); ``transfer``: see
    :func:`transfer_condition`; ``competitor``: the config's strongest competitor (the power condition's and
    the headline's pair with HN-CLIP; None: Long-CLIP FT). ``comparisons``: HN-CLIP minus the competitor and
    minus Long-CLIP FT (:func:`seed_average_difference`), the summary's two rows. ``near_z``: the
    near-duplicate definition's parameter (:class:`NearDuplicates`; docs/toy-design.md shows how the verdicts
    move with it)."""
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
    near_test, near_train = NearDuplicates.of(caption_features, near_z), NearDuplicates.of(train_features, near_z)
    confidence = settings.confidence
    conditions = [
        strong_init_condition(zeroshot_record, settings, sources.get("zeroshot", "")),
        headroom_condition(plain, zeroshot_record, settings, sources.get("zeroshot", "")),
        errors_condition(plain, text_image, near_test, agreement, confidence),
        geometry_condition(plain, batches, train_features, sources.get("train_manifest", "")),
        saturation_condition(plain, batches, train_features, logit_scale, near_train, confidence),
        learnable_condition(plain, zeroshot, np.arange(zeroshot.images.shape[0]), scene_captions, caption_features,
                            settings, split, sources.get("backbone", ""), near_test),
        power_condition(int(zeroshot.images.shape[0]), main_records, settings,
                        [sources.get("main_spec", ""), *(p for p in (sources.get("main_evals") or []))],
                        against=competitor_key({"competitor": competitor, "baseline": BASELINE_METHOD})),
        transfer_condition(transfer or {}, settings),
    ]
    for c in conditions:
        c["sources"] = [s for s in c["sources"] if s]
    return {"benchmark": benchmark,
            "near_duplicates": {"definition": NEAR_DUPLICATE_TEXT, "z": near_test.z,
                                "floor": near_test.floor, "test": near_test.base_rate(),
                                "train": near_train.base_rate(),
                                "micro_batches": batch_figures(plain, batches, near_train, confidence)},
            "n_train": int(train_features.shape[0]), "n_test_images": int(zeroshot.images.shape[0]),
            "n_test_captions": int(text_image.size), "plain_runs": [r.run_dir for r in plain],
            "statistics": {"confidence": settings.confidence, "resamples": settings.resamples, "seed": settings.seed},
            "met": sum(c["decision"] == "met" for c in conditions),
            "undecided": sum(c["decision"] == "undecided" for c in conditions), "conditions": conditions,
            "comparisons": {role: seed_average_difference(main_records, HN_METHOD, method, settings)
                            for role, method in (("competitor", competitor), ("baseline", BASELINE_METHOD))
                            if method}}


MET_MARKS = {"met": "✓", "not met": "✗", "undecided": "?", "not measured": "–"}


def format_conditions(report: Mapping) -> str:
    """One regime file's conditions as plain text, each beside its target (``hnclip premise --regime``)."""
    near = report["near_duplicates"]
    lines = [f"== regime conditions, {report['benchmark']}: {report['n_test_images']} test scenes, "
             f"{len(report['plain_runs'])} plain runs; near-duplicate = {near['definition']} ==",
             f"   base rate: test {_base_rate_text(near['test'])}; train {_base_rate_text(near['train'])}"]
    if near.get("micro_batches"):
        lines.append(f"   descriptive (no condition): {_batch_figures_text(near['micro_batches'])}")
    for c in report["conditions"]:
        lines.append(f"{MET_MARKS[c['decision']]} {c['key']} ({c['label']}): {c['decision']}")
        lines.append(f"    ours:   {c['ours']}")
        lines.append(f"    target: {c['target']}" + (f"   paper: {c['paper']}" if c.get("paper") else ""))
    lines.append(f"met: {report['met']} of {len(report['conditions'])} ({report['undecided']} undecided)")
    return "\n".join(lines)
