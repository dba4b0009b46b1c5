"""Tables over a run's epochs: retrieval after each epoch (:func:`build_epochs_table`) and the per-direction
convergence beside the epoch's standard InfoNCE (:func:`build_convergence_table`)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from hnclip.analysis.bootstrap import BootstrapSettings, settings_from_config
from hnclip.analysis.records import load_dynamics, load_epoch_outcomes, load_epochs, load_spec, record_key
from hnclip.analysis.tables.grid import (
    ALL_KS,
    DIRECTION_LABELS,
    Grid,
    cell_config_hash,
    metric_key,
    run_of,
    seed_estimate,
    to_frame,
)
from hnclip.plan import epoch_cells

__all__ = ["build_convergence_table", "build_epochs_table", "epoch_infonce"]


def build_epochs_table(spec, summaries: Mapping | None = None,
                       settings: BootstrapSettings | None = None) -> pd.DataFrame:
    """Retrieval after each epoch (epochs.csv) of the spec's runs: rows (method, benchmark, epoch).

    Several runs of one (method, benchmark), i.e. seeds, are aggregated per epoch; ``summaries`` as in
    :func:`build_table`. The zero-shot row has no epochs; each cell reads its run's rows of its own benchmark
    (a DOCCI run logs DOCCI and Long-DCI), and a cell whose run does not log its benchmark after each epoch
    (its ``epochs_benchmark`` another's) is left out, not mislabelled.
    """
    spec = load_spec(spec)
    grid = Grid(("method", "benchmark", "epoch"), ("direction", "metric"),
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
        behind.setdefault((cell["row"], cell["group"]), []).append(run_of(cell["run"], cell_config_hash(cell, summaries)))
    for (row, group), frames in per_run.items():
        epochs = sorted(set().union(*(set(f["epoch"].astype(int)) for f in frames)))
        for epoch in epochs:
            for d in DIRECTION_LABELS:
                for k in ALL_KS:
                    m = metric_key(d, k)
                    vals = [float(f.loc[f["epoch"].astype(int) == epoch, m].iloc[-1]) for f in frames
                            if (f["epoch"].astype(int) == epoch).any()]
                    pairs = [(seed, by_epoch.get(epoch)) for seed, by_epoch in per_run_outcomes[(row, group)]]
                    estimate = seed_estimate(pairs, m, vals) if len(pairs) == len(vals) else None
                    grid.add((row, group, epoch), (d, f"R@{k}"), vals, behind[(row, group)], estimate)
    return to_frame(grid, "epochs", spec["scale"], [(d, f"R@{k}") for d in DIRECTION_LABELS for k in ALL_KS])


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
    spec = load_spec(spec)
    grid = Grid(("method", "benchmark", "epoch"), ("direction", "metric"),
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
        behind.setdefault(key[:2], []).append(run_of(cell["run"], cell_config_hash(cell, summaries)))
    for (row, group), runs in per_run.items():
        epochs = sorted(set().union(*(set(e["epoch"].astype(int)) for e, _ in runs)))
        for epoch in epochs:
            at = (row, group, epoch)
            for d in DIRECTION_LABELS:
                r1 = [float(e.loc[e["epoch"].astype(int) == epoch, metric_key(d, 1)].iloc[-1]) for e, _ in runs
                      if (e["epoch"].astype(int) == epoch).any()]
                pairs = [(seed, by_epoch.get(epoch)) for seed, by_epoch in per_run_outcomes[(row, group)]]
                estimate = seed_estimate(pairs, metric_key(d, 1), r1) if len(pairs) == len(r1) else None
                grid.add(at, (d, "R@1"), r1, behind[(row, group)], estimate)
                grid.add(at, (d, "error"), [100.0 - v for v in r1], behind[(row, group)],
                         None if estimate is None else 100.0 - estimate)
            grid.add(at, ("both", "InfoNCE"), [float(s[epoch]) for _, s in runs if epoch in s.index],
                     behind[(row, group)])
    grid.unranked = set(columns)  # rows are trajectories (method x epoch): a "best" over them says nothing
    grid.decimals = {("both", "InfoNCE"): None}
    return to_frame(grid, "convergence", spec["scale"], columns)
