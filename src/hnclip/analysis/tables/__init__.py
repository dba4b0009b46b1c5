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

By job: :mod:`.grid` (the shared grid, its aggregation and the DataFrame), :mod:`.experiments` (the
experiments' tables, laid out as :mod:`hnclip.experiments` registers them), :mod:`.epochs` (per-epoch
retrieval and convergence), :mod:`.cost` (training cost) and :mod:`.protocols` (the protocol table). Every
name below is importable from here.
"""

from __future__ import annotations

from hnclip.analysis.table_format import write_table
from hnclip.analysis.tables.cost import build_cost_table
from hnclip.analysis.tables.epochs import build_convergence_table, build_epochs_table, epoch_infonce
from hnclip.analysis.tables.experiments import DELTA, VARIANTS, build_table, table_layout
from hnclip.analysis.tables.grid import ALL_KS, DIRECTION_LABELS, STAT
from hnclip.analysis.tables.protocols import (
    COUNT_COLUMNS,
    PROTOCOL_KS,
    build_protocols_table,
    load_protocol_records,
    load_protocol_summaries,
)
from hnclip.plan import epoch_cells

__all__ = ["ALL_KS", "COUNT_COLUMNS", "DELTA", "DIRECTION_LABELS", "PROTOCOL_KS", "STAT", "VARIANTS",
           "build_convergence_table", "build_cost_table", "build_epochs_table", "build_protocols_table",
           "build_table", "epoch_cells", "epoch_infonce", "load_protocol_records", "load_protocol_summaries",
           "table_layout", "write_table"]
