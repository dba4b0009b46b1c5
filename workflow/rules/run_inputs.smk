# One run's jobs: the run behind a train job's wildcards, its inputs and options (epoch evaluations,
# products, its own test split, torchrun), its evaluations, the tuning job's inputs, a fetch job's files, and
# the resources and threads of each kind of job. Included after common.smk, before the rules.


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


def get_run_evaluations(wildcards):
    """Every evaluation record of the run the DAG produces (in-domain and transfer): the card's rows."""
    path = run_of(wildcards).path
    return [e.path for e in EVALUATIONS if e.run.path == path]


def get_tune_inputs(wildcards):
    """The backbone, the tuning benchmark's train and scoring splits, and every product the tuned methods'
    frameworks train on; without a tuning section, one line naming the key."""
    try:
        section = require_tuning(config)
    except ConfigError as error:
        raise ConfigError(str(error)) from None
    bench, split = section["benchmark"], section["split"]
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
