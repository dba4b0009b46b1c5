"""The experiment registry: one :func:`register_experiment` row per experiment, importing nothing of the plan.

A row names the experiment (its ``experiments.<name>`` config block, its spec ``results/specs/<name>.json``
and its table ``results/tables/<name>.*``) and holds what every reader asks of it:

- ``cells``: its spec builder, ``cells(grid, settings)`` -> the table's cells, each naming the run and the
  evaluation it needs (``grid`` is the plan's cell maker, :class:`hnclip.plan.grid.CellMaker`, passed in so
  that an experiment module imports nothing of the plan);
- ``table``: its table's layout (:class:`TableLayout`), which :func:`hnclip.analysis.tables.build_table` reads;
- ``check``: its cross-reference checks beyond the shared ones (``check(config, settings)``, raising through
  :func:`hnclip.config.errors.fail`), and ``trains``: whether it trains runs of its own (one that does not,
  such as retention, scores other experiments' models, so its benchmarks need a test split, not a train set);
- ``sections``: the claim sections (:data:`hnclip.analysis.claims.SECTIONS`) that read its table.

The built-in rows are the modules of this package, one per experiment, registered in the order of
:data:`hnclip.experiments.EXPERIMENTS` (importing :mod:`hnclip.experiments` runs them); that order orders the
workflow's outputs. A new experiment is one module here plus its import in ``__init__``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LAYOUT_KINDS", "ExperimentEntry", "TableLayout", "experiment_entry", "experiment_names",
           "register_experiment"]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# name -> row, in registration order (the order of every listing and of the workflow's outputs)
_REGISTRY: dict[str, ExperimentEntry] = {}

# the table shapes :func:`hnclip.analysis.tables.build_table` draws: "rows" (a row per method or variant,
# R@K per group and direction), "swept" (a row per swept value, R@1), "plugin" (plain, +HN and their
# difference per framework) and "seeds" (each seed and their spread)
LAYOUT_KINDS = ("rows", "swept", "plugin", "seeds")


@dataclass(frozen=True)
class TableLayout:
    """How an experiment's table is laid out.

    ``rows``: the row index's level names; ``group_level``: the name of the first column level (the
    benchmark or train -> eval pair); ``ks``: the R@K reported; ``swept``: the run field a "swept" table's
    rows vary (``fraction``, ``gamma``), read from the run where a cell sets no ``x``."""

    kind: str
    rows: tuple[str, ...] = ("method",)
    group_level: str = "group"
    ks: tuple[int, ...] = (1,)
    swept: str | None = None

    def __post_init__(self):
        if self.kind not in LAYOUT_KINDS:
            raise ValueError(f"table layout {self.kind!r}: one of {', '.join(LAYOUT_KINDS)}")
        if (self.kind == "swept") != (self.swept is not None):
            raise ValueError(f"table layout {self.kind!r}: swept names the varied run field of a swept table only")


@dataclass(frozen=True)
class ExperimentEntry:
    """One experiment's registration row (see :func:`register_experiment`)."""

    name: str
    cells: Callable
    table: TableLayout
    check: Callable | None = None
    trains: bool = True
    sections: tuple[str, ...] = ()


def register_experiment(*, name: str, cells: Callable, table: TableLayout, check: Callable | None = None,
                        trains: bool = True, sections: tuple[str, ...] = ()) -> ExperimentEntry:
    """Register an experiment; the row is what the plan, the config checks and the table builder read.

    Args:
        name: the experiment's name (``experiments.<name>`` in the config); lower case.
        cells: ``cells(grid, settings)``: its cells, built with the plan's cell maker ``grid`` from its config
            block ``settings``.
        table: its table's :class:`TableLayout`.
        check: ``check(config, settings)``: the checks only this experiment needs (None: the shared ones).
        trains: False for an experiment that only scores other experiments' runs (its benchmarks then need a
            test split instead of a train set).
        sections: the claim sections that read its table.
    """
    if not _NAME.match(name):
        raise ValueError(f"experiment name {name!r}: lower-case letters, digits and _ only")
    if name in _REGISTRY:
        raise ValueError(f"experiment {name!r} is already registered")
    if not isinstance(table, TableLayout):
        raise ValueError(f"experiment {name!r}: table must be a TableLayout, got {table!r}")
    entry = ExperimentEntry(name=name, cells=cells, table=table, check=check, trains=trains,
                            sections=tuple(sections))
    _REGISTRY[name] = entry
    return entry


def experiment_names() -> tuple[str, ...]:
    """Registered experiment names, in registration order."""
    return tuple(_REGISTRY)


def experiment_entry(name: str) -> ExperimentEntry:
    """The row registered as ``name``; an unknown name lists the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(_REGISTRY)}") from None
