"""What every table shares: the per-seed grid of (row, column) values, its aggregation to mean, std, n and
the bootstrap interval, the DataFrame every writer reads (:func:`to_frame`), and the runs behind a line."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hnclip.analysis.bootstrap import BootstrapSettings, Estimate, Samples, interval
from hnclip.analysis.records import DIRECTIONS, record_key, summary_config_hash

__all__ = ["ALL_KS", "DIRECTION_LABELS", "STAT", "Grid", "cell_config_hash", "metric_key", "run_of", "seed_estimate",
           "to_frame", "unique"]

# ci_low / ci_high: the percentile bootstrap interval (hnclip.analysis.bootstrap) over test images and
# seeds; NaN where the cell's per-query outcomes are unknown (cost columns, records made before ranks)
STAT = ("mean", "std", "n", "ci_low", "ci_high")
DIRECTION_LABELS = tuple(DIRECTIONS.values())
ALL_KS = (1, 5, 10)


@dataclass
class Grid:
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


def to_frame(grid: Grid, experiment: str, scale: str | None, column_order: list[tuple] | None = None) -> pd.DataFrame:
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


def run_of(run: Mapping, config_hash: str = "") -> dict:
    """The keys of one run as a table line carries them: its wildcards and its summary's config hash."""
    key = dict(zip(("train_set", "method", "gamma", "fraction", "seed"), record_key(run, "")[:5], strict=True))
    return {**key, "config_hash": config_hash}


def cell_config_hash(cell: Mapping, summaries: Mapping | None) -> str:
    if not summaries or not cell.get("run_dir"):
        return ""
    summary = summaries.get(str(cell["run_dir"]))
    return summary_config_hash(summary) if summary is not None else ""


def metric_key(direction: str, k: int) -> str:
    prefix = {v: p for p, v in DIRECTIONS.items()}[direction]
    return f"{prefix}_r{k}"


def seed_estimate(pairs: list, metric: str, values: list[float]) -> Estimate:
    """A cell's seed-averaged metric as an estimate over its seeds' outcomes (no interval if any lacks them)."""
    return Estimate.of(Samples.from_pairs(pairs), metric, float(np.mean(values)) if values else math.nan)


def unique(items: Iterable) -> list:
    return list(dict.fromkeys(items))
