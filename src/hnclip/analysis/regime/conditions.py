"""The seven conditions (and transfer), each measured and set beside its target; the benchmark's report
(:func:`regime_report`) and its text (:func:`format_conditions`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

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
    BATCH_NEAR_DUPLICATES_MIN,
    DIRECTIONS,
    ERRORS_NEAR_DUPLICATE_MIN,
    GEOMETRY_BAND,
    GEOMETRY_COSINE,
    HEADROOM_MIN,
    HN_METHOD,
    LEARNABLE_MIN,
    NEAR_DUPLICATE_COSINE,
    POWER_HALF_WIDTH_MAX,
    POWER_SEEDS_MIN,
    POWER_TEST_SCENES_MIN,
    SATURABLE_MICRO_BATCHES,
    SATURABLE_SCENES_MAX,
    SATURATED_MIN,
    SATURATED_WITH_PAIR_MIN,
    STRONG_INIT_MIN,
    TRANSFER_ZEROSHOT_MIN,
    _all_met,
    _at_least,
    _bracket,
    _pct,
    _signed,
    _within,
    condition,
)
from hnclip.analysis.regime.inputs import (
    ModelFeatures,
    PlainRun,
)
from hnclip.analysis.regime.measures import (
    MicroBatch,
    batch_near_duplicate_shares,
    error_near_duplicates,
    hardest_partner,
    micro_batch_has_pair,
    pairwise_outcomes,
    pairwise_outcomes_as_ranks,
    rank_and_top1,
    run_micro_batches,
    saturated_micro_batches,
    split_near_duplicate_share,
)
from hnclip.dynamics_log import SATURATION_LOSS


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
              "seeds_for_target": seeds_for_target, "against": against}
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
                  transfer: Mapping[str, tuple[Mapping, str]] | None = None, competitor: str | None = None) -> dict:
    """The conditions of one benchmark (``results/regime/<benchmark>.json``), in :data:`CONDITION_KEYS` order.

    ``plain``: the plain runs with their test ``features``; ``zeroshot``: the backbone's test features
    (its caption rows are the caption cosines' features); ``train_features``: the backbone's features
    of the training captions (manifest order, the trainer's row numbering); ``text_image``: each test
    caption's image index; ``main_records``: see :func:`power_condition`; ``sources``: file paths
    (``zeroshot``, ``train_manifest``, ``backbone``, ``main_spec``) named in the conditions;
    ``logit_scale``: the backbone's, for condition 5's diagnostic (None: not computed); ``transfer``: see
    :func:`transfer_condition`; ``competitor``: the config's strongest competitor (the power condition's and
    the headline's pair with HN-CLIP; None: Long-CLIP FT). ``comparisons``: HN-CLIP minus the competitor and
    minus Long-CLIP FT (:func:`seed_average_difference`), the summary's two rows."""
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
                        [sources.get("main_spec", ""), *(p for p in (sources.get("main_evals") or []))],
                        against=competitor or BASELINE_METHOD),
        transfer_condition(transfer or {}, settings),
    ]
    for c in conditions:
        c["sources"] = [s for s in c["sources"] if s]
    return {"benchmark": benchmark, "near_duplicate_cosine": NEAR_DUPLICATE_COSINE,
            "n_train": int(train_features.shape[0]), "n_test_images": int(zeroshot.images.shape[0]),
            "n_test_captions": int(text_image.size), "plain_runs": [r.run_dir for r in plain],
            "statistics": {"confidence": settings.confidence, "resamples": settings.resamples, "seed": settings.seed},
            "met": sum(c["met"] is True for c in conditions), "conditions": conditions,
            "comparisons": {role: seed_average_difference(main_records, HN_METHOD, method, settings)
                            for role, method in (("competitor", competitor), ("baseline", BASELINE_METHOD))
                            if method}}


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
