"""The premise (abstract, §1, §2.4, appendix C): the regime figures measured on the runs' own logs.

They are measurements over every logged micro-batch of a run, not samples of test queries: judged on
their values, and they say so (no interval).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from hnclip.analysis.claims.base import Context, claim, make_verdict, no_data
from hnclip.analysis.premise import EXACT_ZERO_KEYS, KEY_ROLE, PREMISE_KEYS

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


def _measured(ctx: Context, key: str, criterion: str, needs: list[str]) -> tuple[dict | None, dict | None]:
    """(the checked measurements, None), or (None, claim ``key``'s "no data" verdict) when the figures it
    ``needs`` are not all measured (None: no run of their role is in the config)."""
    if not ctx.premise:
        return None, no_data(key, ctx.scale, criterion, "no premise measurements (hnclip.analysis.premise)")
    p = check_premise(ctx.premise)
    unmeasured = [k for k in needs if p.get(k) is None]
    if not unmeasured:
        return p, None
    gamma = _gamma(ctx)
    at = f"gamma {gamma:g}" if gamma is not None else "the config's gamma"
    role_words = {"plain": "plain InfoNCE fine-tuning (gamma 0, no token term)",
                  "hn": f"HN-only fine-tuning ({at}, no token term)", "hnclip": f"HN-CLIP ({at})"}
    roles = sorted({KEY_ROLE[k] for k in unmeasured})
    return None, no_data(key, ctx.scale, criterion, "no full-data run of "
                         + " or ".join(role_words[r] for r in roles) + " in this config")


@claim("premise_saturation", "abstract; §1",
       "On dense captions, the loss falls below 10^-3 on 80% of batches within the first epoch.",
       "InfoNCE saturates on most first-epoch batches")
def premise_saturation(ctx: Context) -> dict:
    key, criterion = "premise_saturation", "share of first-epoch micro-batches whose standard InfoNCE < 10^-3 >= 0.80"
    p, missing = _measured(ctx, key, criterion, ["saturated_share_epoch1"])
    if missing:
        return missing
    return make_verdict(key, ctx.scale, criterion, [(p["saturated_share_epoch1"] - 0.80, True)],
                        {"saturated share, epoch 1": round(p["saturated_share_epoch1"], 3)},
                        {"saturated share, epoch 1": p["saturated_share_epoch1"]})


@claim("premise_exact_zero", "abstract; §1",
       "Its gradient reaches exact zero in fp32 in 47% of measurements.",
       "InfoNCE's gradient underflows to exactly zero")
def premise_exact_zero(ctx: Context) -> dict:
    key = "premise_exact_zero"
    criterion = ("share of fp32 measurements whose InfoNCE parameter gradient is exactly zero >= "
                 "0.47 (the paper does not say which gradient; the others are shown)")
    p, missing = _measured(ctx, key, criterion, ["exact_zero.param_grad.fp32"])
    if missing:
        return missing
    fp32 = {k: p[k] for k in SHARE_KEYS if k.startswith("exact_zero.") and k.endswith(".fp32") and p[k] is not None}
    return make_verdict(key, ctx.scale, criterion, [(p["exact_zero.param_grad.fp32"] - 0.47, True)],
                        {f"exactly zero: {k.split('.')[1].replace('_', ' ')} (fp32)": round(v, 3)
                         for k, v in fp32.items()},
                        {"exact-zero share, parameter gradient, fp32": p["exact_zero.param_grad.fp32"]})


@claim("premise_active", "§2.4",
       "26% of batches remain active in every epoch.",
       "the HN objective keeps batches active")
def premise_active(ctx: Context) -> dict:
    key = "premise_active"
    criterion = ("in every epoch of HN-only fine-tuning, the share of micro-batches still active (their "
                 "standard InfoNCE >= 10^-3, the saturation threshold) >= 0.26 (the paper does not define "
                 "'active'; the HN objective itself stays above 10^-3 on practically every batch)")
    p, missing = _measured(ctx, key, criterion, ["hn_active_share_min_epoch"])
    if missing:
        return missing
    return make_verdict(key, ctx.scale, criterion, [(p["hn_active_share_min_epoch"] - 0.26, True)],
                        {"smallest per-epoch share of active batches": round(p["hn_active_share_min_epoch"], 3)},
                        {"active share, smallest epoch": p["hn_active_share_min_epoch"]})


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


@claim("premise_ratio", "§2.4; C",
       "The boosted gradient exceeds the standard gradient by 10^2–10^6× in per-epoch median where the latter "
       "is nonzero.",
       "the boosted gradient is 10^2-10^6 times the standard one")
def premise_ratio(ctx: Context) -> dict:
    key = "premise_ratio"
    criterion = ("every per-epoch median of |boosted gradient| / |standard gradient| (where the standard "
                 "one is nonzero) lies in [10^2, 10^6]")
    p, missing = _measured(ctx, key, criterion, ["ratio_median_per_epoch_min", "ratio_median_per_epoch_max"])
    if missing:
        result = missing
    else:
        low, high = p["ratio_median_per_epoch_min"], p["ratio_median_per_epoch_max"]
        result = make_verdict(key, ctx.scale, criterion,
                              [(math.log10(low) - 2, True) if low > 0 else (-math.inf, True),
                               (6 - math.log10(max(high, 1e-300)), True)],
                              {"smallest per-epoch median ratio": low, "largest per-epoch median ratio": high},
                              {"per-epoch median ratio": {"smallest": low, "largest": high}})
    peaks = _ratio_peaks(ctx.dynamics)
    if peaks:  # a measure beside the verdict, whatever it is
        result["measures"]["peak gradient ratio per run"] = peaks
    return result


@claim("premise_cosine", "C",
       "0.58 median gradient cosine, positive in 98% of measurements, indicates sustained directional "
       "alignment with the standard objective.",
       "the boosted gradient points along the standard one")
def premise_cosine(ctx: Context) -> dict:
    key = "premise_cosine"
    criterion = ("the cosine between boosted and standard gradients is positive in >= 98 % of "
                 "measurements and its median > 0")
    p, missing = _measured(ctx, key, criterion, ["grad_cosine_positive_share", "grad_cosine_median"])
    if missing:
        return missing
    return make_verdict(key, ctx.scale, criterion,
                        [(p["grad_cosine_positive_share"] - 0.98, True), (p["grad_cosine_median"], False)],
                        {"median cosine": round(p["grad_cosine_median"], 3),
                         "share of positive cosines": round(p["grad_cosine_positive_share"], 3)},
                        {"median gradient cosine": p["grad_cosine_median"],
                         "positive-cosine share": p["grad_cosine_positive_share"]})


@claim("premise_error", "§2.4",
       "On DOCCI, retrieval error continues falling from 20.5% to 15.1% for T→I and from 22.9% to 17.1% for "
       "I→T after standard InfoNCE flattens.",
       "retrieval error keeps falling after InfoNCE flattens")
def premise_error(ctx: Context) -> dict:
    key = "premise_error"
    criterion = ("standard InfoNCE flattens within the run, and retrieval error (100 − R@1) is lower at the "
                 "last epoch than at the first, in both directions")
    p, missing = _measured(ctx, key, criterion, list(ERROR_KEYS))
    if missing:
        return missing
    flat = p["infonce_flat_epoch"]
    errors = {k: p[k] for k in ERROR_KEYS}
    evidence = {"InfoNCE flattens at epoch": "never" if flat is None else flat,
                **{k.replace("_", " "): round(v, 2) for k, v in errors.items()}}
    if flat is None:
        return make_verdict(key, ctx.scale, criterion, None, evidence, holds=False)
    return make_verdict(key, ctx.scale, criterion,
                        [(p["error_i2t_first"] - p["error_i2t_last"], False),
                         (p["error_t2i_first"] - p["error_t2i_last"], False)], evidence,
                        {"retrieval error": errors})
