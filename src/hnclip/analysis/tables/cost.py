"""The training-cost table (:func:`build_cost_table`): per run setting, wall and training time, throughput,
accelerator hours, memory, and training time against the reference method's, with and without the
preprocessing a framework needs. Runs are found by the :data:`hnclip.paths.RUN` tail of their folders and
Snakemake benchmark files (:func:`hnclip.paths.parse_run_path`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from hnclip import paths
from hnclip.analysis.records import RUN_FIELDS, load_benchmark_tsv, load_summary, summary_config_hash
from hnclip.analysis.tables.grid import Grid, run_of, to_frame
from hnclip.plan import REFERENCE_METHOD

__all__ = ["build_cost_table"]


def _run_parts(path: str) -> tuple[str, ...] | None:
    """(train_set, method, gamma, fraction, seed) from the tail of a run folder or benchmark file path."""
    return paths.parse_run_path(path)


def _cost_order(parts: tuple[str, ...]) -> tuple:
    """Runs grouped by train set and method, then by gamma and fraction as numbers ('0.25' < '1')."""
    def number(text):
        try:
            return (0, float(text), "")
        except ValueError:
            return (1, 0.0, text)
    return tuple(number(p) if i >= 2 else (0, 0.0, p) for i, p in enumerate(parts))


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
    after each epoch took (``summary["timing"]["train_time_s"]``, :func:`hnclip.training.timing.step_timing`); the wall
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
    tsv = _run_benchmark_files(benchmarks)
    made = _preprocess_hours(preprocess)
    grid = Grid(("train_set", "method", "gamma", "fraction"), ("quantity",))
    rows = _add_run_rows(grid, loaded, tsv, bool(benchmarks))
    ratio_col, with_col = _add_reference_ratios(grid, rows, made, bool(preprocess), reference_method, reference_gamma)
    grid.lower_is_better = {c for c in grid.columns if c != ("samples/s",)}
    grid.unranked = {ratio_col, with_col}
    grid.decimals = {c: None for c in grid.columns}  # adaptive: toy runs last minutes, paper runs days
    if scale is None:
        scales = {(s.get("config") or {}).get("scale") for s in loaded} - {None}
        scale = scales.pop() if len(scales) == 1 else None
    return to_frame(grid, "cost", scale)


def _run_benchmark_files(benchmarks: Iterable) -> dict[tuple, dict]:
    """Each train job's Snakemake benchmark TSV, by its run's fields."""
    tsv = {}
    for path in benchmarks:
        parts = _run_parts(str(path))
        if parts is None:
            raise ValueError(f"cost table: cannot tell the run of benchmark file {path} "
                             "(expected .../train_set/method/g*/f*/s*.tsv)")
        tsv[parts] = load_benchmark_tsv(path)
    return tsv


def _preprocess_hours(preprocess: Iterable) -> dict[tuple[str, str], float]:
    """Each preprocessing job's hours, by (product, benchmark)."""
    made = {}
    for path in preprocess:
        parts = _preprocess_parts(path)
        if parts is None:
            raise ValueError(f"cost table: cannot tell the product of preprocessing benchmark file {path} "
                             "(expected .../<product>/<benchmark>.tsv)")
        made[parts] = load_benchmark_tsv(path)["s"] / 3600.0
    return made


def _add_run_rows(grid: Grid, loaded: list, tsv: dict, benchmarked: bool) -> dict[str, dict]:
    """Each run's own quantities, seeds of a setting on one row; returns per row its training hours
    (``train``), the products its framework needs (``products``) and the runs behind it (``runs``).
    ``benchmarked``: benchmark files were given, so every run needs one."""
    any_gpu = any(_n_gpus(s) > 0 for s in loaded)
    accel = "GPU-hours" if any_gpu else "CPU-hours"
    rows: dict[str, dict] = {"train": {}, "products": {}, "runs": {}}
    for summary in loaded:
        parts = _run_parts(str(summary.get("run_dir", "")))
        if parts is None:
            raise ValueError(f"cost table: summary of run folder {summary.get('run_dir')!r} is not under "
                             ".../train_set/method/g*/f*/s*")
        row = parts[:4]
        run = [run_of(dict(zip(RUN_FIELDS, parts, strict=True)), summary_config_hash(summary))]
        rows["runs"].setdefault(row, []).extend(run)
        wall_h = float(summary["wall_time_s"]) / 3600.0
        rows["train"].setdefault(row, []).append(_training_hours(summary))
        rows["products"][row] = _products(summary)
        grid.add(row, ("wall time (h)",), [wall_h], run)
        grid.add(row, ("training time (h)",), [_training_hours(summary)], run)
        grid.add(row, ("samples/s",), [float(summary["samples_per_s"])], run)
        grid.add(row, (accel,), [wall_h * _n_gpus(summary) if any_gpu else wall_h], run)
        grid.add(row, ("peak memory (MB)",), [float(summary["peak_memory_mb"])], run)
        bench = tsv.get(parts)
        if benchmarked and bench is None:
            raise ValueError(f"cost table: no Snakemake benchmark file for run {paths.run_path(*parts)}")
        if bench is not None:
            grid.add(row, ("max RSS (MB)",), [bench["max_rss"]], run)
            grid.add(row, ("CPU time (h)",), [bench["cpu_time"] / 3600.0], run)
    return rows


def _add_reference_ratios(grid: Grid, rows: dict[str, dict], made: dict, preprocessed: bool,
                          reference_method: str, reference_gamma: float) -> tuple[tuple, tuple]:
    """Each row's training time over the reference method's at ``reference_gamma`` on the same train set and
    fraction, and with the preprocessing its framework needs (when ``preprocessed``); returns both columns."""
    ratio_col = (f"time vs {reference_method}",)
    with_col = (f"time vs {reference_method} with preprocessing",)
    for row, hours in rows["train"].items():
        ref_row = (row[0], reference_method, f"{float(reference_gamma):g}", row[3])
        ref = rows["train"].get(ref_row)
        if ref is None:
            continue
        behind = rows["runs"][row] + rows["runs"][ref_row]
        own, reference = float(np.mean(hours)), float(np.mean(ref))
        grid.add(row, ratio_col, [own / reference], behind)
        needed = rows["products"][row]
        if needed and preprocessed:
            missing = [p for p in needed if (p, row[0]) not in made]
            if missing:
                raise ValueError(f"cost table: no preprocessing benchmark file for {', '.join(missing)} of "
                                 f"{row[0]} (run {row[1]})")
            grid.add(row, with_col, [(own + sum(made[(p, row[0])] for p in needed)) / reference], behind)
    return ratio_col, with_col
