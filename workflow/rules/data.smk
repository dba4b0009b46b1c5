# Raw benchmark files -> manifests + image stores -> nested training subsets.


rule fetch_benchmark:
    input:
        own=get_own_files,
        files_of=get_files_of,
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
        files_of=lambda w, input: (
            f"--files-of {input.files_of}" if input.files_of else ""
        ),
    shell:
        "python -m hnclip fetch --benchmark {wildcards.benchmark} --adapter {params.adapter} "
        "--root {params.root} --settings {params.settings:q} {params.files_of} --out {output} 2> {log}"


rule prepare:
    input:
        unpack(get_prepare_inputs),
    output:
        manifest="results/data/{benchmark}/{split}.csv",
        images=directory("results/data/{benchmark}/{split}_images"),
    log:
        "results/logs/prepare/{benchmark}_{split}.log",
    benchmark:
        "results/benchmarks/prepare/{benchmark}_{split}.tsv"
    conda:
        # the train environment: CLIP's tokenizer counts the captions cut at the text tower's positions
        "../../envs/train.yaml"
    resources:
        **get_resources("prepare"),
    params:
        image_size=lookup(dpath="backbone/image_size", within=config),
        context_length=lookup(dpath="backbone/context_length", within=config),
        model=prepare_model_option,
    shell:
        "python -m hnclip prepare --source {input.source} --split {wildcards.split} --image-size {params.image_size} "
        "--context-length {params.context_length} {params.model} --manifest {output.manifest} "
        "--images {output.images} 2> {log}"


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
        "python -m hnclip subset --manifest {input} --fraction {wildcards.fraction} --seed {wildcards.seed} "
        "--out {output} 2> {log}"


rule segments:
    input:
        manifest="results/data/{benchmark}/train.csv",
        source="results/data/{benchmark}/source.json",
        model="results/backbone/model",
    output:
        directory("results/data/{benchmark}/train_segments"),
    log:
        "results/logs/segments/{benchmark}.log",
    benchmark:
        "results/benchmarks/segments/{benchmark}.tsv"
    conda:
        "../../envs/train.yaml"
    threads: get_threads("evaluate")
    resources:
        **get_resources("evaluate"),
    params:
        segmenter=lookup(dpath="preprocess/segmenter", within=config),
        sam=lambda w: (
            f"--sam-model {config['preprocess']['sam_model']}"
            + (
                f" --sam-revision {config['preprocess']['sam_revision']}"
                if config["preprocess"]["sam_revision"]
                else ""
            )
            if config["preprocess"]["sam_model"]
            else ""
        ),
        min_area=lookup(dpath="preprocess/min_area_ratio", within=config),
        max_area=lookup(dpath="preprocess/max_area_ratio", within=config),
        max_pairs=lookup(dpath="preprocess/max_pairs", within=config),
        matcher=lookup(dpath="preprocess/matcher", within=config),
    shell:
        "python -m hnclip segments --manifest {input.manifest} --source {input.source} --model {input.model} "
        "--segmenter {params.segmenter} {params.sam} --min-area-ratio {params.min_area} "
        "--max-area-ratio {params.max_area} --max-pairs {params.max_pairs} --matcher {params.matcher} "
        "--threads {threads} "
        "--out {output} 2> {log}"


rule edges:
    input:
        images="results/data/{benchmark}/train_images",
        segments="results/data/{benchmark}/train_segments",
    output:
        directory("results/data/{benchmark}/train_edges"),
    log:
        "results/logs/edges/{benchmark}.log",
    benchmark:
        "results/benchmarks/edges/{benchmark}.tsv"
    conda:
        "../../envs/train.yaml"
    shell:
        "python -m hnclip edges --images {input.images} --segments {input.segments} --out {output} 2> {log}"
