# Raw benchmark files -> manifests + image stores -> nested training subsets.


rule fetch_benchmark:
    output:
        "results/data/{benchmark}/source.json",
    log:
        "results/logs/fetch_benchmark/{benchmark}.log",
    localrule: True
    conda:
        "../../envs/data.yaml"
    params:
        root=lambda w: config["benchmarks"][w.benchmark]["root"],
        adapter=lambda w: config["benchmarks"][w.benchmark]["adapter"],
        settings=lambda w: json.dumps(config["benchmarks"][w.benchmark]),
    shell:
        "hnclip fetch --benchmark {wildcards.benchmark} --adapter {params.adapter} "
        "--root {params.root} --settings {params.settings:q} --out {output} 2> {log}"


rule prepare:
    input:
        "results/data/{benchmark}/source.json",
    output:
        manifest="results/data/{benchmark}/{split}.csv",
        images=directory("results/data/{benchmark}/{split}_images"),
    log:
        "results/logs/prepare/{benchmark}_{split}.log",
    benchmark:
        "results/benchmarks/prepare/{benchmark}_{split}.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        **get_resources("prepare"),
    params:
        image_size=lookup(dpath="backbone/image_size", within=config),
    shell:
        "hnclip prepare --source {input} --split {wildcards.split} --image-size {params.image_size} "
        "--manifest {output.manifest} --images {output.images} 2> {log}"


rule subset:
    input:
        "results/data/{benchmark}/train.csv",
    output:
        "results/data/{benchmark}/subsets/f{fraction}_s{seed}.txt",
    log:
        "results/logs/subset/{benchmark}_f{fraction}_s{seed}.log",
    conda:
        "../../envs/data.yaml"
    shell:
        "hnclip subset --manifest {input} --fraction {wildcards.fraction} --seed {wildcards.seed} "
        "--out {output} 2> {log}"
