"""What every claim shares: the ordered registry, the context a claim is judged in, the verdict logic
(each inequality judged on the paired interval of a :class:`hnclip.analysis.bootstrap.Estimate`) and
access to the tables' cells and rows (found by method key, never by display label)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hnclip.analysis.bootstrap import BootstrapSettings, Estimate, interval, judge, mean_of, resolution
from hnclip.analysis.tables import DIRECTION_LABELS
from hnclip.plan import ABLATION_ROLES, ZEROSHOT_ROW, competitor_key, spec_roles

PAPER_TRANSFER_PAIRS = ("DCI -> DOCCI", "DOCCI -> DCI", "DOCCI -> Long-DCI")
# the paper's name of its method: measure names (which report/published_numbers.yaml quotes) use it,
# so they stay put when the config renames the method's display label
PAPER_NAME = "HN-CLIP"
# the ablation variants' labels in the shipped configs (config/*.yaml experiments.ablation.variants): the
# criterion text's names of a role no variant plays; rows are found by what they train (ablation_rows)
ABLATION_ROWS = {"infonce": "InfoNCE", "hn": "HN only", "token": "token only", "full": "HN + token",
                 "frozen": "HN + token (frozen G)"}
# tables whose rows are config methods, shown by display label: the runs behind a row name its key
METHOD_TABLES = ("main", "epochs", "transfer", "fractions", "seeds")
# the margins' reference in the fractions claim (§3.2 A3 compares with GOAL), by method key
MARGIN_REFERENCE = "goal"
# "against a collapsed row": every inequality holds, but a row it compares with ends at or below the zero-shot
# backbone (:func:`at_or_below_zeroshot`): the margin measures that row's collapse, not the paper's effect
COLLAPSED = "against a collapsed row"
VERDICTS = ("holds", "does not hold", "inconclusive", "no data", COLLAPSED)

# -------------------------------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class Claim:
    """One paper claim: its id, the paper's section and sentence (as paper-summary.txt gives it), a short
    title, and the function that judges it in a :class:`Context`."""

    id: str
    section: str
    quote: str
    title: str
    judge: Callable[[Context], dict]


# id -> claim, in registration order: the section modules' import order, then their definition order
REGISTRY: dict[str, Claim] = {}


def claim(id: str, section: str, quote: str, title: str) -> Callable:
    """Register the decorated function as the judge of claim ``id`` (a second claim of that id is an error)."""
    def register(judge_fn: Callable[[Context], dict]) -> Callable[[Context], dict]:
        if id in REGISTRY:
            raise ValueError(f"claim {id!r} is registered twice")
        REGISTRY[id] = Claim(id, section, quote, title, judge_fn)
        return judge_fn
    return register


def order_registry(modules: Sequence[str]) -> None:
    """Put the registry in the modules' order (definition order within each); a claim registered by
    another module is an error naming it."""
    rank = {m: i for i, m in enumerate(modules)}
    stray = sorted({c.judge.__module__ for c in REGISTRY.values()} - set(rank))
    if stray:
        raise ValueError(f"claims registered outside the known sections: {stray}; known: {list(modules)}")
    ordered = sorted(REGISTRY.values(), key=lambda c: rank[c.judge.__module__])  # stable
    REGISTRY.clear()
    REGISTRY.update((c.id, c) for c in ordered)


@dataclass(frozen=True)
class Context:
    """What a claim is judged on (:func:`hnclip.analysis.claims.evaluate_claims` builds it once): the
    tables and specs by experiment, the rows of the reference method and its frozen-G variant (display
    labels found by method key), the method keys of the specs' roles and every row's key."""

    tables: Mapping[str, pd.DataFrame]
    specs: Mapping[str, Mapping]
    scale: str
    noise: float | None
    hn_row: str
    frozen_row: str
    roles: Mapping[str, str]
    methods: Mapping[str, str]
    records: Sequence[Mapping] | None = None
    premise: Mapping | None = None
    caption_words: Mapping[str, float] | None = None
    dynamics: Mapping[str, pd.DataFrame] | None = None
    costs: Sequence[Mapping] | None = None
    """The main table's runs' training cost (:func:`hnclip.analysis.claims.files.run_costs`): method, seed,
    train set, gamma, fraction, ``train_time_s`` and ``probed_steps``."""
    claim: str = ""
    """The id of the claim being judged (:func:`hnclip.analysis.claims.evaluate_claims` sets it from the
    registration, so a claim's body never repeats its id)."""

    def verdict(self, criterion: str, margins: Sequence[tuple[float, bool]] | None, *args, **kwargs) -> dict:
        """:func:`make_verdict` for the claim being judged, at this context's scale."""
        return make_verdict(self.claim, self.scale, criterion, margins, *args, **kwargs)

    def no_data(self, criterion: str, missing: str) -> dict:
        """The claim being judged has no data: ``missing`` says why."""
        return no_data(self.claim, self.scale, criterion, missing)

# -------------------------------------------------------------------------------------------------- verdicts

def make_verdict(key: str, scale: str, criterion: str, margins: Sequence[tuple[float, bool]] | None,
             evidence: Mapping | None = None, measures: Mapping | None = None, noise: float | None = None,
             missing: str | None = None, coverage: str | None = None, holds: bool | None = None,
             bounds: Sequence[tuple[float, float] | None] | None = None,
             unjudged: Sequence[str] = (), measure_intervals: Mapping | None = None,
             interval_kind: str = "bootstrap interval", collapsed: Iterable[str] = ()) -> dict:
    """One verdict. ``margins``: (value, ties_pass) pairs, each an inequality the claim needs (> 0, or >= 0
    when ``ties_pass``); a value is an :class:`Estimate` (its paired interval decides) or a plain number
    (judged on ``bounds`` where given, else on its value, and said so). ``bounds`` gives intervals computed
    elsewhere (a non-linear statistic's replicates), one per margin or None. ``holds`` overrides the
    margins for a claim decided otherwise (a ranking); ``noise`` (the seed-to-seed R@1 change) is shown only.
    ``unjudged``: conditions the criterion needs that these runs cannot measure, each said in words: each
    counts as undecided (the claim is at best inconclusive) and is listed in the evidence.
    ``measure_intervals``: the intervals of ``measures`` where they have one, in the same shape (a measure
    name -> [low, high], or -> {label: [low, high]}); "Paper vs ours" prints them beside our numbers.
    ``interval_kind``: what ``bounds`` are (a counted share's "Wilson interval", a median's distribution-free
    one), named wherever the interval is shown; an :class:`Estimate`'s own is the "paired bootstrap interval".
    ``collapsed``: the rows the criterion compares with that end at or below the zero-shot backbone
    (:func:`at_or_below_zeroshot`); a claim that would hold reads :data:`COLLAPSED` instead, and the rows are
    named in the evidence whatever the verdict.
    """
    entry = REGISTRY[key]
    section, quote, title = entry.section, entry.quote, entry.title
    evidence = dict(evidence or {})
    settings = _SETTINGS
    if missing is not None:
        holds, margins = None, None
    conditions, unsampled, kinds = _judge_margins(margins, bounds, interval_kind, settings)
    statuses = [c.status for c, _ in conditions] + ["undecided"] * (0 if missing is not None else len(unjudged))
    if unjudged and missing is None:
        evidence["not measurable here (undecided)"] = "; ".join(unjudged)
    verdict, holds = _overall(statuses, holds, missing)
    collapsed = sorted({str(r) for r in collapsed})
    if collapsed and missing is None:
        evidence["compared with rows at or below the zero-shot backbone"] = ", ".join(collapsed)
        if verdict == "holds":
            verdict, holds = COLLAPSED, None
    if unsampled:
        evidence["conditions judged on their value (no per-query outcomes behind them)"] = \
            f"{unsampled} of {len(conditions)}"
    edges = [c for c, _ in conditions if c.edge]
    if edges:
        evidence["on the edge (a bound within its Monte Carlo error of 0 at "
                 f"{max(c.resamples for c in edges):,} resamples: left undecided, its side is the resampling "
                 "seed's)"] = f"{len(edges)} of {len(conditions)}"
    decision = _decision(conditions, kinds, bounds, settings)
    decided = sum(s != "undecided" for s in statuses)
    n_conditions = len(statuses)
    return {"id": key, "section": section, "quote": quote, "claim": title, "criterion": criterion,
            "holds": holds, "verdict": verdict, "evidence": evidence,
            "measures": dict(measures or {}), "measure_intervals": dict(measure_intervals or {}),
            "noise": noise if margins else None, "scale": scale,
            "coverage": coverage, "missing": missing,
            "conditions": [{"margin": round_margin(c.value), "ties_pass": c.ties_pass,
                            "ci_low": round_margin(c.low) if _sampled(m, bounds) else None,
                            "ci_high": round_margin(c.high) if _sampled(m, bounds) else None,
                            "status": c.status, "edge": c.edge, "kind": kind}
                           for (c, m), kind in zip(conditions, kinds, strict=True)],
            "decided": f"{decided} of {n_conditions} conditions decided "
                       f"({statuses.count('met')} met, {statuses.count('failed')} refuted)" if statuses else None,
            "interval": decision, "confidence": settings.confidence, "edge": len(edges)}


def _judge_margins(margins, bounds, interval_kind: str, settings) -> tuple[list, int, list[str]]:
    """(conditions as (judged, margin) pairs, how many were judged on their value alone, each one's interval kind)."""
    conditions, unsampled, kinds = [], 0, []
    for i, (margin, ties) in enumerate(margins or []):
        given = bounds[i] if bounds is not None else None
        kinds.append(interval_kind if given is not None else "paired bootstrap interval")
        if given is None and not (isinstance(margin, Estimate) and margin.has_interval):
            # a measurement with no resampling unit (premise figures), or cells whose records predate
            # per-query outcomes: judged on the value, and shown without an interval
            value = float(margin)
            given = (value, value)
            unsampled += 1
        conditions.append((judge(margin, ties, settings, given), margin))
    return conditions, unsampled, kinds


def _overall(statuses: list[str], holds: bool | None, missing: str | None) -> tuple[str, bool | None]:
    """(verdict, holds) from the conditions' statuses: any refuted fails the claim, any undecided leaves it
    inconclusive; with no condition a given ``holds`` decides, and missing data is "no data"."""
    if missing is not None:
        return "no data", holds
    if holds is not None and not statuses:
        return ("holds" if holds else "does not hold"), holds
    if not statuses:
        return "no data", None
    if "failed" in statuses:
        return "does not hold", False
    if "undecided" in statuses:
        return "inconclusive", None
    return "holds", True


def _decision(conditions: list, kinds: list[str], bounds, settings) -> dict | None:
    """The deciding condition (:func:`_deciding`) with its interval, resolution and interval kind; None if none."""
    deciding = _deciding(conditions)
    if deciding is None:
        return None
    condition, margin = deciding
    kind = kinds[next(i for i, c in enumerate(conditions) if c is deciding)]
    return {"margin": round_margin(condition.value),
            "ci_low": round_margin(condition.low) if _sampled(margin, bounds) else None,
            "ci_high": round_margin(condition.high) if _sampled(margin, bounds) else None,
            "resolution": maybe_round(resolution(margin, settings)) if isinstance(margin, Estimate) else None,
            "status": condition.status, "edge": condition.edge, "kind": kind}

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

def maybe_round(x):
    return None if x is None else round_margin(x)


def interval_of(value, transform=None) -> list[float] | None:
    """The interval of an :class:`Estimate` at the claims' settings as [low, high] (rounded like margins),
    ``transform`` applied to both ends (an error is 100 - R@1: its bounds swap); None without one."""
    bounds = interval(value, _SETTINGS) if isinstance(value, Estimate) else None
    if bounds is None:
        return None
    low, high = (transform(b) for b in bounds) if transform else bounds
    return [round_margin(min(low, high)), round_margin(max(low, high))]

# the interval settings of the claims being evaluated (set by evaluate_claims from the specs' statistics)
_SETTINGS = BootstrapSettings()
# display labels of the reference method's variants (its frozen-G row): not its competitors; set, with
# _SETTINGS, by evaluate_claims and power_notes from the rows' method keys
_VARIANTS: frozenset[str] = frozenset()


def use_settings(settings: BootstrapSettings) -> None:
    """Judge the next claims' intervals with these settings."""
    global _SETTINGS
    _SETTINGS = settings


def use_variants(variants: Iterable[str]) -> None:
    """Treat these rows (display labels) as the reference method's variants, not its competitors."""
    global _VARIANTS
    _VARIANTS = frozenset(variants)


def current_settings() -> BootstrapSettings:
    return _SETTINGS

def no_data(key: str, scale: str, criterion: str, missing: str) -> dict:
    return make_verdict(key, scale, criterion, None, missing=missing)

# ---------------------------------------------------------------------------------------------- table access

def table_groups(table: pd.DataFrame) -> list:
    return list(dict.fromkeys(c[0] for c in table.columns))

def cell_value(table: pd.DataFrame, row, col: tuple) -> Estimate | float:
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

def avg_r1(table: pd.DataFrame, row, group) -> Estimate | float:
    """R@1 averaged over both directions (the paper's "average R@1"); NaN when a cell is absent."""
    values = [cell_value(table, row, (group, d, "R@1")) for d in DIRECTION_LABELS]
    return mean_of(values) if not any(math.isnan(v) for v in values) else math.nan

def rows_of(table: pd.DataFrame) -> list:
    return list(dict.fromkeys(table.index))

def competitors_of(rows: Iterable, hn_row: str) -> list:
    """Rows HN-CLIP competes with: not itself, not its variants (the frozen-G row, by method key), not the
    zero-shot reference row (a backbone before fine-tuning, shown for reference, not a competitor)."""
    return [r for r in rows if r != hn_row and r != ZEROSHOT_ROW and str(r) not in _VARIANTS]

def row_methods(tables: Mapping[str, pd.DataFrame] | None, specs: Mapping[str, Mapping] | None = None
                ) -> dict[str, str]:
    """Display label -> method key of the rows of the per-method tables (:data:`METHOD_TABLES`), read
    from the runs behind them: the specs' cells and each table's ``attrs["runs"]``."""
    methods: dict[str, str] = {}
    for name in METHOD_TABLES:
        for cell in ((specs or {}).get(name) or {}).get("cells", []):
            if not cell.get("zeroshot"):
                methods.setdefault(str(cell["row"]), str(cell["run"]["method"]))
        table = (tables or {}).get(name)
        for (row, _col), runs in (table.attrs.get("runs", {}) if table is not None else {}).items():
            label = row[0] if isinstance(row, tuple) else row
            for run in runs:
                methods.setdefault(str(label), str(run["method"]))
    return methods

def roles_of(specs: Mapping[str, Mapping] | None) -> dict[str, str]:
    """The method keys the specs declare (``roles``: reference, baseline, frozen), else hnclip.plan's."""
    return next((dict(s["roles"]) for s in (specs or {}).values() if s and s.get("roles")), spec_roles())

def label_of(methods: Mapping[str, str], key: str) -> str:
    """The display label of method ``key``'s rows; without one, a name no row of another method has (so
    its claims say "no data" rather than find another method's row by label)."""
    label = next((label for label, m in methods.items() if m == key), None)
    if label is not None:
        return label
    return PAPER_NAME if PAPER_NAME not in methods else f"{PAPER_NAME} ({key})"

def ablation_rows(spec: Mapping | None) -> dict[str, str | None]:
    """Role (:data:`hnclip.plan.ABLATION_ROLES`) -> the ablation's row (display label) of the variant
    that trains it (method key, and whether gamma > 0); None where no variant does."""
    rows: dict[str, str | None] = dict.fromkeys(ABLATION_ROLES)
    for cell in (spec or {}).get("cells", []):
        trains = (cell["run"]["method"], float(cell["run"]["gamma"]) > 0)
        for role, wanted in ABLATION_ROLES.items():
            if rows[role] is None and trains == wanted:
                rows[role] = cell["row"]
    return rows

def role_names(rows: Mapping[str, str | None]) -> dict[str, str]:
    """Each ablation role's name in the criterion text: its row, else the shipped configs' label."""
    return {role: label or ABLATION_ROWS[role] for role, label in rows.items()}

def round_margin(x: float) -> float:
    return round(float(x), 2)

def direction_word(d: str) -> str:
    return d.replace("->", "→")

def docci_group(groups: Sequence, scale: str) -> tuple[object, str]:
    """DOCCI's group, or at toy scale the first benchmark standing in for it."""
    if "DOCCI" in groups:
        return "DOCCI", "DOCCI"
    if not groups:
        return None, ""
    return groups[0], f"{groups[0]} (standing in for DOCCI at {scale} scale)"

def in_domain_groups(spec: Mapping | None, table: pd.DataFrame | None = None) -> list:
    """Groups of an experiment whose runs are tested on their own training distribution: the run's train
    set is itself one of the experiment's evaluated benchmarks (DOCCI, DCI and Long-DCI, whose runs train
    on DOCCI; not Urban-1K, whose runs train on VG paragraphs). Without a spec: every group of the table."""
    if not spec:
        return table_groups(table) if table is not None else []
    evaluated = {c["eval_benchmark"] for c in spec["cells"]}
    groups = []
    for cell in spec["cells"]:
        if cell.get("zeroshot") or cell["group"] in groups:
            continue
        if cell["run"]["train_set"] in evaluated:
            groups.append(cell["group"])
    return groups

# ------------------------------------------------------------------------------------------------ seed noise

def seed_noise(seeds_table: pd.DataFrame | None) -> float | None:
    """Largest change of R@1 (mean of directions) between seeds of one method on one benchmark."""
    if seeds_table is None or seeds_table.empty:
        return None
    spreads = []
    for row in seeds_table.index:
        for g in table_groups(seeds_table):
            per_seed = {}
            for col in seeds_table.columns:
                if col[0] == g and col[2] == "R@1" and str(col[3]).startswith("s") and col[-1] == "mean" \
                        and str(col[3])[1:].isdigit():
                    per_seed.setdefault(col[3], []).append(float(seeds_table.loc[row, col]))
            means = [np.mean(v) for v in per_seed.values() if not any(math.isnan(x) for x in v)]
            if len(means) >= 2:
                spreads.append(max(means) - min(means))
    return float(max(spreads)) if spreads else None

def seed_columns(table: pd.DataFrame) -> list[str]:
    return sorted({str(c[3]) for c in table.columns if str(c[3]).startswith("s") and str(c[3])[1:].isdigit()},
                  key=lambda s: int(s[1:]))

# ------------------------------------------------------------------------------ the competitor and collapse

def competitor_row(ctx: Context, rows: Iterable) -> str | None:
    """The display label of :func:`competitor_key`'s rows if ``rows`` holds it, else None."""
    label = label_of(ctx.methods, competitor_key(ctx.roles))
    return label if label in {str(r) for r in rows} else None


def zeroshot_avg_r1(ctx: Context, group) -> Estimate | float:
    """The zero-shot backbone's average R@1 on ``group`` (its row in the main, fractions or transfer table)."""
    for name in ("main", "fractions", "transfer"):
        table = ctx.tables.get(name)
        if table is None or group not in table_groups(table):
            continue
        row = next((r for r in table.index if (r[0] if isinstance(r, tuple) else r) == ZEROSHOT_ROW), None)
        if row is not None:
            return avg_r1(table, row, group)
    return math.nan


def at_or_below_zeroshot(ctx: Context, value, group) -> bool | None:
    """Whether a row's average R@1 ``value`` on ``group`` ends at or below the zero-shot backbone's: the
    interval of (row - zero-shot) does not lie above 0 (below it, or straddling it: a fine-tune that does not
    resolve a gain over its own start). None when the table has no zero-shot row there."""
    zeroshot = zeroshot_avg_r1(ctx, group)
    if isinstance(value, float) and math.isnan(value) or isinstance(zeroshot, float) and math.isnan(zeroshot):
        return None
    difference = value - zeroshot
    bounds = interval(difference, _SETTINGS) if isinstance(difference, Estimate) else None
    low = float(difference) if bounds is None else bounds[0]
    return not low > 0


def collapsed_baselines(ctx: Context) -> dict[str, dict]:
    """The main table's baselines that end at or below the zero-shot backbone on some benchmark
    (:func:`at_or_below_zeroshot`): label -> {benchmark: [row - zero-shot, low, high]}."""
    main = ctx.tables.get("main")
    out: dict[str, dict] = {}
    if main is None:
        return out
    for group in table_groups(main):
        zeroshot = zeroshot_avg_r1(ctx, group)
        if isinstance(zeroshot, float) and math.isnan(zeroshot):
            continue
        for row in competitors_of(rows_of(main), ctx.hn_row):
            value = avg_r1(main, row, group)
            if at_or_below_zeroshot(ctx, value, group):
                difference = value - zeroshot
                bounds = interval_of(difference) or [round_margin(difference)] * 2
                out.setdefault(str(row), {})[str(group)] = [round_margin(difference), *bounds]
    return out


def without_collapsed(ctx: Context, verdict: dict, criterion: str, kept: Sequence[tuple], left_out: Iterable[str]
                      ) -> dict:
    """Add to a counting claim's ``verdict`` what it reads with the collapsed baselines left out
    (:func:`collapsed_baselines`): ``kept``, its margins recomputed without them; ``left_out``, their labels.
    Sets ``verdict["without_collapsed"]`` ({left_out, verdict, conditions}) and says it in the evidence."""
    left_out = sorted({str(r) for r in left_out})
    if not left_out or verdict.get("missing") is not None:
        verdict["without_collapsed"] = {"left_out": [], "verdict": None, "conditions": None}
        return verdict
    reading = make_verdict(ctx.claim, ctx.scale, criterion, kept)["verdict"] if kept else "no data"
    verdict["without_collapsed"] = {"left_out": left_out, "verdict": reading, "conditions": len(kept)}
    verdict["evidence"][f"with {', '.join(left_out)} left out (at or below the zero-shot backbone)"] = \
        f"{reading} ({len(kept)} conditions)"
    return verdict
