# One fine-tuning run per (train_set, method, gamma, fraction, seed). Resumable checkpoints go to
# results/checkpoints/, which is not a declared output: Snakemake deletes declared outputs before a
# rerun, and a requeued job must find its last checkpoint.


rule train:
    input:
        unpack(get_epoch_eval),
        unpack(get_products),
        model="results/backbone/model",
        manifest="results/data/{train_set}/train.csv",
        images="results/data/{train_set}/train_images",
        subset=get_subset,
    output:
        summary="results/runs/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}/summary.json",
        dynamics="results/runs/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}/dynamics.csv",
        epochs="results/runs/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}/epochs.csv",
        epoch_ranks="results/runs/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}/epoch_ranks.csv",
        model=directory(
            "results/runs/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}/model"
        ),
    log:
        "results/logs/train/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}.log",
    benchmark:
        "results/benchmarks/train/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}.tsv"
    conda:
        "../../envs/train.yaml"
    threads: get_threads("train")
    resources:
        **get_resources("train"),
    params:
        overrides=get_train_overrides,
        subset=lambda w, input: f"--subset {input.subset}" if input.subset else "",
        epoch_eval=lambda w, input: (
            f"--eval-manifest {input.eval_manifest} --eval-images {input.eval_images}"
            if "eval_manifest" in input.keys()
            else ""
        ),
        products=lambda w, input: " ".join(
            f"--product {name}={input[name]}" for name in get_product_names(w)
        ),
        launcher=get_train_launcher(),
        out_dir=lambda w, output: Path(output.summary).parent,
        checkpoint_dir="results/checkpoints/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}",
    shell:
        "{params.launcher} train --init {input.model} --manifest {input.manifest} --images {input.images} "
        "{params.subset} {params.epoch_eval} --out {params.out_dir} "
        "--checkpoint-dir {params.checkpoint_dir} --threads {threads} {params.products} "
        "{params.overrides} 2> {log}"
