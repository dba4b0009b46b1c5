"""Expand the validated workflow config into runs, evaluations and table specs.

The Snakemake rules stay thin: every decision about which training runs an experiment needs lives here,
where it is testable without Snakemake and shared with ``hnclip plan``. By job:

- :mod:`hnclip.plan.roles`: the method roles the analysis compares (the experiments are
  :mod:`hnclip.experiments`, whose ``EXPERIMENTS`` is importable from here too);
- :mod:`hnclip.plan.benchmarks`: the benchmarks' splits, files and wildcard constraints;
- :mod:`hnclip.plan.grid`: every experiment's cells and the runs and evaluations they need;
- :mod:`hnclip.plan.specs`: the spec files the tables, figures and report read;
- :mod:`hnclip.plan.settings`: each run's training settings (probing, per-epoch evaluation);
- :mod:`hnclip.plan.cells`: which cells the dynamics figure and the epochs table draw;
- :mod:`hnclip.plan.readers`: what the analysis reads from the specs and runs.

The config's cross-reference checks are :mod:`hnclip.config_checks` (``check_config``), which reads this
package; the results/ layout is :mod:`hnclip.paths`. Every name below is importable from ``hnclip.plan``.
"""

from __future__ import annotations

from hnclip.experiments import EXPERIMENTS
from hnclip.paths import format_number
from hnclip.plan.benchmarks import (
    DEFAULT_SPLITS,
    NEVER_MATCHES,
    benchmark_splits,
    epoch_eval_benchmarks,
    fetched_benchmark,
    self_evaluated_train_sets,
    wildcard_pattern,
)
from hnclip.plan.cells import dynamics_figure_cells, epoch_cells
from hnclip.plan.grid import (
    Evaluation,
    Run,
    all_evaluations,
    all_runs,
    experiment_spec,
    is_zeroshot,
    transfer_targets,
    zeroshot_eval_benchmarks,
    zeroshot_eval_path,
    zeroshot_run,
)
from hnclip.plan.readers import (
    main_comparison,
    plain_runs,
    regime_benchmarks,
    report_run_logs,
)
from hnclip.plan.roles import (
    ABLATION_ROLES,
    BASELINE_METHOD,
    FROZEN_METHOD,
    REFERENCE_METHOD,
    ZEROSHOT_ROW,
    competitor_key,
    spec_roles,
)
from hnclip.plan.settings import (
    epoch_evaluated_runs,
    epoch_readers,
    probe_readers,
    probed_runs,
    run_settings,
    train_overrides,
)
from hnclip.plan.specs import spec_digest, spec_text, write_spec, write_spec_file

__all__ = [
    "ABLATION_ROLES",
    "BASELINE_METHOD",
    "DEFAULT_SPLITS",
    "EXPERIMENTS",
    "Evaluation",
    "FROZEN_METHOD",
    "NEVER_MATCHES",
    "REFERENCE_METHOD",
    "ZEROSHOT_ROW",
    "Run",
    "all_evaluations",
    "all_runs",
    "benchmark_splits",
    "dynamics_figure_cells",
    "epoch_cells",
    "epoch_eval_benchmarks",
    "epoch_evaluated_runs",
    "epoch_readers",
    "experiment_spec",
    "fetched_benchmark",
    "format_number",
    "is_zeroshot",
    "main_comparison",
    "plain_runs",
    "probe_readers",
    "probed_runs",
    "regime_benchmarks",
    "report_run_logs",
    "run_settings",
    "self_evaluated_train_sets",
    "spec_digest",
    "competitor_key",
    "spec_roles",
    "spec_text",
    "train_overrides",
    "transfer_targets",
    "wildcard_pattern",
    "write_spec",
    "write_spec_file",
    "zeroshot_eval_benchmarks",
    "zeroshot_eval_path",
    "zeroshot_run",
]

