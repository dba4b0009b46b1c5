"""The experiment registry: one :func:`register_experiment` row per experiment, importing nothing of the plan.

A row names the experiment (its ``experiments.<name>`` config block, its spec ``results/specs/<name>.json``
and its table ``results/tables/<name>.*``) and holds what every reader asks of it:

- ``cells``: its spec builder, ``cells(grid, settings)`` -> the table's cells, each naming the run and the
  evaluation it needs (``grid`` is the plan's cell maker, :class:`hnclip.plan.grid.CellMaker`, passed in so
  that an experiment module imports nothing of the plan);
- ``table``: its table's layout (:class:`TableLayout`), which :func:`hnclip.analysis.tables.build_table` reads;
- ``settings`` and ``description``: its config block's keys (each a JSON-schema node, every one required)
  and what it is; ``workflow/scripts/config_docs.py`` writes its ``experiments.<name>`` schema block (and so
  config/README.md) from them (:func:`schema_block`);
- ``figure``: the figure drawn from its table (:class:`FigureLayout`, ``results/figures/<name>.png`` by the
  workflow's ``figure_from_evaluations`` rule and ``hnclip figure <name>``), or None; ``log_figures``: the
  figures drawn from its runs' logs by rules of their own (analysis.smk, convergence.smk), which the report
  shows with it;
- ``check``: its cross-reference checks beyond the shared ones (``check(config, settings)``, raising through
  :func:`hnclip.config.errors.fail`), and ``trains``: whether it trains runs of its own (one that does not,
  such as retention, scores other experiments' models, so its benchmarks need a test split, not a train set).

The built-in rows are the modules of this package, one per experiment, registered in the order of
:data:`hnclip.experiments.EXPERIMENTS` (importing :mod:`hnclip.experiments` runs them); that order orders the
workflow's outputs. A new experiment is one module here plus its import in ``__init__`` (CONTRIBUTING.md,
"An experiment", names the rest: the generated schema, the configs that run it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["FIGURE_KINDS", "LAYOUT_KINDS", "ExperimentEntry", "FigureLayout", "TableLayout", "experiment_entry",
           "experiment_names", "figured_experiments", "number_list", "record_list", "register_experiment",
           "report_figures", "schema_block", "string_key", "string_list"]

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


# the figures :func:`hnclip.analysis.figures.plot_experiment` draws from an experiment's table: "sweep" (R@1
# against the swept value of a "swept" table, a line per row)
FIGURE_KINDS = ("sweep",)


@dataclass(frozen=True)
class FigureLayout:
    """The figure drawn from an experiment's table. ``title``: its heading; ``log_x``: a log x axis; ``mark``:
    a spec key (e.g. ``gamma``, the config's) whose value is marked on the x axis, where the spec has it."""

    kind: str
    title: str = ""
    log_x: bool = False
    mark: str | None = None

    def __post_init__(self):
        if self.kind not in FIGURE_KINDS:
            raise ValueError(f"figure layout {self.kind!r}: one of {', '.join(FIGURE_KINDS)}")


@dataclass(frozen=True)
class ExperimentEntry:
    """One experiment's registration row (see :func:`register_experiment`)."""

    name: str
    cells: Callable
    table: TableLayout
    settings: dict
    description: str
    check: Callable | None = None
    trains: bool = True
    figure: FigureLayout | None = None
    log_figures: tuple[str, ...] = ()


def register_experiment(*, name: str, cells: Callable, table: TableLayout, settings: dict, description: str,
                        check: Callable | None = None, trains: bool = True, figure: FigureLayout | None = None,
                        log_figures: tuple[str, ...] = ()) -> ExperimentEntry:
    """Register an experiment; the row is what the plan, the config checks and the table builder read.

    Args:
        name: the experiment's name (``experiments.<name>`` in the config); lower case.
        cells: ``cells(grid, settings)``: its cells, built with the plan's cell maker ``grid`` from its config
            block ``settings``.
        table: its table's :class:`TableLayout`.
        settings: its config block's keys, each a JSON-schema node (:func:`string_list`, :func:`number_list`,
            :func:`record_list`, :func:`string_key`), every one required where the block is configured.
        description: what it is, one sentence (its schema block's description).
        check: ``check(config, settings)``: the checks only this experiment needs (None: the shared ones).
        trains: False for an experiment that only scores other experiments' runs (its benchmarks then need a
            test split instead of a train set).
        figure: the figure drawn from its table (:class:`FigureLayout`; a "sweep" needs a "swept" table), or
            None for none.
        log_figures: figures drawn from its runs' logs by rules of their own, shown in the report with it.
    """
    if not _NAME.match(name):
        raise ValueError(f"experiment name {name!r}: lower-case letters, digits and _ only")
    if name in _REGISTRY:
        raise ValueError(f"experiment {name!r} is already registered")
    if not isinstance(table, TableLayout):
        raise ValueError(f"experiment {name!r}: table must be a TableLayout, got {table!r}")
    if not settings or not all(isinstance(v, dict) and v.get("description") for v in settings.values()):
        raise ValueError(f"experiment {name!r}: settings maps each config key to a schema node with a description")
    if not description.strip():
        raise ValueError(f"experiment {name!r}: a description (its schema block's)")
    if figure is not None and not (isinstance(figure, FigureLayout) and table.kind == "swept"):
        raise ValueError(f"experiment {name!r}: figure must be a FigureLayout, and a sweep figure needs a swept "
                         f"table (this one's is {table.kind!r})")
    entry = ExperimentEntry(name=name, cells=cells, table=table, settings=dict(settings), description=description,
                            check=check, trains=trains, figure=figure, log_figures=tuple(log_figures))
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


def figured_experiments() -> tuple[str, ...]:
    """The registered experiments with a figure drawn from their table (the figure rule's experiments)."""
    return tuple(name for name, entry in _REGISTRY.items() if entry.figure is not None)


def report_figures(configured) -> list[str]:
    """The figures the report shows for the ``configured`` experiments, in registration order: each one's
    figures from its runs' logs, then the one from its table."""
    return [f for name, entry in _REGISTRY.items() if name in configured
            for f in (*entry.log_figures, *((name,) if entry.figure is not None else ()))]


# ------------------------------------------------------------------- its config block, as schema nodes
def string_list(description: str) -> dict:
    """A non-empty list of names (benchmarks, methods)."""
    return {"type": "array", "minItems": 1, "items": {"type": "string"}, "description": description}


def number_list(description: str, **bounds) -> dict:
    """A non-empty list of numbers, each within ``bounds`` (``minimum=0``, ``exclusiveMinimum``, ...)."""
    return {"type": "array", "minItems": 1, "items": {"type": "number", **bounds}, "description": description}


def string_key(description: str) -> dict:
    return {"type": "string", "description": description}


def record_list(description: str, properties: dict, optional: tuple[str, ...] = ()) -> dict:
    """A non-empty list of records (e.g. plugin pairs), each with ``properties``, all but ``optional`` required."""
    item = {"type": "object", "additionalProperties": False,
            "required": [k for k in properties if k not in optional], "properties": properties}
    return {"type": "array", "minItems": 1, "description": description, "items": item}


def schema_block(name: str) -> dict:
    """``experiments.<name>``'s schema node, from its row: every key required, no other key."""
    entry = experiment_entry(name)
    return {"type": "object", "additionalProperties": False, "required": list(entry.settings),
            "description": entry.description, "properties": entry.settings}
