# One fine-tuning run per (train_set, method, gamma, fraction, seed). Resumable checkpoints go to
# results/checkpoints/, which is not a declared output: Snakemake deletes declared outputs before a
# rerun, and a requeued job must find its last checkpoint.
#
# A run on a benchmark with its own test split (hnclip.plan.self_evaluated_train_sets) is evaluated on
# that split by its training job, once the model is saved: the same `evaluate_checkpoint` on the same
# saved folder an evaluate job would run, in the process that already imported torch and open_clip
# (an evaluate job on the toy is two thirds imports: benchmarks/README.md, "startup_cost.py"). Its
# evaluation record is therefore an output of `train` (ruleorder below); every other evaluation
# (transfer benchmarks, a train set without a test split such as VG paragraphs, whose runs train in
# `train_without_test`) stays one evaluate job each. The evaluation runs at the training job's
# threads and device (resources.train), where an evaluate job would use resources.evaluate's.

# what both training rules write (the evaluation record is the self-evaluating rule's alone)
TRAIN_OUTPUTS = dict(
    summary=f"{paths.run_dir()}/summary.json",
    dynamics=f"{paths.run_dir()}/dynamics.csv",
    epochs=f"{paths.run_dir()}/epochs.csv",
    epoch_ranks=f"{paths.run_dir()}/epoch_ranks.csv",
    model=directory(f"{paths.run_dir()}/model"),
)

TRAIN_PARAMS = dict(
    overrides=get_train_overrides,
    subset=lambda w, input: f"--subset {input.subset}" if input.subset else "",
    epoch_eval=get_epoch_eval_args,
    products=lambda w, input: " ".join(
        f"--product {name}={input[name]}" for name in get_product_names(w)
    ),
    launcher=get_train_launcher(),
    out_dir=lambda w, output: Path(output.summary).parent,
    checkpoint_dir=paths.checkpoint_dir(),
)


rule train:
    input:
        unpack(get_train_inputs),
        test_manifest="results/data/{train_set}/test.csv",
        test_images="results/data/{train_set}/test_images",
    output:
        **TRAIN_OUTPUTS,
        evaluation=paths.eval_path(paths.RUN, "{train_set}"),
    log:
        paths.log_path("train", paths.RUN),
    benchmark:
        paths.benchmark_path("train", paths.RUN)
    wildcard_constraints:
        train_set=plan.wildcard_pattern(SELF_EVALUATED),
    conda:
        "../../envs/train.yaml"
    threads: get_threads("train")
    resources:
        **get_resources("train"),
    params:
        **TRAIN_PARAMS,
        own_test=get_own_test_args,
    shell:
        "{params.launcher} train --init {input.model} --manifest {input.manifest} --images {input.images} "
        "{params.subset} {params.epoch_eval} --out {params.out_dir} "
        "--checkpoint-dir {params.checkpoint_dir} --threads {threads} {params.products} "
        "{params.own_test} {params.overrides} 2> {log}"


use rule train as train_without_test with:
    input:
        unpack(get_train_inputs),
    output:
        **TRAIN_OUTPUTS,
    wildcard_constraints:
        train_set=plan.wildcard_pattern(
            b for b in BENCHMARKS if b not in SELF_EVALUATED
        ),
    params:
        **TRAIN_PARAMS,
        own_test="",


# a run's evaluation on its own train set's test split is its training job's (see the top of this file)
ruleorder: train > evaluate
