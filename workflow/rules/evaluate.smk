# Retrieval of one finished run (or of the backbone before fine-tuning: the zero-shot row) on one
# benchmark's test split (in-domain or transfer).


rule evaluate:
    input:
        model="results/runs/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}/model",
        manifest="results/data/{eval_benchmark}/test.csv",
        images="results/data/{eval_benchmark}/test_images",
    output:
        "results/evals/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}/{eval_benchmark}.json",
    log:
        "results/logs/evaluate/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}/{eval_benchmark}.log",
    benchmark:
        "results/benchmarks/evaluate/{train_set}/{method}/g{gamma}/f{fraction}/s{seed}/{eval_benchmark}.tsv"
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
        "results/evals/zeroshot/{eval_benchmark}.json",
    log:
        "results/logs/evaluate/zeroshot/{eval_benchmark}.log",
    benchmark:
        "results/benchmarks/evaluate/zeroshot/{eval_benchmark}.tsv"
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
