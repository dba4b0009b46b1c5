"""§3.2 A2: the HN term plugged into other fine-tuning frameworks."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from hnclip.analysis.bootstrap import (
    mean_of,
)
from hnclip.analysis.claims.base import (
    Context,
    cell_value,
    claim,
    collapsed_baselines,
    direction_word,
    in_domain_groups,
    round_margin,
    rows_of,
    without_collapsed,
)
from hnclip.analysis.tables import DELTA, DIRECTION_LABELS


def _plugin_deltas(plugin: pd.DataFrame, groups: Sequence) -> dict[tuple, dict[str, float]]:
    """(framework, group) -> {direction: Δ R@1} for every framework and given group with both sides."""
    out = {}
    for fw in rows_of(plugin):
        for g in groups:
            deltas = {d: cell_value(plugin, fw, (g, d, "R@1", DELTA)) for d in DIRECTION_LABELS}
            if not any(math.isnan(v) for v in deltas.values()):
                out[(fw, g)] = deltas
    return out

@claim("a2_frameworks", "§3.3 A2; E.1",
       "Every tested fine-tuning framework improves with the plug-in objective on both in-domain "
       "benchmarks. All eighteen in-domain framework–dataset combinations improve in average R@1.",
       "+HN improves every framework in-domain (average R@1)")
def a2_frameworks(ctx: Context) -> dict:
    plugin, spec, noise = ctx.tables.get("plugin"), ctx.specs.get("plugin"), ctx.noise
    criterion = ("Δ average R@1 (+HN minus plain, mean of I→T and T→I) > 0 for every framework on every "
                 "in-domain benchmark of the plug-in table (its runs train on the benchmark's own training set; "
                 "VG → Urban-1K is transfer)")
    if plugin is None:
        return ctx.no_data(criterion, "no plug-in table")
    groups = in_domain_groups(spec, plugin)
    deltas = _plugin_deltas(plugin, groups)
    if not deltas:
        return ctx.no_data(criterion, "no framework has both plain and +HN runs in-domain")
    evidence, margins = {}, []
    for (fw, g), per_dir in deltas.items():
        gain = mean_of(list(per_dir.values()))
        evidence[f"{fw} on {g}: Δ average R@1"] = round_margin(gain)
        margins.append((gain, False))
    frameworks = list(dict.fromkeys(fw for fw, _ in deltas))
    improving = [fw for fw in frameworks if all(mean_of(list(v.values())) > 0
                                                 for (f, _), v in deltas.items() if f == fw)]
    improved = sum(m > 0 for m, _ in margins)
    evidence["in-domain combinations improved"] = f"{improved} of {len(margins)}"
    measures = {"in-domain combinations improved": improved, "in-domain combinations": len(margins),
                "frameworks improved on every in-domain benchmark": len(improving), "frameworks": len(frameworks)}
    dropped = set(collapsed_baselines(ctx))
    kept = [m for m, (fw, _) in zip(margins, deltas, strict=True) if str(fw) not in dropped]
    return without_collapsed(ctx, ctx.verdict(criterion, margins, evidence, measures, noise), criterion, kept,
                             [fw for fw in frameworks if str(fw) in dropped])

@claim("a2_directions", "E.1",
       "R@1 improves in 35 of 36 per-direction cases, reaching +23.87 for FineLIP on Long-DCI.",
       "+HN improves R@1 per direction")
def a2_directions(ctx: Context) -> dict:
    plugin, spec, noise = ctx.tables.get("plugin"), ctx.specs.get("plugin"), ctx.noise
    criterion = ("per-direction Δ R@1 > 0 in at least 35/36 of the in-domain (framework, benchmark, direction) "
                 "cases (with fewer than 36 cases: in every case)")
    if plugin is None:
        return ctx.no_data(criterion, "no plug-in table")
    deltas = _plugin_deltas(plugin, in_domain_groups(spec, plugin))
    cases = {f"{fw} on {g} {direction_word(d)}": v for (fw, g), per_dir in deltas.items() for d, v in per_dir.items()}
    if not cases:
        return ctx.no_data(criterion, "no framework has both plain and +HN runs in-domain")
    values = sorted(cases.values(), reverse=True)
    need = math.ceil(len(values) * 35 / 36)
    improved = sum(v > 0 for v in values)
    largest = max(cases, key=cases.get)
    evidence = {"per-direction cases improved": f"{improved} of {len(values)} (needs {need})",
                f"largest gain ({largest})": round_margin(cases[largest]),
                "cases that do not improve": ", ".join(k for k, v in cases.items() if v <= 0) or "none"}
    measures = {"per-direction cases improved": improved, "per-direction cases": len(values),
                "largest per-direction gain": {largest: round_margin(cases[largest])}}
    verdict = ctx.verdict(criterion, [(values[need - 1], False)], evidence, measures, noise)
    dropped = set(collapsed_baselines(ctx))
    kept = sorted((v for (fw, _), per_dir in deltas.items() if str(fw) not in dropped for v in per_dir.values()),
                  reverse=True)
    margin = [(kept[math.ceil(len(kept) * 35 / 36) - 1], False)] if kept else []
    return without_collapsed(ctx, verdict, criterion, margin, {str(fw) for fw, _ in deltas if str(fw) in dropped})

@claim("a2_caption_length", "§3.3 A2; E.1",
       "Gains increase with caption length.",
       "the +HN gain grows with caption length")
def a2_caption_length(ctx: Context) -> dict:
    plugin, spec, noise = ctx.tables.get("plugin"), ctx.specs.get("plugin"), ctx.noise
    caption_words = ctx.caption_words
    criterion = ("ordering the in-domain benchmarks by mean caption length (words), the Δ average R@1 averaged "
                 "over frameworks increases from each benchmark to the next longer one")
    if plugin is None:
        return ctx.no_data(criterion, "no plug-in table")
    groups = [g for g in in_domain_groups(spec, plugin) if g in (caption_words or {})]
    deltas = _plugin_deltas(plugin, groups)
    mean_gain = {}
    for g in groups:
        values = [mean_of(list(v.values())) for (_, gg), v in deltas.items() if gg == g]
        if values:
            mean_gain[g] = mean_of(values)
    if len(mean_gain) < 2:
        return ctx.no_data(criterion,
                        "needs two in-domain benchmarks with plug-in runs and caption lengths")
    ordered = sorted(mean_gain, key=lambda g: caption_words[g])
    evidence = {f"{g}: {caption_words[g]:.0f} words, mean Δ average R@1": round_margin(mean_gain[g]) for g in ordered}
    margins = [(mean_gain[b] - mean_gain[a], False) for a, b in zip(ordered, ordered[1:], strict=False)]
    return ctx.verdict(criterion, margins, evidence,
                    {"mean caption words": {g: round(caption_words[g], 1) for g in ordered}}, noise)
