# Config validation, wildcard constraints and the small get_* functions the rules use.
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
from hnclip.checkpoint_formats import backbone_origin  # noqa: E402
from hnclip.frameworks.registry import framework_entry  # noqa: E402
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
        return outputs + get_exports()
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
            "figures": [paths.figure_path("epochs")] if is_active("main") else [],
            "summaries": get_summaries(),
            "backbone": paths.BACKBONE_MODEL,
        }
    claims = get_claims_inputs()
    figures = []
    if is_active("main"):
        tables += [paths.table_path("epochs"), paths.table_path("convergence")]
        figures += [
            paths.figure_path("epochs"),
            paths.figure_path("convergence"),
            paths.figure_path("gallery"),
        ]
    if is_active("main") or is_active("transfer"):
        tables.append(paths.table_path("protocols"))
    if is_active("fractions"):
        figures += [paths.figure_path("dynamics"), paths.figure_path("fractions")]
    if is_active("gamma_sweep"):
        figures.append(paths.figure_path("gamma_sweep"))
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
        # the tuning record the rates came from, and the config they are checked against
        **(
            {
                "tuning": shipped_path(config["tuning"]["record"]),
                "effective_config": paths.EFFECTIVE_CONFIG,
            }
            if config.get("tuning")
            else {}
        ),
    }


def run_of(wildcards):
    return plan.Run(
        wildcards.train_set,
        wildcards.method,
        wildcards.gamma,
        wildcards.fraction,
        int(wildcards.seed),
    )


def get_run_info(wildcards):
    """The run's record as JSON, for `hnclip train/evaluate --run-info` (written into each evaluation)."""
    return json.dumps(run_of(wildcards).info())


def get_train_overrides(wildcards):
    return " ".join(
        f"--set {item}"
        for item in plan.train_overrides(
            config, run_of(wildcards), probed=PROBED, epoch_evaluated=EPOCH_EVALUATED
        )
    )


def get_subset(wildcards):
    if float(wildcards.fraction) == 1.0:
        return []
    return paths.subset_path(wildcards.train_set, wildcards.fraction, wildcards.seed)


def get_epoch_eval(wildcards):
    """The test splits evaluated after each epoch (the epochs and convergence tables, the per-epoch claims):
    every benchmark whose runs train on the run's train set (hnclip.plan.epoch_eval_benchmarks), for the runs
    whose epochs.csv the report reads (train.epoch_eval_runs)."""
    benches = plan.epoch_eval_benchmarks(config, wildcards.train_set)
    if not benches or run_of(wildcards) not in EPOCH_EVALUATED:
        return {}
    return {
        "eval_manifest": [paths.manifest_path(b, "test") for b in benches],
        "eval_images": [paths.images_dir(b, "test") for b in benches],
    }


def get_epoch_eval_args(wildcards, input):
    """`hnclip train`'s options for the per-epoch evaluations: one --eval-benchmark, --eval-manifest and
    --eval-images per test split of get_epoch_eval."""
    if "eval_manifest" not in input.keys():
        return ""
    benches = plan.epoch_eval_benchmarks(config, wildcards.train_set)
    manifests, images = (
        [paths] if isinstance(paths, str) else list(paths)
        for paths in (input.eval_manifest, input.eval_images)
    )
    return " ".join(
        f"--eval-benchmark {b} --eval-manifest {m} --eval-images {i}"
        for b, m, i in zip(benches, manifests, images, strict=True)
    )


def get_train_inputs(wildcards):
    """What every training job reads: the backbone, its training split (and fraction subset), the cached
    preprocessing its framework needs, and the per-epoch evaluation's test split where the report reads
    it."""
    return {
        **get_epoch_eval(wildcards),
        **get_products(wildcards),
        "model": paths.BACKBONE_MODEL,
        "manifest": paths.manifest_path(wildcards.train_set, "train"),
        "images": paths.images_dir(wildcards.train_set, "train"),
        "subset": get_subset(wildcards),
    }


def get_own_test_args(wildcards, input, output):
    """`hnclip train`'s options for evaluating the saved run on its train set's own test split, with what
    an evaluate job would be given (the run's record, evaluate.batch_size)."""
    return (
        f"--test-manifest {input.test_manifest} --test-images {input.test_images} "
        f"--test-benchmark {wildcards.train_set} --test-out {output.evaluation} "
        f"--run-info {shlex.quote(get_run_info(wildcards))} "
        f"--test-batch-size {config['evaluate']['batch_size']}"
    )


def get_product_names(wildcards):
    framework = config["methods"][wildcards.method]["framework"]
    return framework_entry(framework).products


def get_products(wildcards):
    """Cached preprocessing the run's framework trains on (GOAL: segments; StructXLIP: + edges)."""
    return {
        name: paths.product_dir(wildcards.train_set, name)
        for name in get_product_names(wildcards)
    }


def get_train_launcher():
    """How a training job starts `hnclip`: several GPUs per job (resources.train.gpu > 1) get one process
    per GPU through torchrun; the configured micro-batch is then the global one, split evenly.
    """
    gpus = int(config["resources"]["train"].get("gpu", 0) or 0)
    if gpus <= 1:
        return "python -m hnclip"
    return f"torchrun --standalone --nproc-per-node {gpus} -m hnclip"


def get_own_files(wildcards):
    """Your own captions' tables or shards (adapters table and webdataset): inputs of the fetch rule, so an
    edited one fetches and prepares the benchmark again; none for the other adapters."""
    name = wildcards.benchmark
    bench = config["benchmarks"][name]
    if bench["adapter"] not in own.ADAPTERS:
        return []
    files = own.split_files(
        bench["adapter"], bench["root"], bench[bench["adapter"]], name
    )
    return sorted({str(p) for paths in files.values() for p in paths})


def get_files_of(wildcards):
    """The source record of the benchmark whose files this one reads (its files_from), fetched first;
    none for a benchmark that fetches its own."""
    source = plan.fetched_benchmark(config, wildcards.benchmark)
    return [] if source == wildcards.benchmark else paths.source_record_path(source)


def get_resources(kind):
    """Snakemake resources of a kind of job, from `resources.<kind>` less `threads` (a job's threads
    are no resource; `get_threads` reads them)."""
    return {k: v for k, v in config["resources"][kind].items() if k != "threads"}


def get_threads(kind):
    """Threads of a kind of job, from `resources.<kind>.threads`, 1 by default (beside a GPU a job needs
    one core); `all` is every core given with --cores, for a CPU-only machine where the default profile
    runs the GPU-declared jobs one at a time (the rehearsal)."""
    threads = config["resources"][kind].get("threads", 1)
    return workflow.cores if threads == "all" else int(threads)


def experiment_cells(experiment):
    """The cells of an experiment's spec (none when the experiment is not configured)."""
    if not is_active(experiment):
        return []
    return plan.experiment_spec(config, experiment)["cells"]


def eval_paths(experiment):
    """Evaluation JSONs one experiment's table reads."""
    return sorted({c["eval_path"] for c in experiment_cells(experiment)})


def spec_runs(experiment):
    """Run folders of an experiment's cells (figures that read per-run logs); the zero-shot row has none."""
    return sorted(
        {c["run_dir"] for c in experiment_cells(experiment) if not plan.is_zeroshot(c)}
    )


def run_summaries(experiment):
    """summary.json of each run behind an experiment's cells: a table row carries their config hashes."""
    return [f"{d}/summary.json" for d in spec_runs(experiment)]


def get_experiment_inputs(wildcards):
    return {
        "spec": spec_path(wildcards.experiment),
        "evals": eval_paths(wildcards.experiment),
        "summaries": run_summaries(wildcards.experiment),
    }


def released_table_evals():
    """Evaluation records the released-checkpoints table reads: the released models' and, beside them, the main
    table's rows on the benchmarks they are scored on (none without models:)."""
    if not config["models"]:
        return []
    return sorted({c["eval_path"] for c in released.released_spec(config)["cells"]})


def released_run_summaries():
    """summary.json of each retrained run the released-checkpoints table shows (its lines carry their hashes)."""
    if not config["models"]:
        return []
    return sorted(
        {
            f"{c['run_dir']}/summary.json"
            for c in released.released_spec(config)["cells"]
            if c.get("run_dir")
        }
    )


def protocol_eval_paths():
    """Evaluation JSONs the protocol table reads: the paper's split's (shared with main and transfer) and
    each test-split variant's (results/protocols/...)."""
    return sorted({c["eval_path"] for c in PROTOCOL_SPEC["cells"]})


def protocol_run_summaries():
    """summary.json of each run the protocol table scores (its lines carry their config hashes)."""
    return sorted(
        {f"{c['run_dir']}/summary.json" for c in PROTOCOL_SPEC["cells"] if c["run_dir"]}
    )


def get_summaries(runs=None):
    return [
        f"{paths.run_dir(r.path)}/summary.json"
        for r in (RUNS if runs is None else runs)
    ]


def get_benchmark_files():
    return [paths.benchmark_path("train", r.path) for r in RUNS]


def get_preprocess_benchmark_files():
    """The Snakemake benchmark TSVs of the preprocessing jobs the runs need (segments, edges per train set):
    the cost table adds them to GOAL's and StructXLIP's training time."""
    products = {
        (name, r.train_set)
        for r in RUNS
        for name in framework_entry(config["methods"][r.method]["framework"]).products
    }
    return [
        paths.benchmark_path(name, train_set) for name, train_set in sorted(products)
    ]


def get_regime_inputs(wildcards):
    """What `hnclip regime` reads for one benchmark: the backbone, the train set's training manifest and
    the benchmark's test split, the zero-shot evaluation, the plain runs (summary, dynamics log, model,
    evaluation on the benchmark) and, where the main experiment compares HN-CLIP with Long-CLIP FT on
    it, the main spec and those evaluations."""
    bench = wildcards.benchmark
    runs = [paths.run_dir(r.path) for r in plan.plain_runs(config, bench)]
    inputs = {
        "backbone": paths.BACKBONE_MODEL,
        "train_manifest": paths.manifest_path(
            config["benchmarks"][bench]["train_set"], "train"
        ),
        "test_manifest": paths.manifest_path(bench, "test"),
        "test_images": paths.images_dir(bench, "test"),
        "zeroshot": plan.zeroshot_eval_path(bench),
        "summaries": [f"{d}/summary.json" for d in runs],
        "dynamics": [f"{d}/dynamics.csv" for d in runs],
        "models": [f"{d}/model" for d in runs],
        "evals": [
            plan.Evaluation(r, bench).path for r in plan.plain_runs(config, bench)
        ],
        "transfer": [
            plan.zeroshot_eval_path(t)
            for t in plan.transfer_targets(
                config, config["benchmarks"][bench]["train_set"]
            )
        ],
    }
    main = plan.main_comparison(config, bench)
    if main is not None:
        experiment, cells = main
        inputs["main_spec"] = spec_path(experiment)
        inputs["main_evals"] = sorted({c["eval_path"] for c in cells})
    return inputs


def geometry_split(benchmark):
    return (
        "train"
        if "train" in plan.benchmark_splits(config["benchmarks"][benchmark])
        else "test"
    )


def warn_on_local_gpu_cap(resources, local):
    """profiles/default caps GPU jobs at one at a time for a one-GPU machine; a cluster executor given
    with --profile still loads it (the workflow profile wins), which would run a grid one job at a time.
    """
    cap = resources.get("gpu")  # a snakemake Resource (value None when unset)
    if not local and getattr(cap, "value", cap) == 1:
        logger.warning(
            "hnclip: GPU jobs are capped at one at a time (resources: gpu: 1, from profiles/default) on a "
            "cluster executor; pass the cluster profile as --workflow-profile profiles/slurm instead of "
            "--profile, which replaces profiles/default."
        )


def refuse_running_trainers():
    """onstart: stop before any job when a live trainer holds the output folder of a job about to run.

    Snakemake deletes a job's outputs and log before its command starts, so a trainer's own lock
    (hnclip.run_lock) would refuse only after that damage; the second Snakemake of the README's
    "After a crash" (`--unlock` while the first still runs) is stopped here instead, naming the holder.
    """
    folders = {
        Path(path).parent
        for job in workflow.dag.needrun_jobs()
        for path in getattr(job, "output", ())
    }
    try:
        run_lock.refuse_held_folders(folders)
    except run_lock.RunLockedError as error:
        # raised afresh, so Snakemake prints the message and this line, not a traceback into src/
        raise run_lock.RunLockedError(str(error)) from None


def surface_job_errors(snakemake_logs):
    """onerror: each failed job's own error line (the last line of its log) on the console, so a refusal
    naming its config key is read where the run failed (hnclip.job_errors)."""
    for line in job_errors.job_error_lines(snakemake_logs):
        logger.error(f"hnclip: {line}")


def get_exports():
    """results/exports/<run>/<format>/ of every main-table run, per configured format."""
    if not is_active("main"):
        return []
    return [
        paths.export_dir(paths.run_of_dir(d), fmt)
        for d in spec_runs("main")
        for fmt in config["export"]["formats"]
    ]


def get_run_evaluations(wildcards):
    """Every evaluation record of the run the DAG produces (in-domain and transfer): the card's rows."""
    path = run_of(wildcards).path
    return [e.path for e in EVALUATIONS if e.run.path == path]


# what backbone.source is (hnclip.checkpoint_formats): released, pretrained in the DAG, or converted
BACKBONE_ORIGIN = backbone_origin(config)
# a backbone converted from open_clip or transformers brings its own geometry: the image stores are prepared
# after it, at its interpolation (data.smk)
ECOSYSTEM_BACKBONE = BACKBONE_ORIGIN.ecosystem


def backbone_convert_options():
    """`hnclip convert-checkpoint`'s options for the backbone (checkpoint, model, pins, stretch)."""
    backbone = config["backbone"]
    options = [
        ("--source", backbone["checkpoint"]),
        # only open_clip reads an architecture name; a transformers CLIPModel brings its own (config_warnings)
        (
            "--model",
            backbone.get("model") if BACKBONE_ORIGIN.reads_model else None,
        ),
        ("--revision", backbone["revision"]),
        ("--sha256", backbone["sha256"]),
    ]
    if backbone.get("stretch"):
        options.append(("--stretch", backbone["frozen_positions"]))
    return " ".join(
        f"{flag} {shlex.quote(str(value))}" for flag, value in options if value
    )


def get_prepare_inputs(wildcards):
    """What a prepare job reads: the benchmark's source record, and a converted backbone whose geometry (image
    size, interpolation) the store takes."""
    inputs = {"source": paths.source_record_path(wildcards.benchmark)}
    if ECOSYSTEM_BACKBONE:
        inputs["model"] = paths.BACKBONE_MODEL
    return inputs


def prepare_model_option(wildcards, input):
    return f"--model {input.model}" if "model" in input.keys() else ""


def backbone_folder():
    """The model folder install_backbone installs: the released one (backbone.checkpoint) or the DAG's own
    pretrained one (backbone.source pretrain). A relative released folder is read from the working
    directory, else from the repository beside the Snakefile (the shipped resources/backbones/), so a run
    in another --directory installs the shipped backbone too."""
    if BACKBONE_ORIGIN.ships_its_spec:
        return shipped_path(config["backbone"]["checkpoint"])
    return paths.PRETRAINED_MODEL


def shipped_path(path):
    """A file or folder the repository ships (a released backbone, the tuning record), named relative to the
    working directory: read there, else from the repository beside the Snakefile, so that a run in another
    --directory finds what the checkout ships."""
    path = Path(path)
    shipped = Path(workflow.basedir) / path
    if not path.is_absolute() and not path.exists() and shipped.exists():
        return str(shipped)
    return str(path)


def backbone_inputs():
    """install_backbone's inputs: the released folder's two files, or the pretrain stage's folder (a
    directory output, whose files cannot be named as inputs)."""
    if BACKBONE_ORIGIN.ships_its_spec:
        return [
            f"{backbone_folder()}/{name}"
            for name in ("model.safetensors", "model.json")
        ]
    return [backbone_folder()]


def pool_slice_options(slices):
    """`hnclip pool`'s slice options for pretrain.pool.slices (none when count is 0: the whole family)."""
    if not slices["count"]:
        return {}
    return {
        "slices": slices["count"],
        "slice_inventory": slices["inventory"],
        "slice_objects": " ".join(str(n) for n in slices["objects"]),
        "slice_backgrounds": slices["backgrounds"],
    }


def release_scored_splits():
    """Input key -> label of every split a release states zero-shot R@1 on: the pretrain benchmark's
    validation and test splits, and its train set's transfer targets' test splits."""
    bench = config["pretrain"]["benchmark"]
    splits = {
        f"{bench}_{s}": f"{bench}/{s}"
        for s in ("val", "test")
        if s in plan.benchmark_splits(config["benchmarks"][bench])
    }
    train_set = config["benchmarks"][bench].get("train_set") or bench
    for target in plan.transfer_targets(config, train_set):
        splits[f"{target}_test"] = f"{target}/test"
    return splits


def get_release_figure_inputs(wildcards):
    bench = config["pretrain"]["benchmark"]
    train_set = config["benchmarks"][bench].get("train_set") or bench
    inputs = {
        "model": paths.PRETRAINED_MODEL,
        "train_manifest": paths.manifest_path(train_set, "train"),
        "train_images": paths.images_dir(train_set, "train"),
    }
    for key, label in release_scored_splits().items():
        benchmark, split = label.split("/")
        inputs[f"{key}_manifest"] = paths.manifest_path(benchmark, split)
        inputs[f"{key}_images"] = paths.images_dir(benchmark, split)
    return inputs


def release_recipe():
    """What the released backbone is a function of: the pretrain recipe, the architecture settings, the
    first seed and the CPU kernel setting (the config hash its card records)."""
    return {
        "pretrain": config["pretrain"],
        "backbone": {
            k: config["backbone"][k]
            for k in ("name", "image_size", "context_length", "frozen_positions")
        },
        "seed": config["seeds"][0],
        "cpu_kernels": config["cpu_kernels"],
    }


def get_tune_inputs(wildcards):
    """The backbone, the tuning benchmark's train and scoring splits, and every product the tuned methods'
    frameworks train on."""
    bench = config["tuning"]["benchmark"]
    split = config["tuning"]["split"]
    products = sorted(
        {
            p
            for m in config["experiments"]["main"]["methods"]
            for p in framework_entry(config["methods"][m]["framework"]).products
        }
    )
    return {
        "model": paths.BACKBONE_MODEL,
        "manifest": paths.manifest_path(bench, "train"),
        "images": paths.images_dir(bench, "train"),
        "eval_manifest": paths.manifest_path(bench, split),
        "eval_images": paths.images_dir(bench, split),
        **{p: paths.product_dir(bench, p) for p in products},
    }
