# Retrieval of one finished run (or of the backbone before fine-tuning: the zero-shot row) on one
# benchmark's test split (in-domain or transfer).


rule evaluate:
    input:
        model=f"{paths.run_dir()}/model",
        manifest="results/data/{eval_benchmark}/test.csv",
        images="results/data/{eval_benchmark}/test_images",
    output:
        paths.eval_path(),
    log:
        paths.log_path("evaluate", f"{paths.RUN}/{{eval_benchmark}}"),
    benchmark:
        paths.benchmark_path("evaluate", f"{paths.RUN}/{{eval_benchmark}}")
    conda:
        "../../envs/train.yaml"
    threads: get_threads("evaluate")
    resources:
        **get_resources("evaluate"),
    params:
        run=get_run_info,
        batch_size=lookup(dpath="evaluate/batch_size", within=config),
    shell:
        "python -m hnclip evaluate --model {input.model} --manifest {input.manifest} --images {input.images} "
        "--eval-benchmark {wildcards.eval_benchmark} --run-info {params.run:q} "
        "--batch-size {params.batch_size} --threads {threads} --out {output} 2> {log}"


rule evaluate_zeroshot:
    input:
        model="results/backbone/model",
        manifest="results/data/{eval_benchmark}/test.csv",
        images="results/data/{eval_benchmark}/test_images",
    output:
        paths.zeroshot_eval_path(),
    log:
        paths.log_path("evaluate", "zeroshot/{eval_benchmark}"),
    benchmark:
        paths.benchmark_path("evaluate", "zeroshot/{eval_benchmark}")
    conda:
        "../../envs/train.yaml"
    threads: get_threads("evaluate")
    resources:
        **get_resources("evaluate"),
    params:
        run=json.dumps(plan.zeroshot_run(config)),
        batch_size=lookup(dpath="evaluate/batch_size", within=config),
    shell:
        "python -m hnclip evaluate --model {input.model} --manifest {input.manifest} --images {input.images} "
        "--eval-benchmark {wildcards.eval_benchmark} --run-info {params.run:q} "
        "--batch-size {params.batch_size} --threads {threads} --out {output} 2> {log}"
