"""The premise (abstract, §1, §2.4, appendix C): the regime figures measured on the runs' own logs.

Each is decided by an interval, as every retrieval verdict is: a share of counted micro-batches (probed
micro-batches, probed steps) by its Wilson interval (:mod:`hnclip.analysis.binomial`), a median by its
distribution-free interval, where InfoNCE flattens by the bootstrap over each epoch's steps
(:func:`hnclip.analysis.premise.infonce_flattening`), and the retrieval error after that point by the
paired bootstrap of the per-epoch evaluations (the epochs table). A share's threshold is a strict
inequality: it holds when the interval lies above the paper's figure, fails when it lies below, and is
inconclusive when it straddles it. A premise the runs do not show (plain InfoNCE that never saturates,
never flattens before the last epoch) makes the claim that needs it inconclusive, or "does not hold"
where the interval refutes it: never a "holds" that compares nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from hnclip import paths
from hnclip.analysis.binomial import wilson_interval
from hnclip.analysis.claims.base import (
    Context,
    cell_value,
    claim,
    current_settings,
    direction_word,
    docci_group,
    interval_of,
    round_margin,
)
from hnclip.analysis.premise import EXACT_ZERO_KEYS, KEY_ROLE, PREMISE_KEYS
from hnclip.analysis.tables import DIRECTION_LABELS

# The premise measurements (hnclip.analysis.premise): shares are fractions in [0, 1], errors percent
# (100 - R@1), ratios and cosines plain numbers; ``infonce_flat_epoch`` is None when InfoNCE never
# flattened within the run.
# A value may be None: no run of the role that measures it (hnclip.analysis.premise.KEY_ROLE) is in the config.
SHARE_KEYS = ("saturated_share_epoch1", *EXACT_ZERO_KEYS, "hn_active_share_min_epoch", "grad_cosine_positive_share")
ERROR_KEYS = ("error_i2t_first", "error_i2t_last", "error_t2i_first", "error_t2i_last")
assert set(SHARE_KEYS + ERROR_KEYS) < set(PREMISE_KEYS)


def check_premise(premise: Mapping) -> dict:
    """The premise dict, checked: every key of :data:`PREMISE_KEYS` present, shares in [0, 1], errors in
    [0, 100] percent; an error names the key (the producer is another module)."""
    missing = [k for k in PREMISE_KEYS if k not in premise]
    if missing:
        raise ValueError(f"premise measurements lack key(s) {missing}")
    for key in PREMISE_KEYS:
        value = premise[key]
        if value is None:  # not measured (or, for infonce_flat_epoch, never flat)
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise ValueError(f"premise measurement {key!r} is {value!r}, expected a number")
        if key in SHARE_KEYS and not 0.0 <= value <= 1.0:
            raise ValueError(f"premise measurement {key!r} = {value} is a share, expected a fraction in [0, 1]")
        if key in ERROR_KEYS and not 0.0 <= value <= 100.0:
            raise ValueError(f"premise measurement {key!r} = {value} is a retrieval error, expected percent")
    return dict(premise)


def _gamma(ctx: Context) -> float | None:
    """The HN runs' gamma: the premise measurements' (``hnclip premise --gamma``), else the specs'."""
    for source in (ctx.premise or {}, *ctx.specs.values()):
        if source and source.get("gamma") is not None:
            return float(source["gamma"])
    return None


def _measured(ctx: Context, criterion: str, needs: list[str]) -> tuple[dict | None, dict | None]:
    """(the checked measurements, None), or (None, the judged claim's "no data" verdict) when the figures it
    ``needs`` are not all measured (None: no run of their role is in the config)."""
    if not ctx.premise:
        return None, ctx.no_data(criterion, "no premise measurements (hnclip.analysis.premise)")
    p = check_premise(ctx.premise)
    unmeasured = [k for k in needs if p.get(k) is None]
    if not unmeasured:
        return p, None
    gamma = _gamma(ctx)
    at = f"gamma {gamma:g}" if gamma is not None else "the config's gamma"
    role_words = {"plain": "plain InfoNCE fine-tuning (gamma 0, no token term)",
                  "hn": f"HN-only fine-tuning ({at}, no token term)", "hnclip": f"HN-CLIP ({at})"}
    roles = sorted({KEY_ROLE[k] for k in unmeasured})
    return None, ctx.no_data(criterion, "no full-data run of "
                         + " or ".join(role_words[r] for r in roles) + " in this config")


def _share_margin(p: Mapping, key: str, threshold: float, confidence: float) -> tuple[float, tuple | None, str]:
    """(share - threshold, its Wilson bounds - threshold or None without counts, "k of n" or "")."""
    counts = (p.get("counts") or {}).get(key)
    if not counts:
        return p[key] - threshold, None, ""
    k, n = counts
    low, high = wilson_interval(k, n, confidence)
    return k / n - threshold, (low - threshold, high - threshold), f"{k} of {n}"


def _interval_text(value: float, bounds: tuple | None, threshold: float = 0.0, digits: int = 3) -> str:
    if bounds is None:
        return f"{value + threshold:.{digits}f} (no counts: judged on its value)"
    return f"{value + threshold:.{digits}f} [{bounds[0] + threshold:.{digits}f}, {bounds[1] + threshold:.{digits}f}]"


def _share_verdict(ctx: Context, criterion: str, figure: str, threshold: float,
                   measure: str, evidence_extra: Mapping | None = None) -> dict:
    """A claim whose one condition is a counted share above ``threshold`` (strict, Wilson interval)."""
    p, missing = _measured(ctx, criterion, [figure])
    if missing:
        return missing
    confidence = current_settings().confidence
    margin, bounds, counted = _share_margin(p, figure, threshold, confidence)
    evidence = {f"{measure} ({counted})" if counted else measure: _interval_text(margin, bounds, threshold),
                **(evidence_extra or {})}
    return ctx.verdict(criterion, [(margin, False)], evidence, {measure: p[figure]},
                        bounds=[bounds] if bounds is not None else None, interval_kind="Wilson interval",
                        measure_intervals={measure: [b + threshold for b in bounds]} if bounds is not None else None)


@claim("premise_saturation", "abstract; §1",
       "On dense captions, the loss falls below 10^-3 on 80% of batches within the first epoch.",
       "InfoNCE saturates on most first-epoch batches")
def premise_saturation(ctx: Context) -> dict:
    criterion = ("share of the plain runs' first-epoch micro-batches whose standard InfoNCE < 10^-3 > 0.80, "
                 "decided by its Wilson interval (counted micro-batches)")
    return _share_verdict(ctx, criterion, "saturated_share_epoch1", 0.80,
                          "saturated share, epoch 1")


@claim("premise_exact_zero", "abstract; §1",
       "Its gradient reaches exact zero in fp32 in 47% of measurements.",
       "InfoNCE's gradient underflows to exactly zero")
def premise_exact_zero(ctx: Context) -> dict:
    criterion = ("share of the plain runs' probed micro-batches whose fp32 InfoNCE parameter gradient is exactly "
                 "zero > 0.47, decided by its Wilson interval (the paper does not say which gradient; the "
                 "others are shown)")
    p, missing = _measured(ctx, criterion, ["exact_zero.param_grad.fp32"])
    if missing:
        return missing
    others = {f"exactly zero: {k.split('.')[1].replace('_', ' ')} (fp32)": round(p[k], 3)
              for k in SHARE_KEYS if k.startswith("exact_zero.") and k.endswith(".fp32") and p[k] is not None
              and k != "exact_zero.param_grad.fp32"}
    return _share_verdict(ctx, criterion, "exact_zero.param_grad.fp32", 0.47,
                          "exact-zero share, parameter gradient, fp32", others)


@claim("premise_active", "§2.4",
       "26% of batches remain active in every epoch.",
       "the HN objective keeps batches active")
def premise_active(ctx: Context) -> dict:
    """What the sentence claims: under the boosted objective, training signal survives: in every epoch at
    least about a quarter of the micro-batches keep the *trained* objective active (>= 10^-3, the
    saturation threshold). §2.2 says it of that objective ("keeps loss and gradients active on hard
    negatives"); the figure is a floor the paper reports, not a ceiling. Decided, per epoch, by the Wilson
    interval of the HN-only runs' boosted-objective active share against 0.26. Shown beside it, not
    deciding: the same runs' share with the *standard* InfoNCE >= 10^-3 (a reading that leans against HN,
    which lowers the loss it is read on) and the plain runs' share."""
    criterion = ("in every epoch, the HN-only runs' share of micro-batches whose trained (boosted) objective is "
                 "still active (>= 10^-3, the saturation threshold) >= 0.26, the paper's figure as the floor "
                 "\"remain active\" states, decided by its Wilson interval. Shown beside it and not deciding: "
                 "the same runs' share by the standard InfoNCE, the plain runs' share, and on the same "
                 "micro-batches how many only the HN run and how many only the plain run keeps active")
    p, missing = _measured(ctx, criterion, ["hn_active_share_min_epoch"])
    if missing:
        return missing
    per_epoch = [e for e in p.get("active_per_epoch") or [] if e.get("objective")]
    if not per_epoch and p.get("objective_active_min_epoch") is not None:  # a premise file without counts
        share = p["objective_active_min_epoch"]
        return ctx.verdict(criterion, [(share - 0.26, False)], {"smallest per-epoch boosted-objective active share":
                                                                round(share, 3)},
                           {"active share, smallest epoch": share})
    if not per_epoch:
        return ctx.no_data(criterion, "the HN runs' logs have no objective_active_share (logged since the "
                                      "boosted objective's active share was added): rerun them")
    confidence = current_settings().confidence
    margins, bounds, evidence, shares, share_bounds = [], [], {}, {}, {}
    for e in per_epoch:
        epoch = e["epoch"]
        k, n = e["objective"]
        low, high = wilson_interval(k, n, confidence)
        margins.append((k / n - 0.26, False))
        bounds.append((low - 0.26, high - 0.26))
        shares[str(epoch)], share_bounds[str(epoch)] = k / n, [low, high]
        evidence[f"epoch {epoch}: HN-only runs, boosted objective active ({k} of {n}; paper: 26 %)"] = \
            f"{k / n:.3f} [{low:.3f}, {high:.3f}]"
        _beside(evidence, e)
    low_epoch = min(shares, key=shares.get)
    return ctx.verdict(criterion, margins, evidence,
                       {"active share, smallest epoch": shares[low_epoch], "active share per epoch": shares,
                        "standard InfoNCE active share, smallest epoch (not deciding)": p["hn_active_share_min_epoch"]},
                       bounds=bounds, interval_kind="Wilson interval",
                       measure_intervals={"active share, smallest epoch": share_bounds[low_epoch],
                                          "active share per epoch": share_bounds})


def _beside(evidence: dict, e: Mapping) -> None:
    """The non-deciding figures of one epoch of ``active_per_epoch``."""
    epoch = e["epoch"]
    for key, who in (("hn", "HN-only runs, standard InfoNCE"), ("plain", "plain runs")):
        if e.get(key):
            k, n = e[key]
            evidence[f"not deciding: epoch {epoch}: {who} active share ({k} of {n})"] = round(k / n, 3)
    if e.get("paired") is not None and e.get("hn_only") is not None:
        evidence[f"not deciding: epoch {epoch}: micro-batches active only under HN / only plain (of "
                 f"{e['paired']} paired)"] = f"{e['hn_only']} / {e['plain_only']}"


def _ratio_peaks(dynamics: Mapping[str, pd.DataFrame] | None) -> dict[str, float]:
    """Largest finite boosted/standard gradient-norm ratio each HN run logged (appendix C: 10^5-10^8).

    A run that did not probe (``train.probe_runs: read`` probes only the runs the premise and the
    gradient-dynamics figure read) logged no ratio and is left out."""
    peaks = {}
    for label, df in (dynamics or {}).items():
        if "grad_ratio" not in df.columns:
            continue
        ratio = pd.to_numeric(df["grad_ratio"], errors="coerce")
        ratio = ratio[np.isfinite(ratio)]
        if len(ratio):
            peaks[label] = float(ratio.max())
    return peaks


def _log10(x: float) -> float:
    return math.log10(x) if x > 0 else -math.inf


@claim("premise_ratio", "§2.4; C",
       "The boosted gradient exceeds the standard gradient by 10^2–10^6× in per-epoch median where the latter "
       "is nonzero.",
       "the boosted gradient is 10^2-10^6 times the standard one")
def premise_ratio(ctx: Context) -> dict:
    criterion = ("every per-epoch median of |boosted gradient| / |standard gradient| (HN-only runs, probed steps "
                 "where the standard one is nonzero) lies in [10^2, 10^6], each median decided by its "
                 "distribution-free interval")
    p, missing = _measured(ctx, criterion, ["ratio_median_per_epoch_min", "ratio_median_per_epoch_max"])
    if missing:
        result = missing
    else:
        low, high = p["ratio_median_per_epoch_min"], p["ratio_median_per_epoch_max"]
        medians = p.get("ratio_medians") or []
        evidence = {"smallest per-epoch median ratio": low, "largest per-epoch median ratio": high}
        if medians:
            margins, bounds = [], []
            for m in medians:
                margins += [(_log10(m["median"]) - 2, False), (6 - _log10(m["median"]), False)]
                bounds += [(_log10(m["low"]) - 2, _log10(m["high"]) - 2), (6 - _log10(m["high"]), 6 - _log10(m["low"]))]
                evidence[f"{paths.run_of_dir(Path(m['run']).as_posix())}, epoch {m['epoch']} "
                         f"(median of {m['n']})"] = f"{m['median']:.3g} [{m['low']:.3g}, {m['high']:.3g}]"
            result = ctx.verdict(criterion, margins, evidence,
                                  {"per-epoch median ratio": {"smallest": low, "largest": high}}, bounds=bounds,
                                  interval_kind="distribution-free interval of the median")
        else:  # a premise file without the medians' intervals: judged on the values
            result = ctx.verdict(criterion, [(_log10(low) - 2, False), (6 - _log10(max(high, 1e-300)), False)],
                                  evidence, {"per-epoch median ratio": {"smallest": low, "largest": high}})
    peaks = _ratio_peaks(ctx.dynamics)
    if peaks:  # a measure beside the verdict, whatever it is
        result["measures"]["peak gradient ratio per run"] = peaks
    return result


@claim("premise_cosine", "C",
       "0.58 median gradient cosine, positive in 98% of measurements, indicates sustained directional "
       "alignment with the standard objective.",
       "the boosted gradient points along the standard one")
def premise_cosine(ctx: Context) -> dict:
    criterion = ("the cosine between boosted and standard gradients (HN-only runs, probed steps) is positive in "
                 "> 98 % of measurements and its median > 0 (positive in > 50 %), each decided by the Wilson "
                 "interval of the positive share")
    p, missing = _measured(ctx, criterion, ["grad_cosine_positive_share", "grad_cosine_median"])
    if missing:
        return missing
    confidence = current_settings().confidence
    at98, bounds98, counted = _share_margin(p, "grad_cosine_positive_share", 0.98, confidence)
    at50, bounds50, _ = _share_margin(p, "grad_cosine_positive_share", 0.5, confidence)
    if bounds98 is None:  # no counts: the median itself, judged on its value
        at50, bounds50 = p["grad_cosine_median"], None
    share = f"share of positive cosines ({counted})" if counted else "share of positive cosines"
    return ctx.verdict(criterion, [(at98, False), (at50, False)],
                        {"median cosine": round(p["grad_cosine_median"], 3),
                         share: _interval_text(at98, bounds98, 0.98)},
                        {"median gradient cosine": p["grad_cosine_median"],
                         "positive-cosine share": p["grad_cosine_positive_share"]},
                        bounds=None if bounds98 is None else [bounds98, bounds50], interval_kind="Wilson interval")


# premise_error's given bounds: where InfoNCE flattens (its retrieval margins are Estimates, paired)
_FLAT_KIND = "bootstrap interval over each epoch's steps"


def _train_set_of(ctx: Context, group) -> str | None:
    """The train set of the main table's runs on ``group`` (a benchmark label), from the main spec."""
    for cell in (ctx.specs.get("main") or {}).get("cells", []):
        if cell["group"] == group and not cell.get("zeroshot"):
            return cell["run"]["train_set"]
    return None


@claim("premise_error", "§2.4",
       "On DOCCI, retrieval error continues falling from 20.5% to 15.1% for T→I and from 22.9% to 17.1% for "
       "I→T after standard InfoNCE flattens.",
       "retrieval error keeps falling after InfoNCE flattens")
def premise_error(ctx: Context) -> dict:
    epochs = ctx.tables.get("epochs")
    groups = list(dict.fromkeys(epochs.index.get_level_values("benchmark"))) if epochs is not None and not epochs.empty \
        else []
    group, where = docci_group(groups, ctx.scale)
    criterion = (f"on {where or 'DOCCI'}: the plain runs' standard InfoNCE flattens before the last epoch (the first "
                 "epoch F whose fall to any later epoch's mean is below a factor 2, decided by the bootstrap interval "
                 f"over each epoch's steps), and {ctx.hn_row}'s retrieval error (100 - R@1) after the last epoch is "
                 "below its error after epoch F, in both directions (paired bootstrap of the per-epoch evaluations)")
    p, missing = _measured(ctx, criterion, ["saturated_share_epoch1"])
    if missing:
        return missing
    if group is None:
        return ctx.no_data(criterion, f"no per-epoch evaluation of {ctx.hn_row}")
    train_set = _train_set_of(ctx, group)
    flat = (p.get("infonce_flat") or {}).get(train_set or "")
    if flat is None:
        return ctx.no_data(criterion, f"no plain run on {train_set or group}'s train set with a logged "
                                                  "InfoNCE per epoch")
    last = max(int(k[2]) for k in epochs.index if k[0] == ctx.hn_row and k[1] == group) \
        if any(k[0] == ctx.hn_row and k[1] == group for k in epochs.index) else None
    evidence = {f"InfoNCE per epoch (plain runs on {train_set})": ", ".join(f"{m:.3g}" for m in flat["mean"])}
    for epoch, fall, lo, hi, status in zip(flat["epochs"], flat["fall"], flat["fall_low"], flat["fall_high"],
                                           flat["status"], strict=False):
        evidence[f"epoch {epoch}: fall to the lowest later epoch"] = f"{fall:.3g}x [{lo:.3g}, {hi:.3g}]: {status}"
    measures = {"InfoNCE flattens after epoch": flat["flat_epoch"]}
    flat_epoch = flat["flat_epoch"]
    if not flat["status"]:
        return ctx.verdict(criterion, [], evidence, measures,
                            unjudged=["one logged epoch: no later epoch to flatten against"])
    # the condition "InfoNCE flattens before the last epoch": at F where established, else at the epoch
    # closest to flat (its fall's upper bound smallest); 2 - fall > 0, its interval from the fall's
    i = flat["epochs"].index(flat_epoch) if flat_epoch is not None else \
        min(range(len(flat["status"])), key=lambda j: flat["fall_high"][j])
    factor = flat["factor"]
    margins = [(factor - flat["fall"][i], False)]
    bounds = [(factor - flat["fall_high"][i], factor - flat["fall_low"][i])]
    if flat_epoch is None:
        evidence["InfoNCE flattens"] = ("not established before the last epoch" if "undecided" in flat["status"]
                                        else "never before the last epoch: it still falls by more than "
                                             f"{factor:g}x after every epoch")
        return ctx.verdict(criterion, margins, evidence, measures, bounds=bounds, interval_kind=_FLAT_KIND)
    if last is None or last <= flat_epoch:
        return ctx.verdict(criterion, margins, evidence, measures, bounds=bounds, interval_kind=_FLAT_KIND,
                            unjudged=[f"no evaluation of {ctx.hn_row} after epoch {flat_epoch}"])
    at_f, at_end, at_f_ci, at_end_ci = {}, {}, {}, {}
    for d in DIRECTION_LABELS:
        at_flat = cell_value(epochs, (ctx.hn_row, group, flat_epoch), (d, "R@1"))
        at_last = cell_value(epochs, (ctx.hn_row, group, last), (d, "R@1"))
        if math.isnan(at_flat) or math.isnan(at_last):
            continue
        margins.append((at_last - at_flat, False))  # R@1 gained = error lost
        bounds.append(None)  # the paired bootstrap of the two epochs' evaluations
        label = direction_word(d)
        at_f[label], at_end[label] = round_margin(100 - float(at_flat)), round_margin(100 - float(at_last))
        at_f_ci[label] = interval_of(at_flat, lambda r1: 100 - r1)
        at_end_ci[label] = interval_of(at_last, lambda r1: 100 - r1)
        evidence[f"{label}: {ctx.hn_row}'s error after epoch {flat_epoch} -> after epoch {last}"] = \
            f"{100 - float(at_flat):.2f} -> {100 - float(at_last):.2f}"
    measures["retrieval error after InfoNCE flattens"] = at_f
    measures["retrieval error after the last epoch"] = at_end
    return ctx.verdict(criterion, margins, evidence, measures, bounds=bounds, interval_kind=_FLAT_KIND,
                        measure_intervals={"retrieval error after InfoNCE flattens": at_f_ci,
                                           "retrieval error after the last epoch": at_end_ci})
