# Config validation, the jobs' shell prefix, the config's run and evaluation lists, wildcard constraints, and
# what rule all, the claims and the report read. The rules' other small get_* functions are in
# run_inputs.smk, table_inputs.smk and backbone_inputs.smk, the onstart/onerror hooks in hooks.smk.
# Which runs each experiment needs is decided in hnclip.plan (testable without Snakemake).
import copy
import hashlib
import json
import os
import shlex
import sys
from pathlib import Path

from snakemake.logging import logger

# The workflow's own src/ is the code every job runs (`python -m hnclip` with src/ on PYTHONPATH),
# so neither .venv nor a rule's conda environment needs the project installed (envs/ hold dependencies
# only). Without --use-conda, `python` is the one running Snakemake (.venv/bin), found even when the venv
# is not activated; with it, each rule's own environment must come first on PATH, so PATH is left alone.
SRC = Path(workflow.basedir) / "src"
sys.path.insert(0, str(SRC))
_use_conda = "conda" in {
    str(m).lower() for m in workflow.deployment_settings.deployment_method
}
# (Snakemake formats the prefix like a shell command: the shell's own braces are doubled.)
_SHELL_PREFIX = (
    f'set -euo pipefail; export PYTHONPATH="{SRC}${{{{PYTHONPATH:+:$PYTHONPATH}}}}"; '
    + ("" if _use_conda else f'export PATH="{Path(sys.executable).parent}:$PATH"; ')
)
from hnclip import (
    cpu_kernels,
    job_errors,
    paths,
    plan,
    protocols,
    released,
    run_lock,
)  # noqa: E402
from hnclip.data import own  # noqa: E402
from hnclip.config.validation import ConfigError, validate_config  # noqa: E402
from hnclip.config_checks import check_config, config_warnings  # noqa: E402
from hnclip.tuning.section import require_tuning  # noqa: E402
from hnclip.checkpoint_formats import backbone_origin  # noqa: E402
from hnclip.frameworks.registry import framework_entry  # noqa: E402
from hnclip.experiments import figured_experiments, report_figures  # noqa: E402
from hnclip.config.train import override_items  # noqa: E402

if workflow.config_settings.configfiles:
    # A --configfile is a complete configuration (config/paper.yaml, a test's micro config): it replaces
    # the embedded default instead of being merged into it, which would leave the synthetic benchmarks
    # and toy experiments in the paper grid. Several --configfile layer in order (a later file's keys
    # win, mappings merge, lists are replaced); --config key=value overrides apply on top.
    config.clear()
    config.update(copy.deepcopy(workflow.config_settings.overwrite_config))

try:
    validate_config(
        config,
        Path(workflow.basedir) / "workflow/schemas/config.schema.yaml",
        overrides=workflow.config_settings.config,
    )
    # the planning process may ask the Hub whether a models: entry exists; a job's own parse never waits on it
    check_config(config, probe_hub=workflow.is_main_process)
    for warning in config_warnings(config):
        logger.warning(f"hnclip: {warning}")
except ConfigError as error:
    # raised afresh here, so Snakemake prints the message and this line, not a traceback into src/
    raise ConfigError(str(error)) from None

# Every job's shell also exports the config's CPU kernel pinning, which `python -m hnclip` applies before
# torch loads (hnclip.cpu_kernels: the same weights on any x86-64 machine with AVX2 under `avx2`).
shell.prefix(
    _SHELL_PREFIX
    + f"export {cpu_kernels.ENV_SETTING}={shlex.quote(config['cpu_kernels'])}; "
)

RUNS = plan.all_runs(config)
# the runs whose gradient-probe columns the report reads (every run under train.probe_runs: all)
PROBED = plan.probed_runs(config)
# the runs whose per-epoch retrieval the report reads (every run under train.epoch_eval_runs: all)
EPOCH_EVALUATED = plan.epoch_evaluated_runs(config)
EVALUATIONS = plan.all_evaluations(config)
# the backbone before fine-tuning: the first row of the main and transfer tables
ZEROSHOT_EVALUATIONS = [
    plan.zeroshot_eval_path(b) for b in plan.zeroshot_eval_benchmarks(config)
]
# the protocol table's cells: the main models under every published test-split variant (protocols.smk)
PROTOCOL_SPEC = protocols.protocol_spec(config)
BENCHMARKS = list(config["benchmarks"])
# train sets with their own test split: their runs' training jobs evaluate them there (train.smk)
SELF_EVALUATED = plan.self_evaluated_train_sets(config)
# benchmarks with a zero-shot evaluation and plain fine-tuning runs: their regime conditions (analysis.smk);
# none on your own data, where no paper claim is judged
OWN_DATA = config["scale"] == "own"
REGIME_BENCHMARKS = [] if OWN_DATA else plan.regime_benchmarks(config)
# the released checkpoints' evaluations (config models:, released.smk)
RELEASED_EVALUATIONS = [
    released.released_eval_path(m, b) for m, b in released.released_evaluations(config)
]


wildcard_constraints:
    benchmark=plan.wildcard_pattern(BENCHMARKS),
    train_set=plan.wildcard_pattern(BENCHMARKS),
    eval_benchmark=plan.wildcard_pattern(BENCHMARKS),
    method=plan.wildcard_pattern(config["methods"]),
    model=plan.wildcard_pattern(config["models"]),
    # no experiment configured: a pattern that matches nothing, so no spec or table rule can apply
    experiment=plan.wildcard_pattern(config["experiments"]),
    split="train|val|test",
    gamma=r"[0-9]+(\.[0-9]+)?",
    fraction=r"[0-9]+(\.[0-9]+)?(e-[0-9]+)?",
    seed=r"[0-9]+",


def get_final_output():
    """The report, and every evaluation (runs', the zero-shot backbone's, the released checkpoints', each protocol
    variant's) and run summary, so a deleted one is rebuilt (the report alone would not ask for them again while
    the tables built from them exist). On your own data (scale own): no summary of the paper's regime and claims
    and no protocol variants, but the main table's models exported with their cards (config export.formats).
    """
    outputs = [
        paths.REPORT,
        *(e.path for e in EVALUATIONS),
        *ZEROSHOT_EVALUATIONS,
        *RELEASED_EVALUATIONS,
        *get_summaries(),
    ]
    if OWN_DATA:
        return (
            outputs + get_exports() + ([paths.SUMMARY_MD] if is_active("main") else [])
        )
    return outputs + [paths.SUMMARY_MD, *protocol_eval_paths()]


def is_active(experiment):
    return experiment in config["experiments"]


def spec_path(experiment):
    return paths.spec_path(experiment)


def get_claims_inputs():
    """Everything `hnclip claims` reads: the experiments' specs, the evaluation records their cells point
    to, the premise measurements and the run logs the claims read beside them (per-epoch claims,
    gradient-ratio peak). The report declares the first three from here too."""
    specs = {e: plan.experiment_spec(config, e) for e in config["experiments"]}
    run_logs = plan.report_run_logs(specs)
    return {
        "specs": [spec_path(e) for e in config["experiments"]],
        "evals": sorted({p for e in config["experiments"] for p in eval_paths(e)}),
        "premise": paths.PREMISE,
        "run_logs": [p for logs in run_logs.values() for p in logs],
        # read beside each epochs.csv (hnclip.analysis.records.load_epoch_outcomes), found by its run folder
        "epoch_ranks": [
            p.removesuffix("epochs.csv") + "epoch_ranks.csv" for p in run_logs["epochs"]
        ],
    }


def own_figures():
    """The figures of a report on your own data: R@1 per epoch (zero-shot as a line), loss and learning rate per
    step, and, where the main experiment trains HN-CLIP beside plain fine-tuning, the retrieval gallery of the
    captions whose rank changed most."""
    if not is_active("main"):
        return []
    figures = [paths.figure_path("epochs"), paths.figure_path("training")]
    methods = config["experiments"]["main"].get("methods", [])
    roles = plan.spec_roles()
    if roles["reference"] in methods and roles["baseline"] in methods:
        figures.append(paths.figure_path("gallery"))
    return figures


def get_summary_inputs():
    """What `hnclip summary` reads: the regime files, the claims, the backbone and the tuning check; on your own data (scale own) the
    main spec, its evaluation records, the runs' per-epoch ranks (the last epoch's rise), the test splits (the
    changed captions' text) and the backbone."""
    if OWN_DATA:
        return {
            "spec": spec_path("main"),
            "evals": eval_paths("main"),
            "epoch_ranks": [f"{d}/epoch_ranks.csv" for d in spec_runs("main")],
            "test_manifests": [
                paths.manifest_path(b, "test")
                for b in config["experiments"]["main"]["benchmarks"]
            ],
            "backbone": paths.BACKBONE_MODEL,
        }
    return {
        "regime": [paths.regime_path(b) for b in REGIME_BENCHMARKS],
        "claims": paths.CLAIMS,
        "backbone": paths.BACKBONE_MODEL,
        # the tuning record and the config it is checked against: the summary's tuning line
        **tuning_check_inputs(),
    }


def get_summary_args(wildcards, input):
    """`hnclip summary`'s inputs as options (the keys of get_summary_inputs but epoch_ranks, read beside the spec's
    runs)."""
    keys = [k for k in input.keys() if k != "epoch_ranks"]
    return " ".join(
        f"--{k.replace('_', '-')} "
        + (
            " ".join(map(str, input[k]))
            if isinstance(input[k], list)
            else str(input[k])
        )
        for k in keys
    )


def get_report_inputs():
    """Everything the report shows: the claims' verdicts (results/claims.json), the specs, evaluation
    records and premise measurements the claims were judged on, and every table, figure, geometry, run
    summary and regime file; an experiment absent from the config drops its spec, table and figures, and
    a config without runs drops the cost table. On your own data (scale own): the specs, their records, the
    tables (the experiments', per-epoch retrieval, cost, released checkpoints), the per-epoch figure, the run
    summaries and the backbone (what it was converted from): no claims, premise, regime or geometry.
    """
    tables = [paths.table_path(e) for e in config["experiments"]]
    if RUNS:
        tables.append(paths.table_path("cost"))
    if config["models"]:
        tables.append(paths.table_path("released"))
    if OWN_DATA:
        if is_active("main"):
            tables.append(paths.table_path("epochs"))
        return {
            "specs": [spec_path(e) for e in config["experiments"]],
            "evals": sorted({p for e in config["experiments"] for p in eval_paths(e)}),
            "tables": tables,
            "figures": own_figures(),
            "summaries": get_summaries(),
            "backbone": paths.BACKBONE_MODEL,
            **({"own_summary": paths.SUMMARY_JSON} if is_active("main") else {}),
        }
    claims = get_claims_inputs()
    if is_active("main"):
        tables += [paths.table_path("epochs"), paths.table_path("convergence")]
    if is_active("main") or is_active("transfer"):
        tables.append(paths.table_path("protocols"))
    # each configured experiment's figures, as its registration row declares them (hnclip.experiments)
    figures = [paths.figure_path(f) for f in report_figures(config["experiments"])]
    geometry = [paths.geometry_path(b) for b in BENCHMARKS]
    figures += [paths.figure_path(f"geometry_{b}") for b in BENCHMARKS]
    return {
        "claims": paths.CLAIMS,
        "specs": claims["specs"],
        "evals": claims["evals"],
        "premise": claims["premise"],
        "tables": tables,
        "figures": figures,
        "geometry": geometry,
        "summaries": get_summaries(),
        "regime": [paths.regime_path(b) for b in REGIME_BENCHMARKS],
        **tuning_check_inputs(),
    }


def tuning_check_inputs(wildcards=None):
    """The tuning record the rates came from, and the config they are checked against (the report's tuning
    section, the summary's tuning line); none without a tuning section."""
    if not config.get("tuning"):
        return {}
    return {
        "tuning": shipped_path(config["tuning"]["record"]),
        "effective_config": paths.EFFECTIVE_CONFIG,
    }
