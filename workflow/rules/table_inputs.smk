# What the tables, figures, regime and export jobs read: an experiment's cells, evaluations and run summaries,
# the released-checkpoints and protocol tables' records, the jobs' benchmark TSVs, the regime's inputs.
# Included after common.smk, before the rules.


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


def get_exports():
    """results/exports/<run>/<format>/ of every main-table run, per configured format."""
    if not is_active("main"):
        return []
    return [
        paths.export_dir(paths.run_of_dir(d), fmt)
        for d in spec_runs("main")
        for fmt in config["export"]["formats"]
    ]
