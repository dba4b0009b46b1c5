"""The experiments' tables (:func:`build_table`), laid out as each experiment's registration says
(:attr:`hnclip.experiments.ExperimentEntry.table`): a row per method or variant with R@K per group and
direction, a row per swept value, the plug-in table's plain / +HN / difference, the seeds' replication."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from hnclip.analysis.bootstrap import BootstrapSettings, outcomes_of, settings_from_config
from hnclip.analysis.records import MissingRecordError, index_records, load_spec, record_key, run_name
from hnclip.analysis.tables.grid import (
    ALL_KS,
    DIRECTION_LABELS,
    Grid,
    cell_config_hash,
    metric_key,
    run_of,
    seed_estimate,
    to_frame,
    unique,
)
from hnclip.experiments import TableLayout, experiment_entry
from hnclip.released import RELEASED

__all__ = ["DELTA", "VARIANTS", "build_table", "table_layout"]

VARIANTS = ("plain", "+HN")
DELTA = "Δ"
# the tables that are no experiment's: the released checkpoints beside the main table's rows, in its layout
_OTHER_LAYOUTS = {RELEASED: TableLayout("rows", ks=ALL_KS)}


def table_layout(experiment: str) -> TableLayout:
    """The layout of ``experiment``'s table: its registration's, or the released checkpoints' table's."""
    return _OTHER_LAYOUTS[experiment] if experiment in _OTHER_LAYOUTS else experiment_entry(experiment).table


def _cell_seeds(spec: dict, index: dict, summaries: Mapping | None = None
                ) -> tuple[dict[tuple, list[tuple[str, dict]]], dict[tuple, list[dict]], dict[tuple, list]]:
    """Cells grouped by (row, group, variant, x): each group's (seed, metrics) in spec order, the runs
    behind each group (see :func:`run_of`), and each group's (seed, per-query outcomes or None)."""
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
            behind.append(run_of(run, cell_config_hash(cell, summaries)))
    return grouped, runs, outcomes


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
    layout = table_layout(spec["experiment"])
    groups = unique(key[1] for key in grouped)
    build = {"rows": _rows_table, "swept": _swept_table, "plugin": _plugin_table, "seeds": _seeds_table}[layout.kind]
    return build(spec, layout, grouped, groups, behind, outcomes, settings)


def _retrieval_columns(groups: list, ks: tuple[int, ...]) -> list[tuple]:
    return [(g, d, f"R@{k}") for g in groups for d in DIRECTION_LABELS for k in ks]


def _rows_table(spec: dict, layout: TableLayout, grouped: dict, groups: list, behind: dict, outcomes: dict,
                settings: BootstrapSettings) -> pd.DataFrame:
    """A row per method (or variant): R@K for each group and direction."""
    grid = Grid(layout.rows, (layout.group_level, "direction", "metric"), settings=settings)
    for key, seeds in grouped.items():
        row, group = key[:2]
        for d in DIRECTION_LABELS:
            for k in layout.ks:
                values = [m[metric_key(d, k)] for _, m in seeds]
                grid.add((row,), (group, d, f"R@{k}"), values, behind[key],
                         seed_estimate(outcomes[key], metric_key(d, k), values))
    return to_frame(grid, spec["experiment"], spec["scale"], _retrieval_columns(groups, layout.ks))


def _swept_table(spec: dict, layout: TableLayout, grouped: dict, groups: list, behind: dict, outcomes: dict,
                 settings: BootstrapSettings) -> pd.DataFrame:
    """A row per swept value (per method and value where the layout's rows name the method first): R@1."""
    # x is the swept value; the spec sets it, else it is read from the run itself
    runs = {(c["row"], c["group"], c.get("variant"), c.get("x")): c["run"] for c in spec["cells"]}
    by_method = layout.rows != (layout.swept,)
    methods = unique(key[0] for key in grouped)

    def row_of(key: tuple) -> tuple:
        x = _x_of(key, runs, layout.swept)
        return (key[0], x) if by_method else (x,)

    def order(item) -> tuple:
        row = row_of(item[0])
        return (methods.index(row[0]), row[1]) if by_method else row

    grid = Grid(layout.rows, (layout.group_level, "direction", "metric"), settings=settings)
    for key, seeds in sorted(grouped.items(), key=order):
        for d in DIRECTION_LABELS:
            values = [m[metric_key(d, 1)] for _, m in seeds]
            grid.add(row_of(key), (key[1], d, "R@1"), values, behind[key],
                     seed_estimate(outcomes[key], metric_key(d, 1), values))
    return to_frame(grid, spec["experiment"], spec["scale"], _retrieval_columns(groups, layout.ks))


def _plugin_table(spec: dict, layout: TableLayout, grouped: dict, groups: list, behind: dict, outcomes: dict,
                  settings: BootstrapSettings) -> pd.DataFrame:
    """Frameworks x (group, direction, R@1, {plain, +HN, Δ}); Δ is paired by seed when both sides share seeds,
    and its interval is the paired bootstrap of +HN minus plain on the same resampled test images."""
    grid = Grid(layout.rows, (layout.group_level, "direction", "metric", "variant"), settings=settings)
    frameworks = unique(key[0] for key in grouped)
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
                m = metric_key(d, 1)
                estimates = {}
                for variant, seeds in sides.items():
                    if seeds is not None:
                        values = [v[m] for _, v in seeds]
                        estimates[variant] = seed_estimate(side_outcomes[variant], m, values)
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
    return to_frame(grid, spec["experiment"], spec["scale"], [c for c in order if c in grid.columns])


def _seeds_table(spec: dict, layout: TableLayout, grouped: dict, groups: list, behind: dict, outcomes: dict,
                 settings: BootstrapSettings) -> pd.DataFrame:
    """Methods x (group, direction, R@1, {each seed, difference}): replication, so seeds are not averaged.
    A two-seed difference's interval is paired on the same resampled test images (max − min over more
    seeds is not linear: no interval)."""
    grid = Grid(layout.rows, (layout.group_level, "direction", "metric", "seed"), settings=settings)
    seeds_all = sorted(unique(s for seeds in grouped.values() for s, _ in seeds), key=_seed_order)
    spread = (f"s{seeds_all[1]}−s{seeds_all[0]}" if len(seeds_all) == 2 else "max−min")
    for key, seeds in grouped.items():
        row, group = key[:2]
        runs_by_seed = {r["seed"]: r for r in behind[key]}
        for d in DIRECTION_LABELS:
            m = metric_key(d, 1)
            by_seed = dict(seeds)
            outcome_of = dict(outcomes[key])
            per_seed = {s: seed_estimate([(s, outcome_of[s])], m, [by_seed[s][m]]) for s in seeds_all if s in by_seed}
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
    return to_frame(grid, spec["experiment"], spec["scale"], [c for c in order if c in grid.columns])


def _seed_order(seed: str):
    try:
        return (0, float(seed))
    except ValueError:
        return (1, seed)
