"""Does each of the paper's claims hold in our runs? One verdict per claim, with the numbers behind it.

A claim is judged on the tables of :mod:`hnclip.analysis.tables` (R@1 as the mean of the two directions,
seeds already averaged) and on the HN runs' dynamics logs. ``holds`` is None when the data a claim needs
is absent (experiment not configured, row missing, nothing logged), never a guess. The criteria are
written into each verdict, since at toy scale a "holds" means "holds under this criterion on this data",
not that the paper's claim is reproduced.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from hnclip.analysis.tables import DELTA, DIRECTION_LABELS

__all__ = ["evaluate_claims", "seed_noise", "CLAIMS"]

CLAIMS = {
    "main": "HN-CLIP beats Long-CLIP fine-tuning",
    "plugin": "the HN term improves every fine-tuning framework",
    "transfer": "HN-CLIP transfers better than Long-CLIP fine-tuning",
    "fractions": "the HN term helps more at small data fractions",
    "gamma_sweep": "gamma = 0.5 is near-best",
    "dynamics": "InfoNCE saturates early and the HN term keeps gradients alive",
}


def _verdict(key: str, holds, evidence: dict, criterion: str, scale: str, differences=(), noise=None) -> dict:
    """``within_noise``: every difference the verdict rests on is smaller than the seed-to-seed change of
    the same metric, so the direction of the comparison is not evidence either way."""
    within = bool(noise is not None and holds is not None and differences
                  and all(abs(d) < noise for d in differences))
    if noise is not None and holds is not None and differences:
        evidence = {**evidence, "seed noise (largest R@1 change between seeds)": round(noise, 2)}
    return {"id": key, "claim": CLAIMS[key], "holds": holds, "evidence": evidence, "criterion": criterion,
            "scale": scale, "within_noise": within}


def seed_noise(seeds_table: pd.DataFrame | None) -> float | None:
    """Largest change of R@1 (mean of directions) between seeds of one method on one benchmark."""
    if seeds_table is None or seeds_table.empty:
        return None
    spreads = []
    for row in seeds_table.index:
        for g in _groups(seeds_table):
            per_seed = {}
            for col in seeds_table.columns:
                if col[0] == g and col[2] == "R@1" and str(col[3]).startswith("s") and col[-1] == "mean" \
                        and str(col[3])[1:].isdigit():
                    per_seed.setdefault(col[3], []).append(float(seeds_table.loc[row, col]))
            means = [np.mean(v) for v in per_seed.values() if not any(math.isnan(x) for x in v)]
            if len(means) >= 2:
                spreads.append(max(means) - min(means))
    return float(max(spreads)) if spreads else None


def _r1(table: pd.DataFrame, row, group) -> float:
    """R@1 averaged over both directions for one row and group (NaN when the cell is absent)."""
    values = []
    for d in DIRECTION_LABELS:
        col = (group, d, "R@1", "mean")
        if col not in table.columns or row not in table.index:
            return math.nan
        values.append(float(table.loc[row, col]))
    return float(np.mean(values))


def _groups(table: pd.DataFrame) -> list:
    return list(dict.fromkeys(c[0] for c in table.columns))


def _beats(table, hn_row, baseline_row, key, scale, what, noise=None) -> dict:
    criterion = f"{hn_row} R@1 (mean of I→T, T→I) > {baseline_row}'s on every {what}"
    if table is None:
        return _verdict(key, None, {"missing": f"no {key} table"}, criterion, scale)
    evidence, wins, diffs = {}, [], []
    for g in _groups(table):
        hn, base = _r1(table, hn_row, g), _r1(table, baseline_row, g)
        if math.isnan(hn) or math.isnan(base):
            return _verdict(key, None, {"missing": f"{hn_row!r} or {baseline_row!r} has no R@1 on {g!r}"},
                            criterion, scale)
        evidence[f"{g}: {hn_row}"] = round(hn, 2)
        evidence[f"{g}: {baseline_row}"] = round(base, 2)
        evidence[f"{g}: difference"] = round(hn - base, 2)
        wins.append(hn > base)
        diffs.append(hn - base)
    return _verdict(key, bool(all(wins)), evidence, criterion, scale, diffs, noise)


def _plugin(table, scale, noise=None) -> dict:
    criterion = "Δ R@1 (+HN minus plain, mean of I→T, T→I) > 0 for every framework and benchmark"
    if table is None:
        return _verdict("plugin", None, {"missing": "no plugin table"}, criterion, scale)
    evidence, gains = {}, []
    for fw in table.index:
        for g in _groups(table):
            cols = [(g, d, "R@1", DELTA, "mean") for d in DIRECTION_LABELS]
            if any(c not in table.columns for c in cols) or table.loc[fw, cols].isna().any():
                return _verdict("plugin", None, {"missing": f"no Δ for {fw!r} on {g!r}"}, criterion, scale)
            gain = float(table.loc[fw, cols].mean())
            evidence[f"{fw} on {g}: Δ R@1"] = round(gain, 2)
            gains.append(gain)
    return _verdict("plugin", bool(all(g > 0 for g in gains)), evidence, criterion, scale, gains, noise)


def _fractions(table, hn_row, baseline_row, scale, noise=None) -> dict:
    criterion = (f"gain = {hn_row} minus {baseline_row} R@1 (mean of directions and benchmarks); "
                 "gain at the smallest fraction > gain at the full data")
    if table is None:
        return _verdict("fractions", None, {"missing": "no fractions table"}, criterion, scale)
    fractions = sorted({float(f) for f in table.index.get_level_values("fraction")})
    evidence, gains = {}, {}
    for f in fractions:
        per_group = [_r1(table, (hn_row, f), g) - _r1(table, (baseline_row, f), g) for g in _groups(table)]
        if any(math.isnan(x) for x in per_group):
            return _verdict("fractions", None, {"missing": f"{hn_row!r} or {baseline_row!r} at fraction {f:g}"},
                            criterion, scale)
        gains[f] = float(np.mean(per_group))
        evidence[f"gain at fraction {f:g}"] = round(gains[f], 2)
    if len(fractions) < 2:
        return _verdict("fractions", None, {**evidence, "missing": "only one fraction"}, criterion, scale)
    change = gains[fractions[0]] - gains[fractions[-1]]
    return _verdict("fractions", change > 0, evidence, criterion, scale, [change], noise)


def _gamma(table, scale, default_gamma: float, tolerance: float) -> dict:
    criterion = (f"R@1 (mean of directions and benchmarks) at gamma = {default_gamma:g} is within "
                 f"{tolerance:g} points of the best gamma")
    if table is None:
        return _verdict("gamma_sweep", None, {"missing": "no gamma_sweep table"}, criterion, scale)
    scores = {}
    for gamma in table.index:
        g = float(gamma if not isinstance(gamma, tuple) else gamma[-1])
        scores[g] = float(np.mean([_r1(table, gamma, grp) for grp in _groups(table)]))
    evidence = {f"R@1 at gamma {g:g}": round(s, 2) for g, s in sorted(scores.items())}
    if default_gamma not in scores or any(math.isnan(s) for s in scores.values()):
        return _verdict("gamma_sweep", None, {**evidence, "missing": f"no run at gamma {default_gamma:g}"},
                        criterion, scale)
    best = max(scores, key=scores.get)
    evidence["best gamma"] = best
    return _verdict("gamma_sweep", scores[default_gamma] >= scores[best] - tolerance, evidence, criterion, scale)


def _dynamics(dynamics: Mapping[str, pd.DataFrame] | None, scale: str, threshold: float) -> dict:
    criterion = (f"in every HN run, InfoNCE's saturated fraction reaches {threshold:g} within the first half of "
                 "training, and afterwards the mean gradient-norm ratio (boosted / standard) is > 1")
    if not dynamics:
        return _verdict("dynamics", None, {"missing": "no dynamics logs"}, criterion, scale)
    evidence, verdicts = {}, []
    for label, df in dynamics.items():
        cols = ["step", "saturated_fraction", "grad_ratio"]
        if any(c not in df.columns for c in cols):
            return _verdict("dynamics", None, {"missing": f"{label}: dynamics lack {cols}"}, criterion, scale)
        logged = df[cols].apply(pd.to_numeric, errors="coerce").dropna()
        if logged.empty:
            return _verdict("dynamics", None, {"missing": f"{label}: no gradient dynamics logged"}, criterion, scale)
        last_step = float(pd.to_numeric(df["step"]).max())
        saturated = logged[logged["saturated_fraction"] >= threshold]
        if saturated.empty:
            evidence[f"{label}: max saturated fraction"] = round(float(logged["saturated_fraction"].max()), 3)
            verdicts.append(False)
            continue
        reached = float(saturated["step"].iloc[0])
        ratio_after = float(logged.loc[logged["step"] >= reached, "grad_ratio"].mean())
        evidence[f"{label}: saturated at step"] = reached
        evidence[f"{label}: last step"] = last_step
        evidence[f"{label}: mean ratio after"] = round(ratio_after, 3)
        verdicts.append(reached <= last_step / 2 and ratio_after > 1.0)
    return _verdict("dynamics", bool(all(verdicts)), evidence, criterion, scale)


def evaluate_claims(tables: Mapping[str, pd.DataFrame], scale: str,
                    dynamics: Mapping[str, pd.DataFrame] | None = None, hn_row: str = "HN-CLIP",
                    baseline_row: str = "Long-CLIP FT", default_gamma: float = 0.5,
                    gamma_tolerance: float = 1.0, saturation_threshold: float = 0.5) -> list[dict]:
    """Verdicts on the paper's six claims from experiment tables (by experiment name) and HN dynamics logs.

    Each verdict: ``{"id", "claim", "holds" (True/False/None), "evidence" (numbers), "criterion", "scale",
    "within_noise"}``; the noise floor is the seeds table's largest seed-to-seed R@1 change (no floor
    without a seeds table).
    """
    noise = seed_noise(tables.get("seeds"))
    return [
        _beats(tables.get("main"), hn_row, baseline_row, "main", scale, "benchmark", noise),
        _plugin(tables.get("plugin"), scale, noise),
        _beats(tables.get("transfer"), hn_row, baseline_row, "transfer", scale, "transfer pair", noise),
        _fractions(tables.get("fractions"), hn_row, baseline_row, scale, noise),
        _gamma(tables.get("gamma_sweep"), scale, default_gamma, gamma_tolerance),
        _dynamics(dynamics, scale, saturation_threshold),
    ]
