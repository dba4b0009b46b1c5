"""The paper's claims, each tested as the paper states it, with our numbers, their intervals and a verdict.

Every claim quotes the paper's sentence (``paper-summary.txt``, with its section) and carries the one
criterion that tests exactly that sentence: "leads at every tested data fraction" is tested at every
fraction, not as "the gain is larger at small data". A verdict is one of

- ``holds``: every inequality the criterion needs holds with its interval (a strict one, "beats",
  "leads": the 95 % paired bootstrap interval of the margin lies above 0; one a tie meets, "best or
  tied", "does not help": the interval does not lie wholly below 0);
- ``does not hold``: some inequality is refuted by its interval (a strict margin's interval at or
  below 0, a tie-passing one's wholly below 0);
- ``inconclusive``: none is refuted but some interval straddles 0: the test split and seeds cannot tell
  that difference from noise;
- ``no data``: the runs the criterion needs are not in this configuration (never a guess).

Every margin is an :class:`hnclip.analysis.bootstrap.Estimate` built from the tables' cells, so its
interval is the paired bootstrap of :mod:`hnclip.analysis.bootstrap`: both sides on the same resampled
test images (and seeds, paired by seed where they share them). A verdict carries each condition with its
interval (``conditions``), how many are decided, and the deciding margin's interval and resolution (the
difference that split and seeds detect with 80 % power). "The strongest competitor" is chosen by point
value, then paired. The premise figures (§2.4, appendix C) are measurements over every logged micro-batch
of a run, not samples of test queries: they are judged on their values and say so (no interval).

Inputs are the tables of :mod:`hnclip.analysis.tables` (R@1 as the mean of the two directions where the
paper says "average R@1", seeds already averaged), the experiment specs (which groups are in-domain),
evaluation records (the seeds' six metrics) and the premise measurements of §2.4 / appendix C as one
flat dict (:data:`PREMISE_KEYS`). Each verdict also carries ``measures``: named numbers that
``report/published_numbers.yaml`` puts beside the paper's (``{kind: claim, claim: ID, measure: NAME}``).

At toy scale the synthetic benchmark stands in for the paper's: a criterion about DOCCI is tested on the
main table's first benchmark, one about the DCI<->DOCCI transfers on every configured transfer pair; the
criterion text says so whenever it happens.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from hnclip.analysis.bootstrap import (
    BootstrapSettings,
    Estimate,
    interval,
    judge,
    mean_of,
    percentile_interval,
    replicates,
    resolution,
)
from hnclip.analysis.premise import EXACT_ZERO_KEYS, KEY_ROLE, PREMISE_KEYS
from hnclip.analysis.tables import DELTA, DIRECTION_LABELS
from hnclip.plan import ZEROSHOT_ROW

__all__ = ["ABLATION_ROWS", "CLAIMS", "PREMISE_KEYS", "VERDICTS", "check_premise", "evaluate_claims",
           "in_domain_groups", "power_notes", "seed_noise"]

PAPER_TRANSFER_PAIRS = ("DCI -> DOCCI", "DOCCI -> DCI", "DOCCI -> Long-DCI")
# the ablation variants' labels in the configs (config/*.yaml experiments.ablation.variants)
ABLATION_ROWS = {"infonce": "InfoNCE", "hn": "HN only", "token": "token only", "full": "HN + token",
                 "frozen": "HN + token (frozen G)"}
VERDICTS = ("holds", "does not hold", "inconclusive", "no data")

# id -> (section, the paper's sentence as paper-summary.txt gives it, short title)
CLAIMS: dict[str, tuple[str, str, str]] = {
    "a1_columns": (
        "§3.2 A1",
        "HN-CLIP achieves the best result in 23 of 24 Table 1 columns, ties the remaining column, and leads "
        "R@1 in all eight retrieval directions.",
        "HN-CLIP is best in the main table"),
    "a1_first_epoch": (
        "§3.2 A1",
        "HN-CLIP's first epoch matches or exceeds most baselines' final average R@1 on all four benchmarks.",
        "one epoch of HN-CLIP matches most baselines' final accuracy"),
    "a1_second_epoch": (
        "§3.2 A1",
        "On DOCCI, its first epoch reaches 84.3 average R@1, exceeding FineLIP, GOAL, and StructXLIP's final "
        "accuracy; the second epoch reaches 86.1 and surpasses every baseline.",
        "two epochs of HN-CLIP surpass every baseline on DOCCI"),
    "e3_directions": (
        "E.3 per-direction convergence",
        "HN-CLIP leads in both retrieval directions on all four benchmarks from the first epoch.",
        "HN-CLIP leads both directions from the first epoch"),
    "a2_frameworks": (
        "§3.3 A2; E.1",
        "Every tested fine-tuning framework improves with the plug-in objective on both in-domain benchmarks. "
        "All eighteen in-domain framework–dataset combinations improve in average R@1.",
        "+HN improves every framework in-domain (average R@1)"),
    "a2_directions": (
        "E.1",
        "R@1 improves in 35 of 36 per-direction cases, reaching +23.87 for FineLIP on Long-DCI.",
        "+HN improves R@1 per direction"),
    "a2_caption_length": (
        "§3.3 A2; E.1",
        "Gains increase with caption length.",
        "the +HN gain grows with caption length"),
    "a3_transfer": (
        "E.3 cross-domain transfer",
        "HN-CLIP leads every reported column in DCI↔DOCCI and DOCCI→Long-DCI transfer evaluations.",
        "HN-CLIP leads every transfer column"),
    "a3_dci_to_docci": (
        "§3.4 A3",
        "HN-CLIP transfers strongly across domains, scoring 85.00/83.14 R@1 when trained on DCI and transferred "
        "to DOCCI. It exceeds every baseline's in-domain DOCCI result.",
        "DCI-trained HN-CLIP beats every baseline's in-domain DOCCI result"),
    "a3_fraction_20": (
        "§3.4 A3; abstract; E.3",
        "At 20% of the training data, HN-CLIP beats the strongest full-data baseline. (E.3: HN-CLIP's 20% "
        "training-data results exceed GOAL's 100% results on both evaluated benchmarks.)",
        "HN-CLIP at 20 % of the data beats the strongest full-data baseline"),
    "a3_every_fraction": (
        "§3.4 A3",
        "It leads at every tested data fraction.",
        "HN-CLIP leads at every data fraction"),
    "a3_margin_widens": (
        "§3.4 A3; E.3",
        "The average-R@1 margin widening to +7.3 as data shrinks. (E.3: the average-R@1 margin over GOAL "
        "widens as the data fraction shrinks.)",
        "the lead widens as data shrinks"),
    "a4_hn_bulk": (
        "§3.5 A4",
        "LHN alone produces the bulk of the gains.",
        "the HN term alone gives the bulk of the gain"),
    "a4_token_after_hn": (
        "§3.5 A4",
        "The token branch contributes only after LHN prevents saturation.",
        "the token branch helps only together with HN"),
    "a4_gamma": (
        "§3.5 A4",
        "Every in-domain γ from 0.25 to 1 beats γ=0.",
        "every gamma in [0.25, 1] beats gamma = 0"),
    "b2_frozen": (
        "B.2",
        "3.80/6.80 R@1 separates the default from the frozen variant on the transfer benchmark, where the "
        "never-decaying margin performs worst.",
        "frozen margins transfer worst"),
    "seeds_average": (
        "E.3 seed replication",
        "All R@1 results reproduce within ±0.4 on average under a second seed, while the largest R@1 deviation "
        "is 1.28. Across six metrics, the maximum seed-to-seed difference is 1.44 for HN-CLIP.",
        "R@1 reproduces within ±0.4 on average under a second seed"),
    "seeds_ranking": (
        "D.1",
        "The lead is unchanged under last-epoch evaluation, and the Long-DCI R@1 ranking persists under a "
        "second seed.",
        "the R@1 ranking persists under a second seed"),
    "premise_saturation": (
        "abstract; §1",
        "On dense captions, the loss falls below 10^-3 on 80% of batches within the first epoch.",
        "InfoNCE saturates on most first-epoch batches"),
    "premise_exact_zero": (
        "abstract; §1",
        "Its gradient reaches exact zero in fp32 in 47% of measurements.",
        "InfoNCE's gradient underflows to exactly zero"),
    "premise_active": (
        "§2.4",
        "26% of batches remain active in every epoch.",
        "the HN objective keeps batches active"),
    "premise_ratio": (
        "§2.4; C",
        "The boosted gradient exceeds the standard gradient by 10^2–10^6× in per-epoch median where the latter "
        "is nonzero.",
        "the boosted gradient is 10^2-10^6 times the standard one"),
    "premise_cosine": (
        "C",
        "0.58 median gradient cosine, positive in 98% of measurements, indicates sustained directional "
        "alignment with the standard objective.",
        "the boosted gradient points along the standard one"),
    "premise_error": (
        "§2.4",
        "On DOCCI, retrieval error continues falling from 20.5% to 15.1% for T→I and from 22.9% to 17.1% for "
        "I→T after standard InfoNCE flattens.",
        "retrieval error keeps falling after InfoNCE flattens"),
}

# The premise measurements (hnclip.analysis.premise): shares are fractions in [0, 1], errors percent
# (100 - R@1), ratios and cosines plain numbers; ``infonce_flat_epoch`` is None when InfoNCE never
# flattened within the run.
# A value may be None: no run of the role that measures it (hnclip.analysis.premise.KEY_ROLE) is in the config.
SHARE_KEYS = ("saturated_share_epoch1", *EXACT_ZERO_KEYS, "hn_active_share_min_epoch", "grad_cosine_positive_share")
ERROR_KEYS = ("error_i2t_first", "error_i2t_last", "error_t2i_first", "error_t2i_last")
assert set(SHARE_KEYS + ERROR_KEYS) < set(PREMISE_KEYS)


# ------------------------------------------------------------------------------------------- verdicts
def _verdict(key: str, scale: str, criterion: str, margins: Sequence[tuple[float, bool]] | None,
             evidence: Mapping | None = None, measures: Mapping | None = None, noise: float | None = None,
             missing: str | None = None, coverage: str | None = None, holds: bool | None = None,
             bounds: Sequence[tuple[float, float] | None] | None = None) -> dict:
    """One verdict. ``margins``: (value, ties_pass) pairs, each an inequality the claim needs (> 0, or >= 0
    when ``ties_pass``); a value is an :class:`Estimate` (its paired interval decides) or a plain number (a
    measurement without resampling unit, judged on its value). ``bounds`` gives intervals computed
    elsewhere (a non-linear statistic's replicates), one per margin or None. ``holds`` overrides the
    margins for a claim decided otherwise (a ranking); ``noise`` (the seed-to-seed R@1 change) is shown only.
    """
    section, quote, title = CLAIMS[key]
    evidence = dict(evidence or {})
    settings = _SETTINGS
    conditions, unsampled = [], 0
    if missing is not None:
        holds, margins = None, None
    if margins:
        for i, (margin, ties) in enumerate(margins):
            given = bounds[i] if bounds is not None else None
            if given is None and not (isinstance(margin, Estimate) and margin.has_interval):
                # a measurement with no resampling unit (premise figures), or cells whose records predate
                # per-query outcomes: judged on the value, and shown without an interval
                value = float(margin)
                given = (value, value)
                unsampled += 1
            conditions.append((judge(margin, ties, settings, given), margin))
    statuses = [c.status for c, _ in conditions]
    if missing is not None:
        verdict = "no data"
    elif holds is not None and not conditions:
        verdict = "holds" if holds else "does not hold"
    elif not conditions:
        verdict, holds = "no data", None
    elif "failed" in statuses:
        verdict, holds = "does not hold", False
    elif "undecided" in statuses:
        verdict, holds = "inconclusive", None
    else:
        verdict, holds = "holds", True
    if unsampled:
        evidence["conditions judged on their value (no per-query outcomes behind them)"] = \
            f"{unsampled} of {len(conditions)}"
    deciding = _deciding(conditions)
    decision = None
    if deciding is not None:
        condition, margin = deciding
        decision = {"margin": _round(condition.value),
                    "ci_low": _round(condition.low) if _sampled(margin, bounds) else None,
                    "ci_high": _round(condition.high) if _sampled(margin, bounds) else None,
                    "resolution": _maybe_round(resolution(margin, settings)) if isinstance(margin, Estimate) else None,
                    "status": condition.status}
    decided = sum(s != "undecided" for s in statuses)
    return {"id": key, "section": section, "quote": quote, "claim": title, "criterion": criterion,
            "holds": holds, "verdict": verdict, "evidence": evidence,
            "measures": dict(measures or {}), "noise": noise if margins else None, "scale": scale,
            "coverage": coverage, "missing": missing,
            "conditions": [{"margin": _round(c.value), "ties_pass": c.ties_pass,
                            "ci_low": _round(c.low) if _sampled(m, bounds) else None,
                            "ci_high": _round(c.high) if _sampled(m, bounds) else None,
                            "status": c.status} for c, m in conditions],
            "decided": f"{decided} of {len(conditions)} conditions decided "
                       f"({statuses.count('met')} met, {statuses.count('failed')} refuted)" if conditions else None,
            "interval": decision, "confidence": settings.confidence}


def _deciding(conditions: list) -> tuple | None:
    """The condition a reader should look at: a refuted one, else an undecided one, else the closest call
    (smallest lower bound among the strict ones)."""
    if not conditions:
        return None
    for wanted in ("failed", "undecided"):
        chosen = [c for c in conditions if c[0].status == wanted]
        if chosen:
            return min(chosen, key=lambda c: abs(c[0].value))
    strict = [c for c in conditions if not c[0].ties_pass] or conditions
    return min(strict, key=lambda c: c[0].low if c[0].low is not None else c[0].value)


def _sampled(margin, bounds) -> bool:
    """Whether a condition's interval comes from resampling (else it is the value itself)."""
    return bounds is not None or (isinstance(margin, Estimate) and margin.has_interval)


def _maybe_round(x):
    return None if x is None else _round(x)


# the interval settings of the claims being evaluated (set by evaluate_claims from the specs' statistics)
_SETTINGS = BootstrapSettings()


def _no_data(key: str, scale: str, criterion: str, missing: str) -> dict:
    return _verdict(key, scale, criterion, None, missing=missing)


# ------------------------------------------------------------------------------------------ table access
def _groups(table: pd.DataFrame) -> list:
    return list(dict.fromkeys(c[0] for c in table.columns))


def _value(table: pd.DataFrame, row, col: tuple) -> Estimate | float:
    """A cell as an :class:`Estimate` (with the per-query outcomes behind it, when the table has them);
    NaN when the cell is absent."""
    full = col + ("mean",)
    if table is None or full not in table.columns or row not in table.index:
        return math.nan
    value = float(table.loc[row, full])
    if math.isnan(value):
        return math.nan
    row_t = row if isinstance(row, tuple) else (row,)
    estimate = (table.attrs.get("estimates") or {}).get((row_t, col))
    return estimate if estimate is not None else Estimate(value, (), False)


def _avg_r1(table: pd.DataFrame, row, group) -> Estimate | float:
    """R@1 averaged over both directions (the paper's "average R@1"); NaN when a cell is absent."""
    values = [_value(table, row, (group, d, "R@1")) for d in DIRECTION_LABELS]
    return mean_of(values) if not any(math.isnan(v) for v in values) else math.nan


def _rows(table: pd.DataFrame) -> list:
    return list(dict.fromkeys(table.index))


def _competitors(rows: Iterable, hn_row: str) -> list:
    """Rows HN-CLIP competes with: not itself, not its variants ("HN-CLIP (frozen G)"), not the zero-shot
    reference row (a backbone before fine-tuning, shown for reference, not a competitor)."""
    return [r for r in rows if r != hn_row and r != ZEROSHOT_ROW and not str(r).startswith(f"{hn_row} (")]


def _round(x: float) -> float:
    return round(float(x), 2)


def _direction(d: str) -> str:
    return d.replace("->", "→")


def in_domain_groups(spec: Mapping | None, table: pd.DataFrame | None = None) -> list:
    """Groups of an experiment whose runs are tested on their own training distribution: the run's train
    set is itself one of the experiment's evaluated benchmarks (DOCCI, DCI and Long-DCI, whose runs train
    on DOCCI; not Urban-1K, whose runs train on VG paragraphs). Without a spec: every group of the table."""
    if not spec:
        return _groups(table) if table is not None else []
    evaluated = {c["eval_benchmark"] for c in spec["cells"]}
    groups = []
    for cell in spec["cells"]:
        if cell.get("zeroshot") or cell["group"] in groups:
            continue
        if cell["run"]["train_set"] in evaluated:
            groups.append(cell["group"])
    return groups


# ------------------------------------------------------------------------------------------- seed noise
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


def _seed_columns(table: pd.DataFrame) -> list[str]:
    return sorted({str(c[3]) for c in table.columns if str(c[3]).startswith("s") and str(c[3])[1:].isdigit()},
                  key=lambda s: int(s[1:]))


# -------------------------------------------------------------------------------------------- A1: main
def _a1_columns(main, hn_row, scale, noise) -> dict:
    criterion = (f"in every column of the main table (each benchmark, direction and R@K), {hn_row} is best or "
                 "tied with the best competitor, and strictly best in every R@1 column; competitors are the "
                 "other fine-tuned rows (the zero-shot backbone is a reference row)")
    if main is None:
        return _no_data("a1_columns", scale, criterion, "no main table")
    competitors = _competitors(_rows(main), hn_row)
    if hn_row not in main.index or not competitors:
        return _no_data("a1_columns", scale, criterion, f"the main table needs {hn_row!r} and a competitor")
    margins, evidence, gains = [], {}, {}
    best = tied = r1_led = r1_total = 0
    deep = {}
    for col in [c[:-1] for c in main.columns if c[-1] == "mean"]:
        hn = _value(main, hn_row, col)
        others = [v for v in (_value(main, r, col) for r in competitors) if not math.isnan(v)]
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
            label = f"{group} {_direction(direction)}"
            gains[label] = _round(margin)
            evidence[f"{label} R@1: {hn_row} minus the strongest competitor"] = _round(margin)
        else:
            stats = deep.setdefault(group, [0, 0, 0])
            stats[0] += margin > 0
            stats[1] += margin == 0
            stats[2] += 1
    total = len(margins)
    evidence[f"columns where {hn_row} is best / tied / behind"] = f"{best} / {tied} / {total - best - tied} of {total}"
    evidence["R@1 directions led"] = f"{r1_led} of {r1_total}"
    measures = {"columns best": best, "columns tied": tied, "columns": total, "R@1 directions led": r1_led,
                "R@1 directions": r1_total, "R@1 gain over the strongest competitor": gains,
                "R@5/R@10 columns best": {g: s[0] for g, s in deep.items()},
                "R@5/R@10 columns tied": {g: s[1] for g, s in deep.items()}}
    return _verdict("a1_columns", scale, criterion, margins, evidence, measures, noise)


def _epoch_avg_r1(epochs: pd.DataFrame, row, group, epoch: int) -> float:
    key = (row, group, epoch)
    if epochs is None or key not in epochs.index:
        return math.nan
    return mean_of([_value(epochs, key, (d, "R@1")) for d in DIRECTION_LABELS])


def _epoch_groups(epochs: pd.DataFrame | None) -> list:
    if epochs is None or epochs.empty:
        return []
    return list(dict.fromkeys(epochs.index.get_level_values("benchmark")))


def _a1_first_epoch(main, epochs, hn_row, scale, noise) -> dict:
    criterion = (f"on every benchmark, {hn_row}'s average R@1 after epoch 1 (epochs.csv of the main run) is >= "
                 "the final average R@1 (main table) of more than half of the fine-tuned baselines")
    if main is None or not _epoch_groups(epochs):
        return _no_data("a1_first_epoch", scale, criterion, "needs the main table and per-epoch evaluations")
    baselines = _competitors(_rows(main), hn_row)
    margins, evidence, first, counts, untested = [], {}, {}, {}, []
    for group in _groups(main):
        e1 = _epoch_avg_r1(epochs, hn_row, group, 1)
        finals = {b: _avg_r1(main, b, group) for b in baselines}
        finals = {b: v for b, v in finals.items() if not math.isnan(v)}
        if math.isnan(e1) or not finals:
            untested.append(str(group))
            continue
        diffs = sorted((e1 - v for v in finals.values()), reverse=True)
        need = len(diffs) // 2 + 1  # more than half
        margins.append((diffs[need - 1], True))
        reached = sum(d >= 0 for d in diffs)
        first[group] = _round(e1)
        counts[group] = reached
        evidence[f"{group}: {hn_row} epoch-1 average R@1"] = _round(e1)
        evidence[f"{group}: baselines whose final average R@1 it matches"] = \
            f"{reached} of {len(diffs)} ({', '.join(b for b, v in finals.items() if e1 >= v) or 'none'})"
    if not margins:
        return _no_data("a1_first_epoch", scale, criterion, f"no epoch-1 evaluation of {hn_row} on any benchmark")
    coverage = f"not measured on {', '.join(untested)} (no per-epoch evaluation there)" if untested else None
    return _verdict("a1_first_epoch", scale, criterion, margins, evidence,
                    {"first-epoch average R@1": first, "baselines matched by the first epoch": counts}, noise,
                    coverage=coverage)


def _docci_group(groups: Sequence, scale: str) -> tuple[object, str]:
    """DOCCI's group, or at toy scale the first benchmark standing in for it."""
    if "DOCCI" in groups:
        return "DOCCI", "DOCCI"
    if not groups:
        return None, ""
    return groups[0], f"{groups[0]} (standing in for DOCCI at {scale} scale)"


def _a1_second_epoch(main, epochs, hn_row, scale, noise) -> dict:
    group, where = _docci_group([g for g in _groups(main) if g in _epoch_groups(epochs)] if main is not None else [],
                                scale)
    criterion = (f"on {where or 'DOCCI'}, {hn_row}'s average R@1 after epoch 2 > every fine-tuned baseline's final "
                 "average R@1")
    if main is None or group is None:
        return _no_data("a1_second_epoch", scale, criterion, "needs the main table and per-epoch evaluations")
    e1, e2 = (_epoch_avg_r1(epochs, hn_row, group, e) for e in (1, 2))
    finals = {b: _avg_r1(main, b, group) for b in _competitors(_rows(main), hn_row)}
    finals = {b: v for b, v in finals.items() if not math.isnan(v)}
    if math.isnan(e2) or not finals:
        return _verdict("a1_second_epoch", scale, criterion, None, measures={
            "first-epoch average R@1": {} if math.isnan(e1) else {str(group): _round(e1)}},
            missing=f"no epoch-2 evaluation of {hn_row} on {group} (or no baseline)")
    strongest = max(finals, key=finals.get)
    evidence = {f"{group}: epoch-1 average R@1": _round(e1), f"{group}: epoch-2 average R@1": _round(e2),
                f"{group}: strongest baseline ({strongest}), final": _round(finals[strongest]),
                f"{group}: baselines below the first epoch": ", ".join(b for b, v in finals.items() if e1 > v) or "none"}
    measures = {"first-epoch average R@1": {str(group): _round(e1)}, "second-epoch average R@1": {str(group): _round(e2)}}
    return _verdict("a1_second_epoch", scale, criterion, [(e2 - finals[strongest], False)], evidence, measures, noise)


def _e3_directions(epochs, hn_row, scale, noise) -> dict:
    criterion = (f"after every epoch, on every benchmark with per-epoch evaluations and in each direction, "
                 f"{hn_row}'s R@1 > every other main method's R@1 after the same epoch")
    groups = _epoch_groups(epochs)
    if not groups:
        return _no_data("e3_directions", scale, criterion, "no per-epoch evaluations")
    methods = list(dict.fromkeys(epochs.index.get_level_values("method")))
    others = _competitors(methods, hn_row)
    if hn_row not in methods or not others:
        return _no_data("e3_directions", scale, criterion, f"per-epoch evaluations need {hn_row!r} and a competitor")
    margins, evidence, collapse = [], {}, {}
    led = total = 0
    for group in groups:
        epochs_here = sorted({int(k[2]) for k in epochs.index if k[0] == hn_row and k[1] == group})
        for d in DIRECTION_LABELS:
            worst = math.inf
            for e in epochs_here:
                hn = _value(epochs, (hn_row, group, e), (d, "R@1"))
                rivals = [_value(epochs, (m, group, e), (d, "R@1")) for m in others
                          if (m, group, e) in epochs.index]
                if not rivals:
                    continue
                margin = hn - max(rivals)
                margins.append((margin, False))
                worst = min(worst, margin)
                led += margin > 0
                total += 1
            if math.isfinite(worst):
                evidence[f"{group} {_direction(d)}: smallest lead over the epochs"] = _round(worst)
        for m in others:
            series = [(int(k[2]), float(epochs.loc[k, ("I->T", "R@1", "mean")])) for k in epochs.index
                      if k[0] == m and k[1] == group]
            series.sort()
            drops = [(series[i - 1][1] - series[i][1], series[i][0]) for i in range(1, len(series))]
            if drops and max(drops)[0] > 0:
                collapse[f"{m} on {group}"] = max(drops)[1]
    evidence["epoch x direction x benchmark cells led"] = f"{led} of {total}"
    if not margins:
        return _no_data("e3_directions", scale, criterion, "no epoch evaluated for two methods")
    measures = {"cells led": led, "cells": total, "epoch of the largest I→T R@1 drop": collapse}
    return _verdict("e3_directions", scale, criterion, margins, evidence, measures, noise)


# ------------------------------------------------------------------------------------------ A2: plug-in
def _plugin_deltas(plugin: pd.DataFrame, groups: Sequence) -> dict[tuple, dict[str, float]]:
    """(framework, group) -> {direction: Δ R@1} for every framework and given group with both sides."""
    out = {}
    for fw in _rows(plugin):
        for g in groups:
            deltas = {d: _value(plugin, fw, (g, d, "R@1", DELTA)) for d in DIRECTION_LABELS}
            if not any(math.isnan(v) for v in deltas.values()):
                out[(fw, g)] = deltas
    return out


def _a2_frameworks(plugin, spec, scale, noise) -> dict:
    criterion = ("Δ average R@1 (+HN minus plain, mean of I→T and T→I) > 0 for every framework on every "
                 "in-domain benchmark of the plug-in table (its runs train on the benchmark's own training set; "
                 "VG → Urban-1K is transfer)")
    if plugin is None:
        return _no_data("a2_frameworks", scale, criterion, "no plug-in table")
    groups = in_domain_groups(spec, plugin)
    deltas = _plugin_deltas(plugin, groups)
    if not deltas:
        return _no_data("a2_frameworks", scale, criterion, "no framework has both plain and +HN runs in-domain")
    evidence, margins = {}, []
    for (fw, g), per_dir in deltas.items():
        gain = mean_of(list(per_dir.values()))
        evidence[f"{fw} on {g}: Δ average R@1"] = _round(gain)
        margins.append((gain, False))
    frameworks = list(dict.fromkeys(fw for fw, _ in deltas))
    improving = [fw for fw in frameworks if all(mean_of(list(v.values())) > 0
                                                 for (f, _), v in deltas.items() if f == fw)]
    improved = sum(m > 0 for m, _ in margins)
    evidence["in-domain combinations improved"] = f"{improved} of {len(margins)}"
    measures = {"in-domain combinations improved": improved, "in-domain combinations": len(margins),
                "frameworks improved on every in-domain benchmark": len(improving), "frameworks": len(frameworks)}
    return _verdict("a2_frameworks", scale, criterion, margins, evidence, measures, noise)


def _a2_directions(plugin, spec, scale, noise) -> dict:
    criterion = ("per-direction Δ R@1 > 0 in at least 35/36 of the in-domain (framework, benchmark, direction) "
                 "cases (with fewer than 36 cases: in every case)")
    if plugin is None:
        return _no_data("a2_directions", scale, criterion, "no plug-in table")
    deltas = _plugin_deltas(plugin, in_domain_groups(spec, plugin))
    cases = {f"{fw} on {g} {_direction(d)}": v for (fw, g), per_dir in deltas.items() for d, v in per_dir.items()}
    if not cases:
        return _no_data("a2_directions", scale, criterion, "no framework has both plain and +HN runs in-domain")
    values = sorted(cases.values(), reverse=True)
    need = math.ceil(len(values) * 35 / 36)
    improved = sum(v > 0 for v in values)
    largest = max(cases, key=cases.get)
    evidence = {"per-direction cases improved": f"{improved} of {len(values)} (needs {need})",
                f"largest gain ({largest})": _round(cases[largest]),
                "cases that do not improve": ", ".join(k for k, v in cases.items() if v <= 0) or "none"}
    measures = {"per-direction cases improved": improved, "per-direction cases": len(values),
                "largest per-direction gain": {largest: _round(cases[largest])}}
    return _verdict("a2_directions", scale, criterion, [(values[need - 1], False)], evidence, measures, noise)


def _a2_caption_length(plugin, spec, caption_words, scale, noise) -> dict:
    criterion = ("ordering the in-domain benchmarks by mean caption length (words), the Δ average R@1 averaged "
                 "over frameworks increases from each benchmark to the next longer one")
    if plugin is None:
        return _no_data("a2_caption_length", scale, criterion, "no plug-in table")
    groups = [g for g in in_domain_groups(spec, plugin) if g in (caption_words or {})]
    deltas = _plugin_deltas(plugin, groups)
    mean_gain = {}
    for g in groups:
        values = [mean_of(list(v.values())) for (_, gg), v in deltas.items() if gg == g]
        if values:
            mean_gain[g] = mean_of(values)
    if len(mean_gain) < 2:
        return _no_data("a2_caption_length", scale, criterion,
                        "needs two in-domain benchmarks with plug-in runs and caption lengths")
    ordered = sorted(mean_gain, key=lambda g: caption_words[g])
    evidence = {f"{g}: {caption_words[g]:.0f} words, mean Δ average R@1": _round(mean_gain[g]) for g in ordered}
    margins = [(mean_gain[b] - mean_gain[a], False) for a, b in zip(ordered, ordered[1:], strict=False)]
    return _verdict("a2_caption_length", scale, criterion, margins, evidence,
                    {"mean caption words": {g: round(caption_words[g], 1) for g in ordered}}, noise)


# ----------------------------------------------------------------------------------------- A3: transfer
def _a3_transfer(transfer, hn_row, scale, noise) -> dict:
    present = [g for g in PAPER_TRANSFER_PAIRS if transfer is not None and g in _groups(transfer)]
    pairs = present or (_groups(transfer) if transfer is not None else [])
    where = ("the paper's DCI↔DOCCI and DOCCI→Long-DCI pairs" if present
             else f"every configured transfer pair (standing in for DCI↔DOCCI and DOCCI→Long-DCI at {scale} scale)")
    criterion = (f"on {where}, {hn_row}'s R@1 > every other fine-tuned row's in both directions (its frozen-G "
                 "variant and the zero-shot backbone are not competitors)")
    if transfer is None or not pairs:
        return _no_data("a3_transfer", scale, criterion, "no transfer table")
    rivals = _competitors(_rows(transfer), hn_row)
    if hn_row not in transfer.index or not rivals:
        return _no_data("a3_transfer", scale, criterion, f"the transfer table needs {hn_row!r} and a competitor")
    margins, evidence, scores = [], {}, {}
    for pair in pairs:
        for d in DIRECTION_LABELS:
            hn = _value(transfer, hn_row, (pair, d, "R@1"))
            others = {r: _value(transfer, r, (pair, d, "R@1")) for r in rivals}
            others = {r: v for r, v in others.items() if not math.isnan(v)}
            if math.isnan(hn) or not others:
                continue
            best = max(others, key=others.get)
            label = f"{pair} {_direction(d)}"
            scores[label] = _round(hn)
            evidence[f"{label}: {hn_row} minus {best}"] = _round(hn - others[best])
            margins.append((hn - others[best], False))
    if not margins:
        return _no_data("a3_transfer", scale, criterion, "no transfer pair with two rows")
    missing = [p for p in PAPER_TRANSFER_PAIRS if present and p not in present]
    coverage = f"pairs not configured: {', '.join(missing)}" if missing else None
    return _verdict("a3_transfer", scale, criterion, margins, evidence, {f"{hn_row} transfer R@1": scores}, noise,
                    coverage=coverage)


def _a3_dci_to_docci(transfer, main, hn_row, scale, noise) -> dict:
    criterion = (f"{hn_row} trained on DCI and tested on DOCCI has a higher R@1, in each direction, than every "
                 "fine-tuned baseline's in-domain DOCCI R@1 (main table)")
    pair = "DCI -> DOCCI"
    if transfer is None or pair not in _groups(transfer) or main is None or "DOCCI" not in _groups(main):
        return _no_data("a3_dci_to_docci", scale, criterion, "needs the DCI → DOCCI transfer and DOCCI in the main "
                        "table (the paper's benchmarks)")
    margins, evidence, scores = [], {}, {}
    for d in DIRECTION_LABELS:
        hn = _value(transfer, hn_row, (pair, d, "R@1"))
        base = {b: _value(main, b, ("DOCCI", d, "R@1")) for b in _competitors(_rows(main), hn_row)}
        base = {b: v for b, v in base.items() if not math.isnan(v)}
        if math.isnan(hn) or not base:
            continue
        best = max(base, key=base.get)
        scores[_direction(d)] = _round(hn)
        evidence[f"{_direction(d)}: {hn_row} DCI → DOCCI"] = _round(hn)
        evidence[f"{_direction(d)}: best in-domain DOCCI baseline ({best})"] = _round(base[best])
        margins.append((hn - base[best], False))
    if not margins:
        return _no_data("a3_dci_to_docci", scale, criterion, f"no {hn_row} DCI → DOCCI row")
    return _verdict("a3_dci_to_docci", scale, criterion, margins, evidence, {"DCI → DOCCI R@1": scores}, noise)


# ---------------------------------------------------------------------------------------- A3: fractions
def _fraction_rows(fractions: pd.DataFrame) -> tuple[list, list[float]]:
    methods = list(dict.fromkeys(fractions.index.get_level_values("method")))
    values = sorted({float(f) for f in fractions.index.get_level_values("fraction")})
    return methods, values


def _frac(fractions, method, f, group) -> float:
    for key in fractions.index:
        if key[0] == method and math.isclose(float(key[1]), f):
            return _avg_r1(fractions, key, group)
    return math.nan


def _a3_fraction_20(fractions, main, hn_row, scale, noise) -> dict:
    criterion = (f"on every benchmark of the fractions experiment, {hn_row}'s average R@1 at 20 % of the training "
                 "data > the strongest fine-tuned baseline's at 100 % (every baseline of the main table and "
                 "of the fractions experiment)")
    if fractions is None:
        return _no_data("a3_fraction_20", scale, criterion, "no fractions table")
    methods, values = _fraction_rows(fractions)
    if not any(math.isclose(f, 0.2) for f in values) or hn_row not in methods:
        return _no_data("a3_fraction_20", scale, criterion, f"no {hn_row} run at fraction 0.2")
    margins, evidence, at20, strongest_of = [], {}, {}, {}
    for g in _groups(fractions):
        hn = _frac(fractions, hn_row, 0.2, g)
        full = {m: _frac(fractions, m, 1.0, g) for m in _competitors(methods, hn_row)}
        if main is not None and g in _groups(main):
            full.update({b: _avg_r1(main, b, g) for b in _competitors(_rows(main), hn_row)})
        full = {m: v for m, v in full.items() if not math.isnan(v)}
        if math.isnan(hn) or not full:
            continue
        best = max(full, key=full.get)
        margins.append((hn - full[best], False))
        at20[g] = _round(hn)
        strongest_of[g] = _round(full[best])
        evidence[f"{g}: {hn_row} at 20 %"] = _round(hn)
        evidence[f"{g}: strongest baseline at 100 % ({best})"] = _round(full[best])
        if "GOAL" in full and best != "GOAL":
            evidence[f"{g}: GOAL at 100 %"] = _round(full["GOAL"])
    if not margins:
        return _no_data("a3_fraction_20", scale, criterion, "no full-data baseline on the fractions' benchmarks")
    measures = {f"{hn_row} average R@1 at 20 %": at20, "strongest full-data baseline": strongest_of}
    return _verdict("a3_fraction_20", scale, criterion, margins, evidence, measures, noise)


def _a3_every_fraction(fractions, hn_row, scale, noise) -> dict:
    criterion = (f"at every data fraction and on every benchmark, {hn_row}'s average R@1 > every other row's at "
                 "the same fraction")
    if fractions is None:
        return _no_data("a3_every_fraction", scale, criterion, "no fractions table")
    methods, values = _fraction_rows(fractions)
    others = _competitors(methods, hn_row)
    if hn_row not in methods or not others:
        return _no_data("a3_every_fraction", scale, criterion, f"the fractions table needs {hn_row!r} and a baseline")
    margins, evidence, leads = [], {}, {}
    for g in _groups(fractions):
        for f in values:
            hn = _frac(fractions, hn_row, f, g)
            rivals = {m: _frac(fractions, m, f, g) for m in others}
            rivals = {m: v for m, v in rivals.items() if not math.isnan(v)}
            if math.isnan(hn) or not rivals:
                continue
            best = max(rivals, key=rivals.get)
            label = f"{g} at {f:g}"
            leads[label] = _round(hn - rivals[best])
            evidence[f"{label}: {hn_row} minus {best}"] = _round(hn - rivals[best])
            margins.append((hn - rivals[best], False))
    if not margins:
        return _no_data("a3_every_fraction", scale, criterion, "no fraction with two rows")
    return _verdict("a3_every_fraction", scale, criterion, margins, evidence, {"lead per fraction": leads}, noise)


def _a3_margin_widens(fractions, hn_row, scale, noise) -> dict:
    reference = "GOAL"
    criterion = (f"on every benchmark, {hn_row}'s average-R@1 margin over GOAL (without a GOAL row: over the "
                 "strongest other row at each fraction) is positive at every fraction and larger at each smaller "
                 "fraction than at the next larger one")
    if fractions is None:
        return _no_data("a3_margin_widens", scale, criterion, "no fractions table")
    methods, values = _fraction_rows(fractions)
    others = _competitors(methods, hn_row)
    if hn_row not in methods or not others or len(values) < 2:
        return _no_data("a3_margin_widens", scale, criterion, f"needs {hn_row!r}, a baseline and two fractions")
    rivals = [reference] if reference in others else others
    margins, evidence, smallest, per_fraction = [], {}, {}, {}
    for g in _groups(fractions):
        series = []
        for f in values:
            hn = _frac(fractions, hn_row, f, g)
            base = [v for v in (_frac(fractions, m, f, g) for m in rivals) if not math.isnan(v)]
            if not math.isnan(hn) and base:
                series.append((f, hn - max(base)))
        if len(series) < 2:
            continue
        for f, m in series:
            per_fraction[f"{g} at {f:g}"] = _round(m)
            evidence[f"{g}: margin at {f:g}"] = _round(m)
            margins.append((m, False))
        margins += [(small[1] - large[1], False) for small, large in zip(series, series[1:], strict=False)]
        smallest[g] = _round(series[0][1])
    if not margins:
        return _no_data("a3_margin_widens", scale, criterion, "no benchmark with two fractions of both rows")
    measures = {"margin at the smallest fraction": smallest, "margin per fraction": per_fraction}
    return _verdict("a3_margin_widens", scale, criterion, margins, evidence, measures, noise)


# ----------------------------------------------------------------------------------------- A4: ablation
def _ablation_scores(ablation, spec, rows: Mapping[str, str]) -> tuple[list, dict]:
    groups = in_domain_groups(spec, ablation)
    scores = {name: {g: _avg_r1(ablation, label, g) for g in groups} for name, label in rows.items()}
    return groups, scores


def _a4_hn_bulk(ablation, spec, scale, noise, rows=ABLATION_ROWS) -> dict:
    criterion = (f"on every in-domain benchmark of the ablation, ({rows['hn']} − {rows['infonce']}) > half of "
                 f"({rows['full']} − {rows['infonce']}) > 0, in average R@1")
    if ablation is None:
        return _no_data("a4_hn_bulk", scale, criterion, "no ablation table")
    groups, s = _ablation_scores(ablation, spec, rows)
    margins, evidence, share = [], {}, {}
    for g in groups:
        base, hn, full = s["infonce"][g], s["hn"][g], s["full"][g]
        if any(math.isnan(v) for v in (base, hn, full)):
            continue
        evidence[f"{g}: {rows['hn']} gain"] = _round(hn - base)
        evidence[f"{g}: {rows['full']} gain"] = _round(full - base)
        margins += [(full - base, False), ((hn - base) - (full - base) / 2, False)]
        if full != base:
            share[g] = round(float(hn - base) / float(full - base), 3)
    if not margins:
        return _no_data("a4_hn_bulk", scale, criterion, f"needs rows {rows['infonce']!r}, {rows['hn']!r}, "
                        f"{rows['full']!r} on an in-domain benchmark")
    return _verdict("a4_hn_bulk", scale, criterion, margins, evidence, {"share of the gain from HN alone": share},
                    noise)


def _a4_token_after_hn(ablation, spec, scale, noise, rows=ABLATION_ROWS) -> dict:
    criterion = (f"on every in-domain benchmark, the token branch without HN does not help ({rows['token']} <= "
                 f"{rows['infonce']}) and with HN it does ({rows['full']} > {rows['hn']}), in average R@1")
    if ablation is None:
        return _no_data("a4_token_after_hn", scale, criterion, "no ablation table")
    groups, s = _ablation_scores(ablation, spec, rows)
    margins, evidence, gains = [], {}, {}
    for g in groups:
        base, hn, token, full = s["infonce"][g], s["hn"][g], s["token"][g], s["full"][g]
        if any(math.isnan(v) for v in (base, hn, token, full)):
            continue
        evidence[f"{g}: token branch without HN ({rows['token']} − {rows['infonce']})"] = _round(token - base)
        evidence[f"{g}: token branch with HN ({rows['full']} − {rows['hn']})"] = _round(full - hn)
        gains[f"{g} without HN"] = _round(token - base)
        gains[f"{g} with HN"] = _round(full - hn)
        margins += [(base - token, True), (full - hn, False)]
    if not margins:
        return _no_data("a4_token_after_hn", scale, criterion, "needs the four ablation rows on an in-domain benchmark")
    return _verdict("a4_token_after_hn", scale, criterion, margins, evidence, {"token-branch gain": gains}, noise)


def _a4_gamma(gamma_sweep, spec, scale, noise) -> dict:
    criterion = "on every in-domain benchmark, average R@1 at every swept gamma in [0.25, 1] > at gamma = 0"
    if gamma_sweep is None:
        return _no_data("a4_gamma", scale, criterion, "no gamma sweep")
    gammas = {float(g if not isinstance(g, tuple) else g[-1]): g for g in gamma_sweep.index}
    tested = sorted(g for g in gammas if 0.25 <= g <= 1.0)
    if 0.0 not in gammas or not tested:
        return _no_data("a4_gamma", scale, criterion, "needs gamma = 0 and a gamma in [0.25, 1]")
    margins, evidence, gains = [], {}, {}
    for group in in_domain_groups(spec, gamma_sweep):
        zero = _avg_r1(gamma_sweep, gammas[0.0], group)
        for g in tested:
            value = _avg_r1(gamma_sweep, gammas[g], group)
            if math.isnan(zero) or math.isnan(value):
                continue
            gains[f"{group} at {g:g}"] = _round(value - zero)
            evidence[f"{group}: gamma {g:g} minus gamma 0"] = _round(value - zero)
            margins.append((value - zero, False))
    if not margins:
        return _no_data("a4_gamma", scale, criterion, "no in-domain benchmark in the gamma sweep")
    return _verdict("a4_gamma", scale, criterion, margins, evidence, {"gain over gamma = 0": gains}, noise)


# --------------------------------------------------------------------------------------- B.2: frozen G
def _b2_frozen(transfer, ablation, ablation_spec, hn_row, frozen_row, scale, noise, rows=ABLATION_ROWS) -> dict:
    criterion = (f"on every transfer pair, {frozen_row}'s R@1 < every other fine-tuned row's in both directions "
                 "(transfer table; and the ablation's frozen-G variant below every other variant on its "
                 "transfer benchmarks, where the ablation has any)")
    margins, evidence, gaps = [], {}, {}
    if transfer is not None and frozen_row in transfer.index:
        others = [r for r in _rows(transfer) if r not in (frozen_row, ZEROSHOT_ROW)]
        for pair in _groups(transfer):
            for d in DIRECTION_LABELS:
                frozen = _value(transfer, frozen_row, (pair, d, "R@1"))
                rest = {r: _value(transfer, r, (pair, d, "R@1")) for r in others}
                rest = {r: v for r, v in rest.items() if not math.isnan(v)}
                if math.isnan(frozen) or not rest:
                    continue
                worst = min(rest, key=rest.get)
                label = f"{pair} {_direction(d)}"
                evidence[f"{label}: {worst} minus {frozen_row}"] = _round(rest[worst] - frozen)
                margins.append((rest[worst] - frozen, False))
                if hn_row in rest:
                    gaps[label] = _round(rest[hn_row] - frozen)
    if ablation is not None and rows["frozen"] in ablation.index:
        transfer_groups = [g for g in _groups(ablation) if g not in in_domain_groups(ablation_spec, ablation)]
        for g in transfer_groups if ablation_spec else []:
            for d in DIRECTION_LABELS:
                frozen = _value(ablation, rows["frozen"], (g, d, "R@1"))
                rest = [v for r in _rows(ablation) if r != rows["frozen"]
                        for v in [_value(ablation, r, (g, d, "R@1"))] if not math.isnan(v)]
                if math.isnan(frozen) or not rest:
                    continue
                evidence[f"ablation {g} {_direction(d)}: lowest other variant minus frozen G"] = _round(min(rest) - frozen)
                margins.append((min(rest) - frozen, False))
                full = _value(ablation, rows["full"], (g, d, "R@1"))
                if not math.isnan(full):
                    gaps[f"ablation {g} {_direction(d)}"] = _round(full - frozen)
    if not margins:
        return _no_data("b2_frozen", scale, criterion, f"no {frozen_row!r} row on a transfer benchmark (add "
                        "hnclip_frozen to experiments.transfer.methods)")
    return _verdict("b2_frozen", scale, criterion, margins, evidence, {"default minus frozen G": gaps}, noise)


# -------------------------------------------------------------------------------------------- seeds
def _six_metric_spread(seeds_spec, records, hn_row) -> float | None:
    """Largest |difference| between two seeds of ``hn_row`` over the six Recall@K (both directions)."""
    if not seeds_spec or not records:
        return None
    from hnclip.analysis.records import METRICS, record_key

    index = {record_key(r["run"], r["eval_benchmark"]): r for r in records}
    per_group: dict[str, list[dict]] = {}
    for cell in seeds_spec["cells"]:
        record = index.get(record_key(cell["run"], cell["eval_benchmark"]))
        if cell["row"] == hn_row and record is not None:
            per_group.setdefault(cell["group"], []).append(record["metrics"])
    spreads = [max(abs(a[m] - b[m]) for m in METRICS) for runs in per_group.values()
               for i, a in enumerate(runs) for b in runs[i + 1:]]
    return max(spreads) if spreads else None


def _seeds_average(seeds, seeds_spec, records, hn_row, scale) -> dict:
    criterion = "mean over methods, benchmarks and directions of |R@1 change between two seeds| <= 0.4"
    if seeds is None:
        return _no_data("seeds_average", scale, criterion, "no seeds table")
    seed_cols = _seed_columns(seeds)
    if len(seed_cols) < 2:
        return _no_data("seeds_average", scale, criterion, "the seeds table has one seed")
    changes = {}
    for row in _rows(seeds):
        for g in _groups(seeds):
            for d in DIRECTION_LABELS:
                values = [_value(seeds, row, (g, d, "R@1", s)) for s in seed_cols]
                values = [v for v in values if not math.isnan(v)]
                if len(values) >= 2:
                    changes[f"{row} on {g} {_direction(d)}"] = max(values) - min(values)
    if not changes:
        return _no_data("seeds_average", scale, criterion, "no method with two seeds")
    mean = float(np.mean([float(v) for v in changes.values()]))
    largest = max(changes, key=changes.get)
    # the mean |change| is not linear: its interval from the changes' paired replicates
    draws = [replicates(v, _SETTINGS) if isinstance(v, Estimate) else None for v in changes.values()]
    bounds = None
    if draws and all(d is not None for d in draws):
        low, high = percentile_interval(0.4 - np.abs(np.stack(draws)).mean(axis=0), _SETTINGS.confidence)
        bounds = [(low, high)]
    evidence = {"mean |R@1 change|": _round(mean), f"largest R@1 change ({largest})": _round(changes[largest])}
    measures = {"mean R@1 change": _round(mean), "largest R@1 change": _round(changes[largest])}
    six = _six_metric_spread(seeds_spec, records, hn_row)
    if six is not None:
        evidence[f"largest change of {hn_row} over the six Recall@K"] = _round(six)
        measures[f"largest {hn_row} change over six metrics"] = _round(six)
    return _verdict("seeds_average", scale, criterion, [(0.4 - mean, True)], evidence, measures, bounds=bounds)


def _seeds_ranking(seeds, scale) -> dict:
    criterion = ("on Long-DCI (every benchmark of the seeds table when it has no Long-DCI), the methods' order by "
                 "average R@1 is the same under each seed")
    if seeds is None or len(_seed_columns(seeds)) < 2:
        return _no_data("seeds_ranking", scale, criterion, "no seeds table with two seeds")
    groups = ["Long-DCI"] if "Long-DCI" in _groups(seeds) else _groups(seeds)
    evidence, same, flips = {}, [], []
    for g in groups:
        orders, by_seed = {}, {}
        for s in _seed_columns(seeds):
            scores = {}
            for row in _rows(seeds):
                values = [_value(seeds, row, (g, d, "R@1", s)) for d in DIRECTION_LABELS]
                if not any(math.isnan(v) for v in values):
                    scores[row] = mean_of(values)
            by_seed[s] = scores
            orders[s] = [r for r in sorted(scores, key=lambda r: float(scores[r]), reverse=True)]
        if len(orders) >= 2 and all(len(o) >= 2 for o in orders.values()):
            for s, order in orders.items():
                evidence[f"{g}: order under seed {s[1:]}"] = " > ".join(map(str, order))
            same.append(len({tuple(o) for o in orders.values()}) == 1)
            # a pair of methods whose order flips between two seeds: refuted only when both seeds' paired
            # differences are decided (each interval excludes 0), else the flip is within noise
            rows = list(orders[next(iter(orders))])
            for i, a in enumerate(rows):
                for b in rows[i + 1:]:
                    diffs = [by_seed[s][a] - by_seed[s][b] for s in by_seed if a in by_seed[s] and b in by_seed[s]]
                    if len({float(d) > 0 for d in diffs}) == 2:
                        bounds = [interval(d, _SETTINGS) for d in diffs]  # None: no outcomes, judged on value
                        decided = all(bd is None or bd[0] > 0 or bd[1] < 0 for bd in bounds)
                        flips.append(decided)
                        evidence[f"{g}: {a} vs {b} flips between seeds"] = "decided" if decided else "within intervals"
    if not same:
        return _no_data("seeds_ranking", scale, criterion, "needs two methods with two seeds")
    if all(same):
        return _verdict("seeds_ranking", scale, criterion, None, evidence, holds=True)
    if any(flips):
        return _verdict("seeds_ranking", scale, criterion, None, evidence, holds=False)
    verdict = _verdict("seeds_ranking", scale, criterion, None, evidence, holds=False)
    verdict.update(verdict="inconclusive", holds=None)  # every flip lies within the per-seed intervals
    return verdict


# ------------------------------------------------------------------------------------------- premise
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


def _premise_claims(premise: Mapping | None, scale: str) -> list[dict]:
    criteria = {
        "premise_saturation": "share of first-epoch micro-batches whose standard InfoNCE < 10^-3 >= 0.80",
        "premise_exact_zero": ("share of fp32 measurements whose InfoNCE parameter gradient is exactly zero >= "
                               "0.47 (the paper does not say which gradient; the others are shown)"),
        "premise_active": ("in every epoch of HN-only fine-tuning, the share of micro-batches still active (their "
                           "standard InfoNCE >= 10^-3, the saturation threshold) >= 0.26 (the paper does not define "
                           "'active'; the HN objective itself stays above 10^-3 on practically every batch)"),
        "premise_ratio": ("every per-epoch median of |boosted gradient| / |standard gradient| (where the standard "
                          "one is nonzero) lies in [10^2, 10^6]"),
        "premise_cosine": ("the cosine between boosted and standard gradients is positive in >= 98 % of "
                           "measurements and its median > 0"),
        "premise_error": ("standard InfoNCE flattens within the run, and retrieval error (100 − R@1) is lower at the "
                          "last epoch than at the first, in both directions"),
    }
    if not premise:
        return [_no_data(k, scale, c, "no premise measurements (hnclip.analysis.premise)") for k, c in criteria.items()]
    p = check_premise(premise)
    # the figures each verdict needs; a None one means no run of its role is in the config
    needs = {
        "premise_saturation": ["saturated_share_epoch1"],
        "premise_exact_zero": ["exact_zero.param_grad.fp32"],
        "premise_active": ["hn_active_share_min_epoch"],
        "premise_ratio": ["ratio_median_per_epoch_min", "ratio_median_per_epoch_max"],
        "premise_cosine": ["grad_cosine_positive_share", "grad_cosine_median"],
        "premise_error": list(ERROR_KEYS),
    }
    role_words = {"plain": "plain InfoNCE fine-tuning (gamma 0, no token term)",
                  "hn": "HN-only fine-tuning (gamma 0.5, no token term)", "hnclip": "HN-CLIP (gamma 0.5)"}
    fp32 = {k: p[k] for k in SHARE_KEYS if k.startswith("exact_zero.") and k.endswith(".fp32") and p[k] is not None}
    flat = p["infonce_flat_epoch"]
    out = []
    for key, criterion in criteria.items():
        unmeasured = [k for k in needs[key] if p.get(k) is None]
        if unmeasured:
            roles = sorted({KEY_ROLE[k] for k in unmeasured})
            out.append(_no_data(key, scale, criterion, "no full-data run of "
                                + " or ".join(role_words[r] for r in roles) + " in this config"))
        elif key == "premise_saturation":
            out.append(_verdict(key, scale, criterion, [(p["saturated_share_epoch1"] - 0.80, True)],
                                {"saturated share, epoch 1": round(p["saturated_share_epoch1"], 3)},
                                {"saturated share, epoch 1": p["saturated_share_epoch1"]}))
        elif key == "premise_exact_zero":
            out.append(_verdict(key, scale, criterion, [(p["exact_zero.param_grad.fp32"] - 0.47, True)],
                                {f"exactly zero: {k.split('.')[1].replace('_', ' ')} (fp32)": round(v, 3)
                                 for k, v in fp32.items()},
                                {"exact-zero share, parameter gradient, fp32": p["exact_zero.param_grad.fp32"]}))
        elif key == "premise_active":
            out.append(_verdict(key, scale, criterion, [(p["hn_active_share_min_epoch"] - 0.26, True)],
                                {"smallest per-epoch share of active batches": round(p["hn_active_share_min_epoch"], 3)},
                                {"active share, smallest epoch": p["hn_active_share_min_epoch"]}))
        elif key == "premise_ratio":
            low, high = p["ratio_median_per_epoch_min"], p["ratio_median_per_epoch_max"]
            out.append(_verdict(key, scale, criterion,
                                [(math.log10(low) - 2, True) if low > 0 else (-math.inf, True),
                                 (6 - math.log10(max(high, 1e-300)), True)],
                                {"smallest per-epoch median ratio": low, "largest per-epoch median ratio": high},
                                {"per-epoch median ratio": {"smallest": low, "largest": high}}))
        elif key == "premise_cosine":
            out.append(_verdict(key, scale, criterion,
                                [(p["grad_cosine_positive_share"] - 0.98, True), (p["grad_cosine_median"], False)],
                                {"median cosine": round(p["grad_cosine_median"], 3),
                                 "share of positive cosines": round(p["grad_cosine_positive_share"], 3)},
                                {"median gradient cosine": p["grad_cosine_median"],
                                 "positive-cosine share": p["grad_cosine_positive_share"]}))
        else:  # premise_error
            errors = {k: p[k] for k in ERROR_KEYS}
            evidence = {"InfoNCE flattens at epoch": "never" if flat is None else flat,
                        **{k.replace("_", " "): round(v, 2) for k, v in errors.items()}}
            if flat is None:
                out.append(_verdict(key, scale, criterion, None, evidence, holds=False))
            else:
                out.append(_verdict(key, scale, criterion,
                                    [(p["error_i2t_first"] - p["error_i2t_last"], False),
                                     (p["error_t2i_first"] - p["error_t2i_last"], False)], evidence,
                                    {"retrieval error": errors}))
    return out


# --------------------------------------------------------------------------------------------- entry
def evaluate_claims(tables: Mapping[str, pd.DataFrame], scale: str, specs: Mapping[str, Mapping] | None = None,
                    records: Sequence[Mapping] | None = None, premise: Mapping | None = None,
                    caption_words: Mapping[str, float] | None = None, hn_row: str = "HN-CLIP",
                    frozen_row: str = "HN-CLIP (frozen G)", dynamics: Mapping[str, pd.DataFrame] | None = None,
                    settings: BootstrapSettings | None = None) -> list[dict]:
    """Verdicts on every claim of :data:`CLAIMS`, in that order.

    ``tables``: experiment name -> table (main, plugin, transfer, fractions, gamma_sweep, ablation, seeds,
    and ``epochs``: :func:`hnclip.analysis.tables.build_epochs_table`); ``specs``: experiment specs (which
    groups are in-domain; the seeds' cells); ``records``: evaluation records (the seeds' six metrics);
    ``premise``: the §2.4 / appendix C measurements (:data:`PREMISE_KEYS`); ``caption_words``: mean
    caption length per benchmark label; ``dynamics``: HN runs' logs (the gradient-ratio peak, a measure).

    ``settings``: the intervals' (default: the tables' own, from the config's ``statistics``).

    Each verdict: ``id, section, quote, claim, criterion, holds (True/False/None), verdict (one of
    VERDICTS), evidence, measures, noise (the seed-to-seed R@1 change, shown beside), scale, coverage
    (what a partly tested claim left out), missing (why there is no data), conditions (each inequality with
    its interval and status), decided, interval (the deciding margin's interval and resolution),
    confidence``.
    """
    global _SETTINGS
    specs = specs or {}
    if settings is None:
        settings = next((t.attrs["statistics"] for t in tables.values()
                         if t is not None and isinstance(t.attrs.get("statistics"), BootstrapSettings)),
                        BootstrapSettings())
    _SETTINGS = settings
    noise = seed_noise(tables.get("seeds"))
    main, epochs = tables.get("main"), tables.get("epochs")
    verdicts = [
        _a1_columns(main, hn_row, scale, noise),
        _a1_first_epoch(main, epochs, hn_row, scale, noise),
        _a1_second_epoch(main, epochs, hn_row, scale, noise),
        _e3_directions(epochs, hn_row, scale, noise),
        _a2_frameworks(tables.get("plugin"), specs.get("plugin"), scale, noise),
        _a2_directions(tables.get("plugin"), specs.get("plugin"), scale, noise),
        _a2_caption_length(tables.get("plugin"), specs.get("plugin"), caption_words, scale, noise),
        _a3_transfer(tables.get("transfer"), hn_row, scale, noise),
        _a3_dci_to_docci(tables.get("transfer"), main, hn_row, scale, noise),
        _a3_fraction_20(tables.get("fractions"), main, hn_row, scale, noise),
        _a3_every_fraction(tables.get("fractions"), hn_row, scale, noise),
        _a3_margin_widens(tables.get("fractions"), hn_row, scale, noise),
        _a4_hn_bulk(tables.get("ablation"), specs.get("ablation"), scale, noise),
        _a4_token_after_hn(tables.get("ablation"), specs.get("ablation"), scale, noise),
        _a4_gamma(tables.get("gamma_sweep"), specs.get("gamma_sweep"), scale, noise),
        _b2_frozen(tables.get("transfer"), tables.get("ablation"), specs.get("ablation"), hn_row, frozen_row, scale,
                   noise),
        _seeds_average(tables.get("seeds"), specs.get("seeds"), records, hn_row, scale),
        _seeds_ranking(tables.get("seeds"), scale),
        *_premise_claims(premise, scale),
    ]
    peaks = _ratio_peaks(dynamics)
    if peaks:
        ratio = next(v for v in verdicts if v["id"] == "premise_ratio")
        ratio["measures"]["peak gradient ratio per run"] = peaks
    return verdicts


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


def power_notes(main: pd.DataFrame | None, hn_row: str = "HN-CLIP") -> tuple[list[dict], str]:
    """Per benchmark of the main table, what its test split resolves: the paired interval of ``hn_row``
    minus its strongest competitor in average R@1 (at the cells' seeds), its half-width and the difference
    detectable at 80 % power. Returns (notes, what was compared); empty without outcomes."""
    if main is None or hn_row not in main.index:
        return [], ""
    settings = main.attrs.get("statistics") or BootstrapSettings()
    notes, compared = [], set()
    for group in _groups(main):
        hn = _avg_r1(main, hn_row, group)
        rivals = {r: _avg_r1(main, r, group) for r in _competitors(_rows(main), hn_row)}
        rivals = {r: v for r, v in rivals.items() if not math.isnan(v)}
        if math.isnan(hn) or not rivals:
            continue
        best = max(rivals, key=lambda r: float(rivals[r]))
        margin = hn - rivals[best]
        bounds = interval(margin, settings)
        if bounds is None:
            continue
        terms = margin.terms
        samples = terms[0][1]
        compared.add(best)
        notes.append({"benchmark": str(group), "images": samples.outcomes[0].n_images, "seeds": len(samples.seeds),
                      "margin": _round(margin), "ci_low": _round(bounds[0]), "ci_high": _round(bounds[1]),
                      "half_width": _round((bounds[1] - bounds[0]) / 2),
                      "resolution": _maybe_round(resolution(margin, settings)), "versus": best})
    return notes, f"{hn_row} minus the strongest competitor ({', '.join(sorted(map(str, compared)))})"
