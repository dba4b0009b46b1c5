# Released checkpoints a config evaluates (config `models:`, hnclip.released): each converted once, given an image
# store in its own geometry per benchmark (linked from the benchmark's store when that is the same), scored with
# the paper's protocol, and shown in the released-checkpoints table beside the main table's rows.


rule convert_released:
    output:
        directory("results/released/{model}/model"),
    log:
        "results/logs/released/{model}/convert.log",
    conda:
        "../../envs/train.yaml"
    params:
        options=lambda w: released.convert_options(config, w.model),
    shell:
        "python -m hnclip convert-checkpoint {params.options} --key models.{wildcards.model} --out {output} "
        "2> {log}"


rule store_released:
    input:
        model="results/released/{model}/model",
        manifest="results/data/{eval_benchmark}/test.csv",
        images="results/data/{eval_benchmark}/test_images",
    output:
        directory("results/released/{model}/data/{eval_benchmark}/test_images"),
    log:
        "results/logs/released/{model}/store_{eval_benchmark}.log",
    conda:
        "../../envs/train.yaml"
    resources:
        **get_resources("prepare"),
    shell:
        "python -m hnclip store --manifest {input.manifest} --model {input.model} --like {input.images} "
        "--out {output} 2> {log}"


rule evaluate_released:
    input:
        model="results/released/{model}/model",
        manifest="results/data/{eval_benchmark}/test.csv",
        images="results/released/{model}/data/{eval_benchmark}/test_images",
    output:
        "results/evals/released/{model}/{eval_benchmark}.json",
    log:
        "results/logs/evaluate/released/{model}/{eval_benchmark}.log",
    benchmark:
        "results/benchmarks/evaluate/released/{model}/{eval_benchmark}.tsv"
    conda:
        "../../envs/train.yaml"
    threads: get_threads("evaluate")
    resources:
        **get_resources("evaluate"),
    params:
        run=lambda w: json.dumps(released.released_run(w.model)),
        batch_size=lookup(dpath="evaluate/batch_size", within=config),
    shell:
        "python -m hnclip evaluate --model {input.model} --manifest {input.manifest} --images {input.images} "
        "--eval-benchmark {wildcards.eval_benchmark} --run-info {params.run:q} "
        "--batch-size {params.batch_size} --threads {threads} --out {output} 2> {log}"


rule spec_released:
    output:
        spec="results/specs/released.json",
    log:
        "results/logs/specs/released.log",
    localrule: True
    params:
        # as the spec rule's digest: a config change that changes the table's cells rewrites the file
        digest=lambda w: released.released_spec_digest(config),
    run:
        released.write_released_spec(config, output.spec, log=log[0])


rule table_released:
    input:
        spec="results/specs/released.json",
        evals=released_table_evals(),
        summaries=released_run_summaries(),
    output:
        report(
            "results/tables/released.html",
            caption="../report/table.rst",
            category="Tables",
            labels={"table": "released"},
        ),
        csv="results/tables/released.csv",
        md="results/tables/released.md",
        tex="results/tables/released.tex",
    log:
        "results/logs/tables/released.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        prefix=lambda w, output: output.csv.removesuffix(".csv"),
    shell:
        "python -m hnclip table --spec {input.spec} --out-prefix {params.prefix} 2> {log}"
