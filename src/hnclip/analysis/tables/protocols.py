"""The protocol table: every model scored at the paper's and GOAL's Recall@K cut-offs, per benchmark and
split, with the pairs scored (:func:`build_protocols_table`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from hnclip.analysis.bootstrap import BootstrapSettings, Estimate, Samples, outcomes_of, settings_from_config
from hnclip.analysis.records import MissingRecordError, cell_summaries, load_eval, load_protocol_spec
from hnclip.analysis.tables.grid import DIRECTION_LABELS, Grid, cell_config_hash, metric_key, run_of, to_frame

__all__ = ["COUNT_COLUMNS", "PROTOCOL_KS", "build_protocols_table", "load_protocol_records",
           "load_protocol_summaries"]

PROTOCOL_KS = (1, 5, 10, 25, 50)  # the paper's R@1/5/10 and GOAL's R@1/5/25/50, from one ranking
COUNT_COLUMNS = (("pairs", "images"), ("pairs", "captions"))


def load_protocol_summaries(spec: Mapping) -> dict[str, dict]:
    """summary.json of every fine-tuned model the protocol spec scores, keyed by its ``run_dir`` (the
    zero-shot backbone has none): the table's lines carry their config hashes."""
    return cell_summaries(spec["cells"])


def load_protocol_records(spec: Mapping) -> dict[str, dict]:
    """The protocol spec's evaluation records by path; a missing one raises naming the model and split."""
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
    grid = Grid(("benchmark", "split", "method"), ("direction", "metric"),
                 settings=settings or settings_from_config(spec))
    for cell in spec["cells"]:
        record = records.get(cell["eval_path"])
        if record is None:
            raise MissingRecordError(f"protocols table: no record {cell['eval_path']} ({cell['row']!r}, "
                                     f"{cell['benchmark']!r}, split {cell['split']!r})")
        row = (cell["benchmark"], cell["split"], cell["row"])
        metrics = record["metrics"]
        behind = [] if cell.get("zeroshot") else [run_of(cell["run"], cell_config_hash(cell, summaries))]
        for d in DIRECTION_LABELS:
            for k in PROTOCOL_KS:
                value = metrics.get(metric_key(d, k))
                estimate = (None if value is None else
                            Estimate.of(Samples.from_pairs([("", outcomes_of(record))]), metric_key(d, k), value))
                grid.add(row, (d, f"R@{k}"), [] if value is None else [float(value)], behind, estimate)
        grid.add(row, COUNT_COLUMNS[0], [float(record["n_images"])], behind)
        grid.add(row, COUNT_COLUMNS[1], [float(record["n_texts"])], behind)
    columns = [(d, f"R@{k}") for d in DIRECTION_LABELS for k in PROTOCOL_KS] + list(COUNT_COLUMNS)
    grid.unranked = set(columns)  # rows mix benchmarks and splits: a best over them would say nothing
    grid.decimals = {c: 0 for c in COUNT_COLUMNS}
    return to_frame(grid, "protocols", spec.get("scale"), columns)
