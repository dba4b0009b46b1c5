"""The experiments, one module each, registered in :mod:`hnclip.experiments.registry`.

Importing this package registers the built-in experiments in the order of :data:`EXPERIMENTS`, the order
that orders the workflow's outputs. The package sits below the plan and the analysis: an experiment's spec
builder gets the plan's cell maker as an argument, so nothing here imports :mod:`hnclip.plan`.
"""

from __future__ import annotations

# each import registers its experiment: this order is the order of EXPERIMENTS
# isort: off
from hnclip.experiments import main  # noqa: F401
from hnclip.experiments import plugin  # noqa: F401
from hnclip.experiments import transfer  # noqa: F401
from hnclip.experiments import fractions  # noqa: F401
from hnclip.experiments import gamma_sweep  # noqa: F401
from hnclip.experiments import ablation  # noqa: F401
from hnclip.experiments import seeds  # noqa: F401
from hnclip.experiments import retention  # noqa: F401
# isort: on
from hnclip.experiments.registry import (
    ExperimentEntry,
    FigureLayout,
    TableLayout,
    experiment_entry,
    experiment_names,
    figured_experiments,
    register_experiment,
    report_figures,
    schema_block,
)

# the built-in experiments, in registration order (a name registered later, e.g. by a test, is in
# experiment_names() only)
EXPERIMENTS = experiment_names()

__all__ = ["EXPERIMENTS", "ExperimentEntry", "FigureLayout", "TableLayout", "experiment_entry", "experiment_names",
           "figured_experiments", "register_experiment", "report_figures", "schema_block"]
