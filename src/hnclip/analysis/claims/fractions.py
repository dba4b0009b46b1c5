"""§3.2 A3 and appendix E.3: training-data fractions."""

from __future__ import annotations

import math

import pandas as pd

from hnclip.analysis.claims.base import (
    MARGIN_REFERENCE,
    PAPER_NAME,
    Context,
    at_or_below_zeroshot,
    avg_r1,
    claim,
    competitor_key,
    competitors_of,
    label_of,
    round_margin,
    table_groups,
)


def _fraction_rows(fractions: pd.DataFrame) -> tuple[list, list[float]]:
    methods = list(dict.fromkeys(fractions.index.get_level_values("method")))
    values = sorted({float(f) for f in fractions.index.get_level_values("fraction")})
    return methods, values


def _frac(fractions, method, f, group) -> float:
    for key in fractions.index:
        if key[0] == method and math.isclose(float(key[1]), f):
            return avg_r1(fractions, key, group)
    return math.nan


def _full_data(ctx: Context, fractions: pd.DataFrame, row: str, group):
    """``row``'s average R@1 with 100 % of the data on ``group``: the main table's cell (the full-data
    baseline the paper compares with), else the fractions table's at 1.0."""
    main = ctx.tables.get("main")
    value = avg_r1(main, row, group) if main is not None and group in table_groups(main) else math.nan
    return value if not (isinstance(value, float) and math.isnan(value)) else _frac(fractions, row, 1.0, group)


def _twenty_against_full(ctx: Context, fractions: pd.DataFrame | None, rival: str):
    """Per benchmark of the fractions table, HN-CLIP's average R@1 at 20 % of the data and ``rival``'s with all
    of it (:func:`_full_data`), and the benchmarks where that rival row is at or below the zero-shot backbone
    (a collapsed row); or the reason there is nothing to compare (a string)."""
    if fractions is None:
        return "no fractions table"
    methods, values = _fraction_rows(fractions)
    if not any(math.isclose(f, 0.2) for f in values) or ctx.hn_row not in methods:
        return f"no {ctx.hn_row} run at fraction 0.2"
    rows, collapsed = {}, []
    for g in table_groups(fractions):
        hn, full = _frac(fractions, ctx.hn_row, 0.2, g), _full_data(ctx, fractions, rival, g)
        if math.isnan(hn) or math.isnan(full):
            continue
        rows[g] = (hn, full)
        if at_or_below_zeroshot(ctx, full, g):
            collapsed.append(f"{rival} at 100 % on {g}")
    if not rows:
        return f"no full-data {rival} row on the fractions' benchmarks"
    return rows, collapsed


@claim("a3_fraction_20", "§3.4 A3; abstract",
       "At 20% of the training data, HN-CLIP beats the strongest full-data baseline.",
       "HN-CLIP at 20 % of the data beats the strongest full-data baseline")
def a3_fraction_20(ctx: Context) -> dict:
    fractions, hn_row, noise = ctx.tables.get("fractions"), ctx.hn_row, ctx.noise
    rival = label_of(ctx.methods, competitor_key(ctx.roles))
    criterion = (f"on every benchmark of the fractions experiment, {hn_row}'s average R@1 at 20 % of the training "
                 f"data > the strongest competitor's at 100 % ({rival}: chosen on val, never on test; main table)")
    pairs = _twenty_against_full(ctx, fractions, rival)
    if isinstance(pairs, str):
        return ctx.no_data(criterion, pairs)
    rows, collapsed = pairs
    margins = [(hn - full, False) for hn, full in rows.values()]
    at20 = {g: round_margin(hn) for g, (hn, _) in rows.items()}
    strongest_of = {g: round_margin(full) for g, (_, full) in rows.items()}
    evidence = {}
    for g, (hn, full) in rows.items():
        evidence[f"{g}: {hn_row} at 20 %"] = round_margin(hn)
        evidence[f"{g}: strongest competitor at 100 % ({rival})"] = round_margin(full)
    measures = {f"{PAPER_NAME} average R@1 at 20 %": at20, "strongest full-data baseline": strongest_of}
    return ctx.verdict(criterion, margins, evidence, measures, noise, collapsed=collapsed)


@claim("a3_fraction_20_goal", "§3.4 A3; E.3",
       "The 20% rows exceed GOAL's 100% rows on both benchmarks. (E.3: HN-CLIP's 20% training-data results "
       "exceed GOAL's 100% results on both evaluated benchmarks.)",
       "HN-CLIP at 20 % of the data exceeds GOAL at 100 %")
def a3_fraction_20_goal(ctx: Context) -> dict:
    fractions, hn_row, noise = ctx.tables.get("fractions"), ctx.hn_row, ctx.noise
    goal = label_of(ctx.methods, MARGIN_REFERENCE)
    criterion = (f"on every benchmark of the fractions experiment, {hn_row}'s average R@1 at 20 % of the training "
                 f"data > {goal}'s at 100 %; a {goal} row at or below the zero-shot backbone is a collapsed row")
    pairs = _twenty_against_full(ctx, fractions, goal)
    if isinstance(pairs, str):
        return ctx.no_data(criterion, pairs)
    rows, collapsed = pairs
    margins = [(hn - full, False) for hn, full in rows.values()]
    evidence = {f"{g}: {hn_row} at 20 % minus {goal} at 100 %": round_margin(hn - full)
                for g, (hn, full) in rows.items()}
    exceeded = sum(float(m) > 0 for m, _ in margins)
    measures = {"benchmarks where the 20 % row exceeds GOAL at 100 %": exceeded}
    return ctx.verdict(criterion, margins, evidence, measures, noise, collapsed=collapsed)


@claim("a3_every_fraction", "§3.4 A3",
       "It leads at every tested data fraction.",
       "HN-CLIP leads at every data fraction")
def a3_every_fraction(ctx: Context) -> dict:
    fractions, hn_row, noise = ctx.tables.get("fractions"), ctx.hn_row, ctx.noise
    criterion = (f"at every data fraction and on every benchmark, {hn_row}'s average R@1 > every other row's at "
                 "the same fraction")
    if fractions is None:
        return ctx.no_data(criterion, "no fractions table")
    methods, values = _fraction_rows(fractions)
    others = competitors_of(methods, hn_row)
    if hn_row not in methods or not others:
        return ctx.no_data(criterion, f"the fractions table needs {hn_row!r} and a baseline")
    margins, evidence, leads = [], {}, {}
    for g in table_groups(fractions):
        for f in values:
            hn = _frac(fractions, hn_row, f, g)
            rivals = {m: _frac(fractions, m, f, g) for m in others}
            rivals = {m: v for m, v in rivals.items() if not math.isnan(v)}
            if math.isnan(hn) or not rivals:
                continue
            best = max(rivals, key=rivals.get)
            label = f"{g} at {f:g}"
            leads[label] = round_margin(hn - rivals[best])
            evidence[f"{label}: {hn_row} minus {best}"] = round_margin(hn - rivals[best])
            margins.append((hn - rivals[best], False))
    if not margins:
        return ctx.no_data(criterion, "no fraction with two rows")
    return ctx.verdict(criterion, margins, evidence, {"lead per fraction": leads}, noise)


@claim("a3_margin_widens", "§3.4 A3; E.3",
       "The average-R@1 margin widening to +7.3 as data shrinks. (E.3: the average-R@1 margin over "
       "GOAL widens as the data fraction shrinks.)",
       "the lead widens as data shrinks")
def a3_margin_widens(ctx: Context) -> dict:
    fractions, hn_row, noise = ctx.tables.get("fractions"), ctx.hn_row, ctx.noise
    reference = label_of(ctx.methods, MARGIN_REFERENCE)
    criterion = (f"on every benchmark, {hn_row}'s average-R@1 margin over GOAL at the same fraction (E.3's words; "
                 "without a GOAL row: over the strongest other row at each fraction) is positive at every fraction "
                 "and larger at each smaller fraction than at the next larger one; a fraction where that row ends "
                 "at or below the zero-shot backbone is a comparison with a collapsed row")
    if fractions is None:
        return ctx.no_data(criterion, "no fractions table")
    methods, values = _fraction_rows(fractions)
    others = competitors_of(methods, hn_row)
    if hn_row not in methods or not others or len(values) < 2:
        return ctx.no_data(criterion, f"needs {hn_row!r}, a baseline and two fractions")
    rivals = [reference] if reference in others else others
    margins, evidence, smallest, per_fraction, collapsed = [], {}, {}, {}, []
    for g in table_groups(fractions):
        series = []
        for f in values:
            hn = _frac(fractions, hn_row, f, g)
            base = {m: v for m in rivals for v in [_frac(fractions, m, f, g)] if not math.isnan(v)}
            if not math.isnan(hn) and base:
                best = max(base, key=base.get)
                series.append((f, hn - base[best]))
                if at_or_below_zeroshot(ctx, base[best], g):
                    collapsed.append(f"{best} at {f:g} on {g}")
        if len(series) < 2:
            continue
        for f, m in series:
            per_fraction[f"{g} at {f:g}"] = round_margin(m)
            evidence[f"{g}: margin at {f:g}"] = round_margin(m)
            margins.append((m, False))
        margins += [(small[1] - large[1], False) for small, large in zip(series, series[1:], strict=False)]
        smallest[g] = round_margin(series[0][1])
    if not margins:
        return ctx.no_data(criterion, "no benchmark with two fractions of both rows")
    measures = {"margin at the smallest fraction": smallest, "margin per fraction": per_fraction}
    return ctx.verdict(criterion, margins, evidence, measures, noise, collapsed=collapsed)
