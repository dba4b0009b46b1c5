"""The abstract's training cost: HN-CLIP "training 2.4x faster than GOAL and 5.4x faster than StructXLIP".

Why a claim of its own, read from the main table's runs. The paper's speed-ups compare training at one
budget (D.1, Table A3), so ours compares the runs the main table already trained and their other seeds
(the seeds experiment), at full data on one train set, each run's training time its wall time less the evaluations after each epoch
(``summary["timing"]["train_time_s"]``, :func:`hnclip.training.timing.step_timing`). Runs that ran the gradient probe
are left out rather than corrected: the probe's cost is subtracted by an estimate, and a run without it
needs none (HN-CLIP's seed 0 probes for the premise figures; its other seeds do not).

The interval. Every method has a handful of runs (seeds), so the run-to-run spread of training time is
estimated from all of them together: the pooled variance of log training time within each method's
seeds, with its degrees of freedom. The ratio is one of geometric means; its interval is Student's t on
the log scale, t(df) * s * sqrt(1/n_a + 1/n_b). With no method run twice there is no spread to pool, and
the ratio is judged on its value and says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from hnclip.analysis.claims.base import PAPER_NAME, Context, claim, current_settings, round_margin

# competitor method key -> how many times faster HN-CLIP trains (abstract; D.1, Table A3)
PAPER_SPEEDUPS = {"goal": 2.4, "structxlip": 5.4}
PAPER_LABELS = {"goal": "GOAL", "structxlip": "StructXLIP"}


def t_quantile(probability: float, df: int) -> float:
    """Student's t quantile (``probability`` in (0.5, 1), ``df`` >= 1) by bisection on its CDF, the CDF by
    Simpson's rule on the density: the report's environment has no scipy, and six digits are plenty."""
    if not 0.5 < probability < 1.0 or df < 1:
        raise ValueError(f"need 0.5 < probability < 1 and df >= 1, got {probability}, {df}")
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def density(x: float) -> float:
        return math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))

    def cdf(x: float, steps: int = 2000) -> float:  # 0.5 + integral of the density over [0, x]
        h = x / steps
        total = density(0.0) + density(x) + sum((4 if i % 2 else 2) * density(i * h) for i in range(1, steps))
        return 0.5 + total * h / 3

    low, high = 0.0, 1.0
    while cdf(high) < probability:
        high *= 2
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if cdf(middle) < probability else (low, middle)
    return (low + high) / 2


def pooled_log_spread(times: Mapping[str, Sequence[float]]) -> tuple[float, int]:
    """(pooled standard deviation of log time within each group, its degrees of freedom)."""
    squares, df = 0.0, 0
    for values in times.values():
        logs = [math.log(v) for v in values]
        if len(logs) >= 2:
            mean = sum(logs) / len(logs)
            squares += sum((x - mean) ** 2 for x in logs)
            df += len(logs) - 1
    return (math.sqrt(squares / df), df) if df else (math.nan, 0)


def time_ratio(slow: Sequence[float], fast: Sequence[float], spread: float, df: int,
               confidence: float) -> tuple[float, tuple[float, float] | None]:
    """The ratio of the geometric means of ``slow``'s and ``fast``'s times, with its t interval on the log
    scale (None without a pooled spread)."""
    log_ratio = sum(math.log(v) for v in slow) / len(slow) - sum(math.log(v) for v in fast) / len(fast)
    if not df:
        return math.exp(log_ratio), None
    half = t_quantile(0.5 + confidence / 2, df) * spread * math.sqrt(1 / len(slow) + 1 / len(fast))
    return math.exp(log_ratio), (math.exp(log_ratio - half), math.exp(log_ratio + half))


@claim("cost_speed", "abstract; D.1 (Table A3)",
       "HN-CLIP trains 2.4x faster than GOAL and 5.4x faster than StructXLIP.",
       "HN-CLIP trains 2.4x faster than GOAL and 5.4x faster than StructXLIP")
def cost_speed(ctx: Context) -> dict:
    reference = ctx.roles["reference"]
    criterion = ("on the main table's train set, at full data: GOAL's training time / HN-CLIP's > 2.4 and "
                 "StructXLIP's / HN-CLIP's > 5.4 (geometric means over the main table's runs and their seeds; training time = "
                 "wall time less the evaluations after each epoch; runs that ran the gradient probe left out), "
                 "each decided by its Student t interval on the log scale, the run-to-run spread pooled over "
                 "every method's seeds")
    runs = [r for r in ctx.costs or [] if not r["probed_steps"] and float(r["fraction"]) == 1.0]
    if not runs:
        return ctx.no_data(criterion, "no unprobed full-data run summaries of the main table")
    times: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        times.setdefault((r["train_set"], r["method"]), []).append(float(r["train_time_s"]))
    spread, df = pooled_log_spread({f"{k[0]}/{k[1]}": v for k, v in times.items()})
    confidence = current_settings().confidence
    margins, bounds, evidence, measures, intervals, missing = [], [], {}, {}, {}, []
    for competitor, paper in PAPER_SPEEDUPS.items():
        label = PAPER_LABELS[competitor]
        pairs = [ts for ts, m in times if m == competitor and (ts, reference) in times]
        if not pairs:
            missing.append(f"{label}: no unprobed run of it and of {ctx.hn_row} on one train set")
            continue
        train_set = pairs[0]
        slow, fast = times[(train_set, competitor)], times[(train_set, reference)]
        ratio, interval = time_ratio(slow, fast, spread, df, confidence)
        margins.append((ratio - paper, False))  # holds when the whole interval reaches past the figure
        bounds.append(None if interval is None else (interval[0] - paper, interval[1] - paper))
        name = f"{label} training time / {PAPER_NAME}'s"  # a measure's name does not follow the label
        measures[name] = round_margin(ratio)
        if interval is not None:
            intervals[name] = [round_margin(interval[0]), round_margin(interval[1])]
        evidence[f"{name} on {train_set} ({len(slow)} vs {len(fast)} runs; paper {paper:g}x)"] = (
            f"{ratio:.2f}x" + ("" if interval is None else f" [{interval[0]:.2f}, {interval[1]:.2f}]"))
    if not margins:
        return ctx.no_data(criterion, "; ".join(missing))
    evidence["run-to-run spread of log training time"] = (f"{spread:.3f} ({df} degrees of freedom)" if df else
                                                          "none: no method was run twice (judged on the ratio)")
    if missing:
        evidence["not compared"] = "; ".join(missing)
    return ctx.verdict(criterion, margins, evidence, measures, bounds=bounds if df else None,
                       unjudged=missing, measure_intervals=intervals,
                       interval_kind="Student t interval on log time")
