"""§3.2 A1 and appendix E.3: the main table and the per-epoch evaluations of its runs."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from hnclip.analysis.bootstrap import (
    BootstrapSettings,
    interval,
    mean_of,
    resolution,
)
from hnclip.analysis.claims.base import (
    Context,
    at_or_below_zeroshot,
    avg_r1,
    cell_value,
    claim,
    collapsed_baselines,
    competitor_key,
    competitors_of,
    direction_word,
    docci_group,
    interval_of,
    label_of,
    maybe_round,
    roles_of,
    round_margin,
    row_methods,
    rows_of,
    table_groups,
    use_variants,
    without_collapsed,
)
from hnclip.analysis.tables import DIRECTION_LABELS


@claim("a1_columns", "§3.2 A1",
       "HN-CLIP achieves the best result in 23 of 24 Table 1 columns, ties the remaining column, and "
       "leads R@1 in all eight retrieval directions.",
       "HN-CLIP is best in the main table")
def a1_columns(ctx: Context) -> dict:
    main, hn_row, noise = ctx.tables.get("main"), ctx.hn_row, ctx.noise
    criterion = (f"in every column of the main table (each benchmark, direction and R@K), {hn_row} is best or "
                 "tied with the best competitor, and strictly best in every R@1 column; competitors are the "
                 "other fine-tuned rows (the zero-shot backbone is a reference row)")
    if main is None:
        return ctx.no_data(criterion, "no main table")
    competitors = competitors_of(rows_of(main), hn_row)
    if hn_row not in main.index or not competitors:
        return ctx.no_data(criterion, f"the main table needs {hn_row!r} and a competitor")
    margins, evidence, gains, gain_intervals = [], {}, {}, {}
    best = tied = r1_led = r1_total = 0
    # the paper's "gain over the strongest competitor": the baseline chosen on val (competitor_key: the config's
    # competitor, else plain fine-tuning), never the column's best on test
    roles = roles_of({"main": ctx.specs.get("main")} if ctx.specs and ctx.specs.get("main") else {})
    rival = label_of(row_methods({"main": main}, ctx.specs), competitor_key(roles))
    rival = rival if rival in competitors else None
    deep = {}
    for col in [c[:-1] for c in main.columns if c[-1] == "mean"]:
        hn = cell_value(main, hn_row, col)
        others = [v for v in (cell_value(main, r, col) for r in competitors) if not math.isnan(v)]
        if math.isnan(hn) or not others:
            continue
        margin = hn - max(others)
        is_r1 = col[2] == "R@1"
        margins.append((margin, not is_r1))
        best += margin > 0
        tied += margin == 0
        group, direction, metric = col
        if is_r1:
            r1_total += 1
            r1_led += margin > 0
            label = f"{group} {direction_word(direction)}"
            gain = margin if rival is None else hn - cell_value(main, rival, col)
            gains[label] = round_margin(gain)
            gain_intervals[label] = interval_of(gain)
            evidence[f"{label} R@1: {hn_row} minus the best other row"] = round_margin(margin)
        else:
            stats = deep.setdefault(group, [0, 0, 0])
            stats[0] += margin > 0
            stats[1] += margin == 0
            stats[2] += 1
    total = len(margins)
    evidence[f"columns where {hn_row} is best / tied / behind"] = f"{best} / {tied} / {total - best - tied} of {total}"
    evidence["R@1 directions led"] = f"{r1_led} of {r1_total}"
    if rival is not None:
        evidence["strongest competitor (chosen on val)"] = rival
    measures = {"columns best": best, "columns tied": tied, "columns": total, "R@1 directions led": r1_led,
                "R@1 directions": r1_total, "R@1 gain over the strongest competitor": gains,
                "R@5/R@10 columns best": {g: s[0] for g, s in deep.items()},
                "R@5/R@10 columns tied": {g: s[1] for g, s in deep.items()}}
    return ctx.verdict(criterion, margins, evidence, measures, noise,
                        measure_intervals={"R@1 gain over the strongest competitor": gain_intervals})

def _epoch_avg_r1(epochs: pd.DataFrame, row, group, epoch: int) -> float:
    key = (row, group, epoch)
    if epochs is None or key not in epochs.index:
        return math.nan
    return mean_of([cell_value(epochs, key, (d, "R@1")) for d in DIRECTION_LABELS])

def _epoch_groups(epochs: pd.DataFrame | None) -> list:
    if epochs is None or epochs.empty:
        return []
    return list(dict.fromkeys(epochs.index.get_level_values("benchmark")))

@claim("a1_first_epoch", "§3.2 A1",
       "HN-CLIP's first epoch matches or exceeds most baselines' final average R@1 on all four "
       "benchmarks.",
       "one epoch of HN-CLIP matches most baselines' final accuracy")
def a1_first_epoch(ctx: Context) -> dict:
    main, epochs = ctx.tables.get("main"), ctx.tables.get("epochs")
    hn_row, noise = ctx.hn_row, ctx.noise
    criterion = (f"on every benchmark, {hn_row}'s average R@1 after epoch 1 (epochs.csv of the main run) is >= "
                 "the final average R@1 (main table) of more than half of the fine-tuned baselines")
    if main is None or not _epoch_groups(epochs):
        return ctx.no_data(criterion, "needs the main table and per-epoch evaluations")
    baselines = competitors_of(rows_of(main), hn_row)
    dropped = set(collapsed_baselines(ctx))
    margins, evidence, first, counts, untested, first_ci, kept = [], {}, {}, {}, [], {}, []
    for group in table_groups(main):
        e1 = _epoch_avg_r1(epochs, hn_row, group, 1)
        finals = {b: avg_r1(main, b, group) for b in baselines}
        finals = {b: v for b, v in finals.items() if not math.isnan(v)}
        if math.isnan(e1) or not finals:
            untested.append(str(group))
            continue
        diffs = sorted((e1 - v for v in finals.values()), reverse=True)
        need = len(diffs) // 2 + 1  # more than half
        margins.append((diffs[need - 1], True))
        healthy = sorted((e1 - v for b, v in finals.items() if str(b) not in dropped), reverse=True)
        if healthy:
            kept.append((healthy[len(healthy) // 2], True))
        reached = sum(d >= 0 for d in diffs)
        first[group] = round_margin(e1)
        first_ci[str(group)] = interval_of(e1)
        counts[group] = reached
        evidence[f"{group}: {hn_row} epoch-1 average R@1"] = round_margin(e1)
        evidence[f"{group}: baselines whose final average R@1 it matches"] = \
            f"{reached} of {len(diffs)} ({', '.join(b for b, v in finals.items() if e1 >= v) or 'none'})"
    if not margins:
        return ctx.no_data(criterion, f"no epoch-1 evaluation of {hn_row} on any benchmark")
    coverage = f"not measured on {', '.join(untested)} (no per-epoch evaluation there)" if untested else None
    verdict = ctx.verdict(criterion, margins, evidence,
                          {"first-epoch average R@1": first, "baselines matched by the first epoch": counts}, noise,
                          coverage=coverage, measure_intervals={"first-epoch average R@1": first_ci})
    return without_collapsed(ctx, verdict, criterion, kept, [b for b in baselines if str(b) in dropped])

@claim("a1_second_epoch", "§3.2 A1",
       "On DOCCI, its first epoch reaches 84.3 average R@1, exceeding FineLIP, GOAL, and StructXLIP's "
       "final accuracy; the second epoch reaches 86.1 and surpasses every baseline.",
       "two epochs of HN-CLIP surpass every baseline on DOCCI")
def a1_second_epoch(ctx: Context) -> dict:
    main, epochs = ctx.tables.get("main"), ctx.tables.get("epochs")
    hn_row, noise = ctx.hn_row, ctx.noise
    group, where = docci_group([g for g in table_groups(main) if g in _epoch_groups(epochs)] if main is not None else [],
                                ctx.scale)
    criterion = (f"on {where or 'DOCCI'}, {hn_row}'s average R@1 after epoch 2 > every fine-tuned baseline's final "
                 "average R@1")
    if main is None or group is None:
        return ctx.no_data(criterion, "needs the main table and per-epoch evaluations")
    e1, e2 = (_epoch_avg_r1(epochs, hn_row, group, e) for e in (1, 2))
    finals = {b: avg_r1(main, b, group) for b in competitors_of(rows_of(main), hn_row)}
    finals = {b: v for b, v in finals.items() if not math.isnan(v)}
    if math.isnan(e2) or not finals:
        return ctx.verdict(criterion, None, measures={
            "first-epoch average R@1": {} if math.isnan(e1) else {str(group): round_margin(e1)}},
            missing=f"no epoch-2 evaluation of {hn_row} on {group} (or no baseline)")
    strongest = max(finals, key=finals.get)
    evidence = {f"{group}: epoch-1 average R@1": round_margin(e1), f"{group}: epoch-2 average R@1": round_margin(e2),
                f"{group}: strongest baseline ({strongest}), final": round_margin(finals[strongest]),
                f"{group}: baselines below the first epoch": ", ".join(b for b, v in finals.items() if e1 > v) or "none"}
    measures = {"first-epoch average R@1": {str(group): round_margin(e1)}, "second-epoch average R@1": {str(group): round_margin(e2)}}
    return ctx.verdict(criterion, [(e2 - finals[strongest], False)], evidence, measures, noise,
                       measure_intervals={"first-epoch average R@1": {str(group): interval_of(e1)},
                                          "second-epoch average R@1": {str(group): interval_of(e2)}},
                       collapsed=[strongest] if at_or_below_zeroshot(ctx, finals[strongest], group) else [])

@claim("e3_directions", "E.3 per-direction convergence",
       "HN-CLIP leads in both retrieval directions on all four benchmarks from the first epoch.",
       "HN-CLIP leads both directions from the first epoch")
def e3_directions(ctx: Context) -> dict:
    epochs, hn_row, noise = ctx.tables.get("epochs"), ctx.hn_row, ctx.noise
    criterion = (f"after every epoch, on every benchmark with per-epoch evaluations and in each direction, "
                 f"{hn_row}'s R@1 > every other main method's R@1 after the same epoch")
    groups = _epoch_groups(epochs)
    if not groups:
        return ctx.no_data(criterion, "no per-epoch evaluations")
    methods = list(dict.fromkeys(epochs.index.get_level_values("method")))
    others = competitors_of(methods, hn_row)
    if hn_row not in methods or not others:
        return ctx.no_data(criterion, f"per-epoch evaluations need {hn_row!r} and a competitor")
    margins, evidence, collapse = [], {}, {}
    led = total = 0
    for group in groups:
        epochs_here = sorted({int(k[2]) for k in epochs.index if k[0] == hn_row and k[1] == group})
        for d in DIRECTION_LABELS:
            worst = math.inf
            for e in epochs_here:
                hn = cell_value(epochs, (hn_row, group, e), (d, "R@1"))
                rivals = [cell_value(epochs, (m, group, e), (d, "R@1")) for m in others
                          if (m, group, e) in epochs.index]
                if not rivals:
                    continue
                margin = hn - max(rivals)
                margins.append((margin, False))
                worst = min(worst, margin)
                led += margin > 0
                total += 1
            if math.isfinite(worst):
                evidence[f"{group} {direction_word(d)}: smallest lead over the epochs"] = round_margin(worst)
        for m in others:
            series = [(int(k[2]), float(epochs.loc[k, ("I->T", "R@1", "mean")])) for k in epochs.index
                      if k[0] == m and k[1] == group]
            series.sort()
            drops = [(series[i - 1][1] - series[i][1], series[i][0]) for i in range(1, len(series))]
            if drops and max(drops)[0] > 0:
                collapse[f"{m} on {group}"] = max(drops)[1]
    evidence["epoch x direction x benchmark cells led"] = f"{led} of {total}"
    if not margins:
        return ctx.no_data(criterion, "no epoch evaluated for two methods")
    measures = {"cells led": led, "cells": total, "epoch of the largest I→T R@1 drop": collapse}
    return ctx.verdict(criterion, margins, evidence, measures, noise)

def power_notes(main: pd.DataFrame | None, spec: Mapping | None = None) -> tuple[list[dict], str]:
    """Per benchmark of the main table, what its test split resolves: the paired interval of the reference
    method (``roles.reference``, HN-CLIP's key, found by key like :func:`evaluate_claims`) minus its strongest
    competitor in average R@1 (at the cells' seeds), its half-width and the difference detectable at 80 %
    power.

    The strongest competitor is :func:`competitor_key`: the spec's ``roles.competitor`` (chosen on val by the
    tuning protocol), else plain fine-tuning; never a row chosen on test. Returns (notes, what was compared);
    empty without outcomes."""
    specs = {"main": spec} if spec else {}
    roles, methods = roles_of(specs), row_methods({"main": main} if main is not None else {}, specs)
    hn_row = label_of(methods, roles["reference"])
    use_variants(label for label, m in methods.items() if m == roles["frozen"])
    if main is None or hn_row not in main.index:
        return [], ""
    competitor = label_of(methods, competitor_key(roles))
    if competitor not in main.index:
        return [], ""
    notes = _power_rows(main, hn_row, lambda group: competitor)
    chosen = "the strongest competitor chosen on val" if roles.get("competitor") else "plain fine-tuning (no competitor chosen on val)"
    return notes, f"{hn_row} minus {chosen} ({competitor})"


def _power_rows(table: pd.DataFrame, hn_row: str, rival_of) -> list[dict]:
    """One note per group of ``table``: ``hn_row`` minus ``rival_of(group)`` in average R@1, paired."""
    settings = table.attrs.get("statistics") or BootstrapSettings()
    notes = []
    for group in table_groups(table):
        rival = rival_of(group)
        hn = avg_r1(table, hn_row, group)
        if rival is None or math.isnan(hn) or math.isnan(avg_r1(table, rival, group)):
            continue
        margin = hn - avg_r1(table, rival, group)
        bounds = interval(margin, settings)
        if bounds is None:
            continue
        samples = margin.terms[0][1]
        notes.append({"benchmark": str(group), "images": samples.outcomes[0].n_images, "seeds": len(samples.seeds),
                      "margin": round_margin(margin), "ci_low": round_margin(bounds[0]), "ci_high": round_margin(bounds[1]),
                      "half_width": round_margin((bounds[1] - bounds[0]) / 2),
                      "resolution": maybe_round(resolution(margin, settings)), "versus": rival})
    return notes
