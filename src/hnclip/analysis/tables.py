"""The paper's tables as DataFrames: one layout per experiment, plus per-epoch retrieval and training cost.

Every table has the same shape so one writer (:mod:`hnclip.analysis.table_format`) and the claims can read
them all: row index = the experiment's rows (method, framework, variant ...), column MultiIndex = the
header levels (group, direction, metric, ...) plus a last level ``stat`` in {mean, std, n}. Seeds of one
cell (same row, group, variant and x) are aggregated to mean and sample std (ddof = 1, NaN for one seed);
the seeds experiment instead shows each seed. ``df.attrs`` carries what the writer needs: experiment,
scale, which columns rank lower-is-better or not at all, decimals, and ``runs``: for each (row, column)
the runs behind the number (run fields, seed and the config hash of the run's summary.json), which the
tidy CSV writes on every line so a cell reaches its runs in one hop.

A cell whose evaluation record is missing raises :class:`MissingRecordError` naming the run; a cell the
spec never asked for (a method not run on some group) stays NaN and is printed as a dash.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hnclip import paths
from hnclip.analysis.bootstrap import (
    BootstrapSettings,
    Estimate,
    Samples,
    interval,
    outcomes_of,
    settings_from_config,
)
from hnclip.analysis.records import (
    DIRECTIONS,
    RUN_FIELDS,
    MissingRecordError,
    cell_summaries,
    index_records,
    load_benchmark_tsv,
    load_epoch_outcomes,
    load_epochs,
    load_protocol_spec,
    load_spec,
    load_summary,
    record_key,
    run_name,
    summary_config_hash,
)
from hnclip.analysis.table_format import write_table
from hnclip.plan import REFERENCE_METHOD, epoch_cells

__all__ = ["build_convergence_table", "build_cost_table", "build_epochs_table", "build_protocols_table",
           "build_table", "epoch_cells", "epoch_infonce", "load_protocol_records", "load_protocol_summaries",
           "write_table", "STAT"]

# ci_low / ci_high: the percentile bootstrap interval (hnclip.analysis.bootstrap) over test images and
# seeds; NaN where the cell's per-query outcomes are unknown (cost columns, records made before ranks)
STAT = ("mean", "std", "n", "ci_low", "ci_high")
DIRECTION_LABELS = tuple(DIRECTIONS.values())
ALL_KS = (1, 5, 10)
VARIANTS = ("plain", "+HN")
DELTA = "Δ"


@dataclass
class _Grid:
    """Per-seed values of every (row, column) cell before aggregation."""

    row_names: tuple[str, ...]
    col_names: tuple[str, ...]
    values: dict[tuple, dict[tuple, list[float]]] = field(default_factory=dict)
    columns: list[tuple] = field(default_factory=list)
    lower_is_better: set[tuple] = field(default_factory=set)
    unranked: set[tuple] = field(default_factory=set)
    decimals: dict[tuple, int | None] = field(default_factory=dict)
    runs: dict[tuple, list[dict]] = field(default_factory=dict)
    estimates: dict[tuple, Estimate] = field(default_factory=dict)
    settings: BootstrapSettings = field(default_factory=BootstrapSettings)

    def add(self, row: tuple, col: tuple, values: Iterable[float], runs: Iterable[Mapping] = (),
            estimate: Estimate | None = None) -> None:
        """``estimate``: the cell's number as a bootstrap estimate (its interval, and what claims pair)."""
        self.values.setdefault(row, {}).setdefault(col, []).extend(values)
        if estimate is not None:
            self.estimates[(row, col)] = estimate
        behind = self.runs.setdefault((row, col), [])
        behind.extend(dict(r) for r in runs if dict(r) not in behind)
        if col not in self.columns:
            self.columns.append(col)


def _aggregate(values: list[float], estimate: Estimate | None, settings: BootstrapSettings) -> tuple:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return math.nan, math.nan, 0, math.nan, math.nan
    std = float(arr.std(ddof=1)) if arr.size > 1 else math.nan
    bounds = interval(estimate, settings) if estimate is not None else None
    low, high = bounds if bounds is not None else (math.nan, math.nan)
    return float(arr.mean()), std, int(arr.size), low, high


def _to_frame(grid: _Grid, experiment: str, scale: str | None, column_order: list[tuple] | None = None) -> pd.DataFrame:
    columns = column_order if column_order is not None else grid.columns
    rows = list(grid.values)
    data = []
    for row in rows:
        line = []
        for col in columns:
            line.extend(_aggregate(grid.values[row].get(col, []), grid.estimates.get((row, col)), grid.settings))
        data.append(line)
    col_index = pd.MultiIndex.from_tuples([c + (s,) for c in columns for s in STAT],
                                          names=list(grid.col_names) + ["stat"])
    if len(grid.row_names) == 1:
        row_index = pd.Index([r[0] for r in rows], name=grid.row_names[0])
    else:
        row_index = pd.MultiIndex.from_tuples(rows, names=list(grid.row_names))
    df = pd.DataFrame(data, index=row_index, columns=col_index, dtype=np.float64)
    df.attrs.update(
        experiment=experiment,
        scale=scale,
        lower_is_better=[c for c in columns if c in grid.lower_is_better],
        unranked=[c for c in columns if c in grid.unranked],
        decimals={c: grid.decimals[c] for c in columns if c in grid.decimals},
        runs={key: runs for key, runs in grid.runs.items() if key[1] in columns and runs},
        # (row tuple, column) -> Estimate: the claims' paired intervals resample these
        estimates={key: e for key, e in grid.estimates.items() if key[1] in columns},
        statistics=grid.settings,
    )
    return df


def _run_of(run: Mapping, config_hash: str = "") -> dict:
    """The keys of one run as a table line carries them: its wildcards and its summary's config hash."""
    key = dict(zip(("train_set", "method", "gamma", "fraction", "seed"), record_key(run, "")[:5], strict=True))
    return {**key, "config_hash": config_hash}


def _config_hash(cell: Mapping, summaries: Mapping | None) -> str:
    if not summaries or not cell.get("run_dir"):
        return ""
    summary = summaries.get(str(cell["run_dir"]))
    return summary_config_hash(summary) if summary is not None else ""


# ------------------------------------------------------------------------------------ retrieval tables
def _metric(direction: str, k: int) -> str:
    prefix = {v: p for p, v in DIRECTIONS.items()}[direction]
    return f"{prefix}_r{k}"


def _cell_seeds(spec: dict, index: dict, summaries: Mapping | None = None
                ) -> tuple[dict[tuple, list[tuple[str, dict]]], dict[tuple, list[dict]], dict[tuple, list]]:
    """Cells grouped by (row, group, variant, x): each group's (seed, metrics) in spec order, the runs
    behind each group (see :func:`_run_of`), and each group's (seed, per-query outcomes or None)."""
    grouped: dict[tuple, list[tuple[str, dict]]] = {}
    runs: dict[tuple, list[dict]] = {}
    outcomes: dict[tuple, list] = {}
    for cell in spec["cells"]:
        run, bench = cell["run"], cell["eval_benchmark"]
        record = index.get(record_key(run, bench))
        if record is None:
            expected = f" (expected {cell['eval_path']})" if cell.get("eval_path") else ""
            raise MissingRecordError(
                f"{spec['experiment']} table: no evaluation record for run {run_name(run, bench)}{expected}")
        key = (cell["row"], cell["group"], cell.get("variant"), cell.get("x"))
        seed = record_key(run, bench)[4]
        seeds = grouped.setdefault(key, [])
        if any(s == seed for s, _ in seeds):
            raise ValueError(f"{spec['experiment']} spec: two cells for row {cell['row']!r}, group "
                             f"{cell['group']!r}, variant {cell.get('variant')!r}, x {cell.get('x')!r}, seed {seed}")
        seeds.append((seed, record["metrics"]))
        outcomes.setdefault(key, []).append((seed, outcomes_of(record)))
        behind = runs.setdefault(key, [])
        # the backbone before fine-tuning and a released checkpoint: no run of ours behind their rows
        if not cell.get("zeroshot") and not cell.get("released"):
            behind.append(_run_of(run, _config_hash(cell, summaries)))
    return grouped, runs, outcomes


def _estimate(pairs: list, metric: str, values: list[float]) -> Estimate:
    """A cell's seed-averaged metric as an estimate over its seeds' outcomes (no interval if any lacks them)."""
    return Estimate.of(Samples.from_pairs(pairs), metric, float(np.mean(values)) if values else math.nan)


def _unique(items: Iterable) -> list:
    return list(dict.fromkeys(items))


def _x_of(cell_key: tuple, cell_runs: dict, field_name: str) -> float:
    x = cell_key[3]
    return float(x) if x is not None else float(cell_runs[cell_key][field_name])


def build_table(spec, records, summaries: Mapping | None = None,
                settings: BootstrapSettings | None = None) -> pd.DataFrame:
    """The table of one experiment from its spec and its evaluation records (list, or mapping path -> record).

    ``summaries`` (run_dir -> summary.json content, see :func:`hnclip.analysis.records.load_run_summaries`)
    gives each cell's runs their config hash; without it the hash is left empty. ``settings``: how the
    cells' intervals are drawn (the config's ``statistics``).
    """
    spec = load_spec(spec)
    settings = settings or settings_from_config(spec)
    grouped, behind, outcomes = _cell_seeds(spec, index_records(records), summaries)
    experiment = spec["experiment"]
    groups = _unique(key[1] for key in grouped)
    group_level = experiment if experiment in ("transfer", "retention") else "group"
    # retention: short-caption retrieval is reported at R@1/5/10 both ways, as the long-caption papers do; the
    # released checkpoints beside the main table's rows, in its layout
    ks = ALL_KS if experiment in ("main", "ablation", "retention", "released") else (1,)

    def retrieval_columns() -> list[tuple]:
        return [(g, d, f"R@{k}") for g in groups for d in DIRECTION_LABELS for k in ks]

    if experiment in ("main", "transfer", "ablation", "retention", "released"):
        row_name = "variant" if experiment == "ablation" else "method"
        grid = _Grid((row_name,), (group_level, "direction", "metric"), settings=settings)
        for key, seeds in grouped.items():
            row, group = key[:2]
            for d in DIRECTION_LABELS:
                for k in ks:
                    values = [m[_metric(d, k)] for _, m in seeds]
                    grid.add((row,), (group, d, f"R@{k}"), values, behind[key],
                             _estimate(outcomes[key], _metric(d, k), values))
        return _to_frame(grid, experiment, spec["scale"], retrieval_columns())

    if experiment in ("fractions", "gamma_sweep"):
        # x is the swept value; the spec sets it, else it is read from the run itself
        runs = {(c["row"], c["group"], c.get("variant"), c.get("x")): c["run"] for c in spec["cells"]}
        field_name = "fraction" if experiment == "fractions" else "gamma"
        methods = _unique(key[0] for key in grouped)

        def row_of(key: tuple) -> tuple:
            x = _x_of(key, runs, field_name)
            return (key[0], x) if experiment == "fractions" else (x,)

        def order(item) -> tuple:
            row = row_of(item[0])
            return (methods.index(row[0]), row[1]) if experiment == "fractions" else row

        row_names = ("method", "fraction") if experiment == "fractions" else ("gamma",)
        grid = _Grid(row_names, ("group", "direction", "metric"), settings=settings)
        for key, seeds in sorted(grouped.items(), key=order):
            for d in DIRECTION_LABELS:
                values = [m[_metric(d, 1)] for _, m in seeds]
                grid.add(row_of(key), (key[1], d, "R@1"), values, behind[key],
                         _estimate(outcomes[key], _metric(d, 1), values))
        return _to_frame(grid, experiment, spec["scale"], retrieval_columns())

    if experiment == "plugin":
        return _plugin_table(spec, grouped, groups, behind, outcomes, settings)
    if experiment == "seeds":
        return _seeds_table(spec, grouped, groups, behind, outcomes, settings)
    raise ValueError(f"no table layout for experiment {experiment!r}")


def _plugin_table(spec: dict, grouped: dict, groups: list, behind: dict, outcomes: dict,
                  settings: BootstrapSettings) -> pd.DataFrame:
    """Frameworks x (group, direction, R@1, {plain, +HN, Δ}); Δ is paired by seed when both sides share seeds,
    and its interval is the paired bootstrap of +HN minus plain on the same resampled test images."""
    grid = _Grid(("framework",), ("group", "direction", "metric", "variant"), settings=settings)
    frameworks = _unique(key[0] for key in grouped)
    for fw in frameworks:
        for g in groups:
            sides, side_runs, side_outcomes = {}, {}, {}
            for variant in VARIANTS:
                key = (fw, g, variant, None)
                if key not in grouped:
                    key = next((k for k in grouped if k[:3] == (fw, g, variant)), None)
                sides[variant] = grouped.get(key)
                side_runs[variant] = behind.get(key, [])
                side_outcomes[variant] = outcomes.get(key, [])
            for d in DIRECTION_LABELS:
                m = _metric(d, 1)
                estimates = {}
                for variant, seeds in sides.items():
                    if seeds is not None:
                        values = [v[m] for _, v in seeds]
                        estimates[variant] = _estimate(side_outcomes[variant], m, values)
                        grid.add((fw,), (g, d, "R@1", variant), values, side_runs[variant], estimates[variant])
                plain, hn = sides["plain"], sides["+HN"]
                if plain is None or hn is None:
                    continue
                plain_by_seed, hn_by_seed = dict(plain), dict(hn)
                if set(plain_by_seed) == set(hn_by_seed):
                    deltas = [hn_by_seed[s][m] - plain_by_seed[s][m] for s in plain_by_seed]
                else:  # unpaired: difference of means, no spread
                    deltas = [np.mean([v[m] for _, v in hn]) - np.mean([v[m] for _, v in plain])]
                grid.add((fw,), (g, d, "R@1", DELTA), deltas, side_runs["plain"] + side_runs["+HN"],
                         estimates["+HN"] - estimates["plain"])
    bad = [k for k in grouped if k[2] not in VARIANTS]
    if bad:
        raise ValueError(f"plugin spec: cell {bad[0]} has variant {bad[0][2]!r}; expected one of {VARIANTS}")
    order = [(g, d, "R@1", v) for g in groups for d in DIRECTION_LABELS for v in (*VARIANTS, DELTA)]
    return _to_frame(grid, "plugin", spec["scale"], [c for c in order if c in grid.columns])


def _seeds_table(spec: dict, grouped: dict, groups: list, behind: dict, outcomes: dict,
                 settings: BootstrapSettings) -> pd.DataFrame:
    """Methods x (group, direction, R@1, {each seed, difference}): replication, so seeds are not averaged.
    A two-seed difference's interval is paired on the same resampled test images (max − min over more
    seeds is not linear: no interval)."""
    grid = _Grid(("method",), ("group", "direction", "metric", "seed"), settings=settings)
    seeds_all = sorted(_unique(s for seeds in grouped.values() for s, _ in seeds), key=_seed_order)
    spread = (f"s{seeds_all[1]}−s{seeds_all[0]}" if len(seeds_all) == 2 else "max−min")
    for key, seeds in grouped.items():
        row, group = key[:2]
        runs_by_seed = {r["seed"]: r for r in behind[key]}
        for d in DIRECTION_LABELS:
            m = _metric(d, 1)
            by_seed = dict(seeds)
            outcome_of = dict(outcomes[key])
            per_seed = {s: _estimate([(s, outcome_of[s])], m, [by_seed[s][m]]) for s in seeds_all if s in by_seed}
            for s in seeds_all:
                if s in by_seed:
                    grid.add((row,), (group, d, "R@1", f"s{s}"), [by_seed[s][m]], [runs_by_seed[s]], per_seed[s])
            if len(by_seed) >= 2:
                vals = [by_seed[s][m] for s in seeds_all if s in by_seed]
                diff = vals[1] - vals[0] if len(seeds_all) == 2 else max(vals) - min(vals)
                col = (group, d, "R@1", spread)
                pair = per_seed[seeds_all[1]] - per_seed[seeds_all[0]] if len(seeds_all) == 2 else None
                grid.add((row,), col, [diff], behind[key], pair)
                grid.unranked.add(col)
    order = [(g, d, "R@1", s) for g in groups for d in DIRECTION_LABELS for s in [f"s{x}" for x in seeds_all] + [spread]]
    return _to_frame(grid, "seeds", spec["scale"], [c for c in order if c in grid.columns])


def _seed_order(seed: str):
    try:
        return (0, float(seed))
    except ValueError:
        return (1, seed)


# ----------------------------------------------------------------------------------------- per epoch
def build_epochs_table(spec, summaries: Mapping | None = None,
                       settings: BootstrapSettings | None = None) -> pd.DataFrame:
    """Retrieval after each epoch (epochs.csv) of the spec's runs: rows (method, benchmark, epoch).

    Several runs of one (method, benchmark), i.e. seeds, are aggregated per epoch; ``summaries`` as in
    :func:`build_table`. The zero-shot row has no epochs; each cell reads its run's rows of its own benchmark
    (a DOCCI run logs DOCCI and Long-DCI), and a cell whose run does not log its benchmark after each epoch
    (its ``epochs_benchmark`` another's) is left out, not mislabelled.
    """
    spec = load_spec(spec)
    grid = _Grid(("method", "benchmark", "epoch"), ("direction", "metric"),
                 settings=settings or settings_from_config(spec))
    seen = set()
    per_run: dict[tuple, list[pd.DataFrame]] = {}
    per_run_outcomes: dict[tuple, list[tuple[str, dict]]] = {}
    behind: dict[tuple, list[dict]] = {}
    for cell in epoch_cells(spec):
        run_dir = cell["run_dir"]
        if (cell["row"], cell["group"], run_dir) in seen:
            continue
        seen.add((cell["row"], cell["group"], run_dir))
        bench = cell["eval_benchmark"]
        per_run.setdefault((cell["row"], cell["group"]), []).append(load_epochs(run_dir, bench))
        seed = record_key(cell["run"], "")[4]
        per_run_outcomes.setdefault((cell["row"], cell["group"]), []).append(
            (seed, load_epoch_outcomes(run_dir, f"{bench}/test", bench)))
        behind.setdefault((cell["row"], cell["group"]), []).append(_run_of(cell["run"], _config_hash(cell, summaries)))
    for (row, group), frames in per_run.items():
        epochs = sorted(set().union(*(set(f["epoch"].astype(int)) for f in frames)))
        for epoch in epochs:
            for d in DIRECTION_LABELS:
                for k in ALL_KS:
                    m = _metric(d, k)
                    vals = [float(f.loc[f["epoch"].astype(int) == epoch, m].iloc[-1]) for f in frames
                            if (f["epoch"].astype(int) == epoch).any()]
                    pairs = [(seed, by_epoch.get(epoch)) for seed, by_epoch in per_run_outcomes[(row, group)]]
                    estimate = _estimate(pairs, m, vals) if len(pairs) == len(vals) else None
                    grid.add((row, group, epoch), (d, f"R@{k}"), vals, behind[(row, group)], estimate)
    return _to_frame(grid, "epochs", spec["scale"], [(d, f"R@{k}") for d in DIRECTION_LABELS for k in ALL_KS])


# ------------------------------------------------------------------------------------------------ cost
_RUN_PATH = re.compile(r"([^/]+)/([^/]+)/g([^/]+)/f([^/]+)/s([^/]+?)(?:\.tsv)?$")


def _run_parts(path: str) -> tuple[str, ...] | None:
    """(train_set, method, gamma, fraction, seed) from the tail of a run folder or benchmark file path."""
    match = _RUN_PATH.search(Path(path).as_posix().rstrip("/"))
    return match.groups() if match else None


def _cost_order(parts: tuple[str, ...]) -> tuple:
    """Runs grouped by train set and method, then by gamma and fraction as numbers ('0.25' < '1')."""
    def number(text):
        try:
            return (0, float(text), "")
        except ValueError:
            return (1, 0.0, text)
    return tuple(number(p) if i >= 2 else (0, 0.0, p) for i, p in enumerate(parts))


def _run_path(parts: tuple[str, ...]) -> str:
    return paths.run_path(*parts)


def _on_gpu(summary: Mapping) -> bool:
    # ``device_type`` is "cuda"/"cpu"; ``device`` holds the GPU's name (e.g. "NVIDIA H200") or "cpu"
    kind = summary.get("device_type")
    if kind is not None:
        return kind == "cuda"
    device = str(summary.get("device", "cpu"))
    return device != "cpu" and not device.startswith("cpu")


def _n_gpus(summary: Mapping) -> int:
    """GPUs a run used: world size when it says so, else one if it ran on CUDA, zero on CPU."""
    config = summary.get("config") or {}
    for source in (summary, config):
        for key in ("world_size", "n_gpus", "gpus"):
            if isinstance(source.get(key), int) and not isinstance(source.get(key), bool):
                return source[key] if _on_gpu(summary) else 0
    return 1 if _on_gpu(summary) else 0


def _training_hours(summary: Mapping) -> float:
    """A run's training time in hours: its wall time less what the gradient probe added and the evaluations
    after each epoch took (``summary["timing"]["train_time_s"]``, :func:`hnclip.train.step_timing`); the wall
    time for a summary written before it was recorded."""
    timing = summary.get("timing") or {}
    seconds = timing.get("train_time_s")
    return float(seconds if seconds is not None else summary["wall_time_s"]) / 3600.0


def _preprocess_parts(path) -> tuple[str, str] | None:
    """(product, benchmark) of a preprocessing job's Snakemake benchmark file ``.../<product>/<benchmark>.tsv``."""
    path = Path(path)
    return (path.parent.name, path.stem) if path.suffix == ".tsv" else None


def _products(summary: Mapping) -> tuple[str, ...]:
    """The cached preprocessing products the run's framework trains on (GOAL: segments; StructXLIP: and
    edges), from the torch-free framework registry."""
    from hnclip.frameworks import registry

    framework = summary.get("framework") or (summary.get("config") or {}).get("framework")
    try:
        return tuple(registry.framework_entry(framework).products) if framework else ()
    except (KeyError, ValueError):
        return ()


def build_cost_table(summaries: Iterable, benchmarks: Iterable = (), scale: str | None = None, *,
                     reference_gamma: float, reference_method: str = REFERENCE_METHOD,
                     preprocess: Iterable = ()) -> pd.DataFrame:
    """Training cost per run setting (seeds aggregated) from summary.json and Snakemake benchmark TSVs.

    ``summaries``: summary.json paths, run folders or already loaded summary dicts (with ``run_dir``).
    ``benchmarks``: Snakemake benchmark TSVs of the train rule, matched to runs by their
    ``train_set/method/g*/f*/s*`` tail. Accelerator time is GPU-hours (wall time x GPUs) when any run used
    a GPU and CPU-hours (wall time of the single process) when all ran on CPU.

    The paper's speed-ups (HN-CLIP trains 2.4x faster than GOAL, 5.4x than StructXLIP) compare training
    time at one budget. "training time (h)" is a run's wall time less what the gradient probe added and the
    evaluations after each epoch took (:func:`_training_hours`): the runs the report's figures read probe,
    others do not, and that is no cost of the method. "time vs reference" divides it by that of
    ``reference_method`` (:data:`hnclip.plan.REFERENCE_METHOD`) at ``reference_gamma`` (the config's
    ``gamma``: ``hnclip table-cost --gamma``) on the same train set and fraction; "time vs reference with
    preprocessing" adds to the run's own the preprocessing jobs its framework needs on its train set
    (``preprocess``: their Snakemake benchmark TSVs, ``.../segments/<benchmark>.tsv``,
    ``.../edges/<benchmark>.tsv``; GOAL's SAM segments, StructXLIP's and its edge maps), each counted whole,
    as for a run that needs them made.
    """
    loaded = [s if isinstance(s, Mapping) else load_summary(s) for s in summaries]
    loaded.sort(key=lambda s: _cost_order(_run_parts(str(s.get("run_dir", ""))) or (str(s.get("run_dir")),)))
    if not loaded:
        raise ValueError("cost table: no run summaries given")
    tsv = {}
    for path in benchmarks:
        parts = _run_parts(str(path))
        if parts is None:
            raise ValueError(f"cost table: cannot tell the run of benchmark file {path} "
                             "(expected .../train_set/method/g*/f*/s*.tsv)")
        tsv[parts] = load_benchmark_tsv(path)
    made = {}
    for path in preprocess:
        parts = _preprocess_parts(path)
        if parts is None:
            raise ValueError(f"cost table: cannot tell the product of preprocessing benchmark file {path} "
                             "(expected .../<product>/<benchmark>.tsv)")
        made[parts] = load_benchmark_tsv(path)["s"] / 3600.0
    any_gpu = any(_n_gpus(s) > 0 for s in loaded)
    accel = "GPU-hours" if any_gpu else "CPU-hours"
    grid = _Grid(("train_set", "method", "gamma", "fraction"), ("quantity",))
    train_by_row: dict[tuple, list[float]] = {}
    products_by_row: dict[tuple, tuple[str, ...]] = {}
    runs_by_row: dict[tuple, list[dict]] = {}
    for summary in loaded:
        parts = _run_parts(str(summary.get("run_dir", "")))
        if parts is None:
            raise ValueError(f"cost table: summary of run folder {summary.get('run_dir')!r} is not under "
                             ".../train_set/method/g*/f*/s*")
        row = parts[:4]
        run = [_run_of(dict(zip(RUN_FIELDS, parts, strict=True)), summary_config_hash(summary))]
        runs_by_row.setdefault(row, []).extend(run)
        wall_h = float(summary["wall_time_s"]) / 3600.0
        train_by_row.setdefault(row, []).append(_training_hours(summary))
        products_by_row[row] = _products(summary)
        grid.add(row, ("wall time (h)",), [wall_h], run)
        grid.add(row, ("training time (h)",), [_training_hours(summary)], run)
        grid.add(row, ("samples/s",), [float(summary["samples_per_s"])], run)
        grid.add(row, (accel,), [wall_h * _n_gpus(summary) if any_gpu else wall_h], run)
        grid.add(row, ("peak memory (MB)",), [float(summary["peak_memory_mb"])], run)
        bench = tsv.get(parts)
        if benchmarks and bench is None:
            raise ValueError(f"cost table: no Snakemake benchmark file for run {_run_path(parts)}")
        if bench is not None:
            grid.add(row, ("max RSS (MB)",), [bench["max_rss"]], run)
            grid.add(row, ("CPU time (h)",), [bench["cpu_time"] / 3600.0], run)
    ratio_col = (f"time vs {reference_method}",)
    with_col = (f"time vs {reference_method} with preprocessing",)
    for row, hours in train_by_row.items():
        ref_row = (row[0], reference_method, f"{float(reference_gamma):g}", row[3])
        ref = train_by_row.get(ref_row)
        if ref is None:
            continue
        behind = runs_by_row[row] + runs_by_row[ref_row]
        own, reference = float(np.mean(hours)), float(np.mean(ref))
        grid.add(row, ratio_col, [own / reference], behind)
        needed = products_by_row[row]
        if needed and preprocess:
            missing = [p for p in needed if (p, row[0]) not in made]
            if missing:
                raise ValueError(f"cost table: no preprocessing benchmark file for {', '.join(missing)} of "
                                 f"{row[0]} (run {row[1]})")
            grid.add(row, with_col, [(own + sum(made[(p, row[0])] for p in needed)) / reference], behind)
    grid.lower_is_better = {c for c in grid.columns if c != ("samples/s",)}
    grid.unranked = {ratio_col, with_col}
    grid.decimals = {c: None for c in grid.columns}  # adaptive: toy runs last minutes, paper runs days
    if scale is None:
        scales = {(s.get("config") or {}).get("scale") for s in loaded} - {None}
        scale = scales.pop() if len(scales) == 1 else None
    return _to_frame(grid, "cost", scale)


# ------------------------------------------------------------------------------------------ protocols
PROTOCOL_KS = (1, 5, 10, 25, 50)  # the paper's R@1/5/10 and GOAL's R@1/5/25/50, from one ranking
COUNT_COLUMNS = (("pairs", "images"), ("pairs", "captions"))
def load_protocol_summaries(spec: Mapping) -> dict[str, dict]:
    """summary.json of every fine-tuned model the protocol spec scores, keyed by its ``run_dir`` (the
    zero-shot backbone has none): the table's lines carry their config hashes."""
    return cell_summaries(spec["cells"])


def load_protocol_records(spec: Mapping) -> dict[str, dict]:
    """The protocol spec's evaluation records by path; a missing one raises naming the model and split."""
    from hnclip.analysis.records import load_eval

    records = {}
    for cell in spec["cells"]:
        path = cell["eval_path"]
        if path in records:
            continue
        if not Path(path).is_file():
            raise MissingRecordError(f"protocols table: no evaluation of {cell['row']!r} on {cell['benchmark']!r} "
                                     f"split {cell['split']!r} (expected {path})")
        records[path] = load_eval(path)
    return records


def build_protocols_table(spec, records: Mapping[str, Mapping] | None = None,
                          summaries: Mapping | None = None, settings: BootstrapSettings | None = None) -> pd.DataFrame:
    """Rows (benchmark, split, method): Recall@K at the paper's and GOAL's cut-offs, and the pairs scored.

    ``records`` maps each cell's ``eval_path`` to its record (default: read from disk). A record lacking
    R@25/R@50 (made before they were recorded) shows a dash there rather than a guess. ``summaries`` as in
    :func:`build_table` (see :func:`load_protocol_summaries`); the zero-shot row has no run behind it.
    """
    spec = load_protocol_spec(spec)
    records = load_protocol_records(spec) if records is None else records
    grid = _Grid(("benchmark", "split", "method"), ("direction", "metric"),
                 settings=settings or settings_from_config(spec))
    for cell in spec["cells"]:
        record = records.get(cell["eval_path"])
        if record is None:
            raise MissingRecordError(f"protocols table: no record {cell['eval_path']} ({cell['row']!r}, "
                                     f"{cell['benchmark']!r}, split {cell['split']!r})")
        row = (cell["benchmark"], cell["split"], cell["row"])
        metrics = record["metrics"]
        behind = [] if cell.get("zeroshot") else [_run_of(cell["run"], _config_hash(cell, summaries))]
        for d in DIRECTION_LABELS:
            for k in PROTOCOL_KS:
                value = metrics.get(_metric(d, k))
                estimate = (None if value is None else
                            Estimate.of(Samples.from_pairs([("", outcomes_of(record))]), _metric(d, k), value))
                grid.add(row, (d, f"R@{k}"), [] if value is None else [float(value)], behind, estimate)
        grid.add(row, COUNT_COLUMNS[0], [float(record["n_images"])], behind)
        grid.add(row, COUNT_COLUMNS[1], [float(record["n_texts"])], behind)
    columns = [(d, f"R@{k}") for d in DIRECTION_LABELS for k in PROTOCOL_KS] + list(COUNT_COLUMNS)
    grid.unranked = set(columns)  # rows mix benchmarks and splits: a best over them would say nothing
    grid.decimals = {c: 0 for c in COUNT_COLUMNS}
    return _to_frame(grid, "protocols", spec.get("scale"), columns)


# ------------------------------------------------------------------------------- per-direction convergence
def epoch_infonce(dynamics: pd.DataFrame) -> pd.Series:
    """Standard InfoNCE (dynamics.csv ``infonce``, one value per optimizer step) averaged per epoch."""
    logged = dynamics[["epoch", "infonce"]].apply(pd.to_numeric, errors="coerce").dropna()
    return logged.groupby(logged["epoch"].astype(int))["infonce"].mean()


def build_convergence_table(spec, summaries: Mapping | None = None,
                            settings: BootstrapSettings | None = None) -> pd.DataFrame:
    """Per-direction convergence of the main runs: rows (method, benchmark, epoch); columns R@1 and
    retrieval error (100 - R@1) per direction, and the epoch's mean standard InfoNCE (the paper's §2.4:
    error keeps falling after InfoNCE flattens; appendix E.3's split-direction view).

    Reads each run's epochs.csv and dynamics.csv; a cell whose epochs.csv scores another benchmark
    (``epochs_benchmark``: Long-DCI's runs log DOCCI's test split) is left out rather than mislabelled.
    Seeds of one (method, benchmark) are averaged per epoch; ``summaries`` as in :func:`build_table`.
    """
    from hnclip.analysis.records import load_dynamics

    spec = load_spec(spec)
    grid = _Grid(("method", "benchmark", "epoch"), ("direction", "metric"),
                 settings=settings or settings_from_config(spec))
    columns = [(d, q) for d in DIRECTION_LABELS for q in ("R@1", "error")] + [("both", "InfoNCE")]
    per_run: dict[tuple, list[tuple[pd.DataFrame, pd.Series]]] = {}
    per_run_outcomes: dict[tuple, list[tuple[str, dict]]] = {}
    behind: dict[tuple, list[dict]] = {}
    seen = set()
    for cell in epoch_cells(spec):
        key = (cell["row"], cell["group"], cell["run_dir"])
        if key in seen:
            continue
        seen.add(key)
        dynamics = load_dynamics(cell["run_dir"])
        per_run.setdefault(key[:2], []).append((load_epochs(cell["run_dir"], cell["eval_benchmark"]),
                                                epoch_infonce(dynamics)))
        per_run_outcomes.setdefault(key[:2], []).append(
            (record_key(cell["run"], "")[4], load_epoch_outcomes(cell["run_dir"], f"{cell['eval_benchmark']}/test",
                                                                 cell["eval_benchmark"])))
        behind.setdefault(key[:2], []).append(_run_of(cell["run"], _config_hash(cell, summaries)))
    for (row, group), runs in per_run.items():
        epochs = sorted(set().union(*(set(e["epoch"].astype(int)) for e, _ in runs)))
        for epoch in epochs:
            at = (row, group, epoch)
            for d in DIRECTION_LABELS:
                r1 = [float(e.loc[e["epoch"].astype(int) == epoch, _metric(d, 1)].iloc[-1]) for e, _ in runs
                      if (e["epoch"].astype(int) == epoch).any()]
                pairs = [(seed, by_epoch.get(epoch)) for seed, by_epoch in per_run_outcomes[(row, group)]]
                estimate = _estimate(pairs, _metric(d, 1), r1) if len(pairs) == len(r1) else None
                grid.add(at, (d, "R@1"), r1, behind[(row, group)], estimate)
                grid.add(at, (d, "error"), [100.0 - v for v in r1], behind[(row, group)],
                         None if estimate is None else 100.0 - estimate)
            grid.add(at, ("both", "InfoNCE"), [float(s[epoch]) for _, s in runs if epoch in s.index],
                     behind[(row, group)])
    grid.unranked = set(columns)  # rows are trajectories (method x epoch): a "best" over them says nothing
    grid.decimals = {("both", "InfoNCE"): None}
    return _to_frame(grid, "convergence", spec["scale"], columns)
