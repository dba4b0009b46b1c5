# One rule per table and per figure of the paper. Each reads its experiment's spec file (written by the
# spec rule from the effective config) and the evaluations, summaries or logs of the runs it names.


rule spec:
    output:
        spec="results/specs/{experiment}.json",
    log:
        "results/logs/specs/{experiment}.log",
    localrule: True
    params:
        # The spec's digest: a config change that changes the spec (a file, a layered --configfile or a
        # --config override) changes this param, and Snakemake's params trigger rewrites the file.
        digest=lambda w: plan.spec_digest(config, w.experiment),
    run:
        plan.write_spec(config, wildcards.experiment, output.spec, log=log[0])


rule table:
    input:
        unpack(get_experiment_inputs),
    output:
        report(
            "results/tables/{experiment}.html",
            caption="../report/table.rst",
            category="Tables",
            labels={"table": "{experiment}"},
        ),
        csv="results/tables/{experiment}.csv",
        md="results/tables/{experiment}.md",
        tex="results/tables/{experiment}.tex",
    log:
        "results/logs/tables/{experiment}.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        prefix=lambda w, output: output.csv.removesuffix(".csv"),
    shell:
        "python -m hnclip table --spec {input.spec} --out-prefix {params.prefix} 2> {log}"


rule table_epochs:
    input:
        spec=spec_path("main"),
        epochs=[f"{d}/epochs.csv" for d in spec_runs("main")],
        # the per-epoch intervals read each run's per-query outcomes beside its epochs.csv
        epoch_ranks=[f"{d}/epoch_ranks.csv" for d in spec_runs("main")],
        summaries=run_summaries("main"),
    output:
        report(
            "results/tables/epochs.html",
            caption="../report/epochs.rst",
            category="Tables",
            labels={"table": "epochs"},
        ),
        csv="results/tables/epochs.csv",
    log:
        "results/logs/tables/epochs.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        prefix=lambda w, output: output.csv.removesuffix(".csv"),
    shell:
        "python -m hnclip table-epochs --spec {input.spec} --out-prefix {params.prefix} 2> {log}"


rule table_cost:
    input:
        summaries=get_summaries(),
        benchmarks=get_benchmark_files(),
        preprocess=get_preprocess_benchmark_files(),
    output:
        report(
            "results/tables/cost.html",
            caption="../report/cost.rst",
            category="Tables",
            labels={"table": "cost"},
        ),
        csv="results/tables/cost.csv",
    log:
        "results/logs/tables/cost.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        scale=config["scale"],
        gamma=lookup(dpath="gamma", within=config),
        prefix=lambda w, output: output.csv.removesuffix(".csv"),
    shell:
        "python -m hnclip table-cost --summaries {input.summaries} --benchmarks {input.benchmarks} "
        "--preprocess {input.preprocess} --scale {params.scale} --gamma {params.gamma} "
        "--out-prefix {params.prefix} 2> {log}"


rule geometry:
    input:
        model="results/backbone/model",
        manifest=lambda w: f"results/data/{w.benchmark}/{geometry_split(w.benchmark)}.csv",
    output:
        json="results/geometry/{benchmark}.json",
        figure=report(
            "results/figures/geometry_{benchmark}.png",
            caption="../report/geometry.rst",
            category="Caption geometry",
            labels={"benchmark": "{benchmark}"},
        ),
    log:
        "results/logs/geometry/{benchmark}.log",
    conda:
        "../../envs/train.yaml"
    threads: get_threads("evaluate")
    resources:
        **get_resources("evaluate"),
    params:
        batch_size=lookup(dpath="geometry/batch_size", within=config),
        # the batch the loss and G span (the global micro-batch), measured beside geometry.batch_size
        loss_batch_size=lookup(dpath="train/micro_batch", within=config),
        n_batches=lookup(dpath="geometry/n_batches", within=config),
        seed=config["seeds"][0],
    shell:
        "python -m hnclip geometry --model {input.model} --manifest {input.manifest} "
        "--benchmark {wildcards.benchmark} --batch-size {params.batch_size} "
        "--loss-batch-size {params.loss_batch_size} "
        "--n-batches {params.n_batches} --seed {params.seed} "
        "--out-json {output.json} --out-figure {output.figure} 2> {log}"


rule premise:
    input:
        summaries=lambda w: get_summaries(),
    output:
        "results/premise.json",
    log:
        "results/logs/premise.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        gamma=lookup(dpath="gamma", within=config),
        confidence=lookup(dpath="statistics/confidence", within=config),
        resamples=lookup(dpath="statistics/resamples", within=config),
        seed=lookup(dpath="statistics/seed", within=config),
    shell:
        "python -m hnclip premise --runs {input.summaries} --gamma {params.gamma} "
        "--confidence {params.confidence} --resamples {params.resamples} --bootstrap-seed {params.seed} "
        "--out {output} 2> {log}"


rule regime:
    input:
        unpack(get_regime_inputs),
    output:
        "results/regime/{benchmark}.json",
    log:
        "results/logs/regime/{benchmark}.log",
    conda:
        "../../envs/train.yaml"
    threads: get_threads("evaluate")
    resources:
        **get_resources("evaluate"),
    params:
        main=lambda w, input: (
            f"--main-spec {input.main_spec}" if "main_spec" in input.keys() else ""
        ),
        confidence=lookup(dpath="statistics/confidence", within=config),
        resamples=lookup(dpath="statistics/resamples", within=config),
        seed=lookup(dpath="statistics/seed", within=config),
    shell:
        "python -m hnclip regime --benchmark {wildcards.benchmark} --backbone {input.backbone} "
        "--train-manifest {input.train_manifest} --test-manifest {input.test_manifest} "
        "--test-images {input.test_images} --zeroshot {input.zeroshot} --runs {input.summaries} "
        "--evals {input.evals} {params.main} --transfer {input.transfer} --confidence {params.confidence} "
        "--resamples {params.resamples} --bootstrap-seed {params.seed} --threads {threads} "
        "--out {output} 2> {log}"


rule figure_dynamics:
    input:
        spec=spec_path("fractions"),
        dynamics=[f"{d}/dynamics.csv" for d in spec_runs("fractions")],
    output:
        report(
            "results/figures/dynamics.png",
            caption="../report/dynamics.rst",
            category="Figures",
            labels={"figure": "gradient dynamics"},
        ),
    log:
        "results/logs/figures/dynamics.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        prefix=lambda w, output: output[0].removesuffix(".png"),
    shell:
        "python -m hnclip figure dynamics --spec {input.spec} --out-prefix {params.prefix} 2> {log}"


rule figure_from_evaluations:
    input:
        unpack(get_experiment_inputs),
    output:
        report(
            "results/figures/{experiment}.png",
            caption="../report/figure.rst",
            category="Figures",
            labels={"figure": "{experiment}"},
        ),
    log:
        "results/logs/figures/{experiment}.log",
    wildcard_constraints:
        # the configured experiments whose registration row declares a figure (hnclip.experiments)
        experiment=plan.wildcard_pattern(
            [e for e in figured_experiments() if is_active(e)]
        ),
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        prefix=lambda w, output: output[0].removesuffix(".png"),
    shell:
        "python -m hnclip figure {wildcards.experiment} --spec {input.spec} "
        "--out-prefix {params.prefix} 2> {log}"


rule figure_epochs:
    input:
        spec=spec_path("main"),
        epochs=rules.table_epochs.input.epochs,
        # on your own data the zero-shot row is a line in the figure
        zeroshot=(
            [c["eval_path"] for c in experiment_cells("main") if plan.is_zeroshot(c)]
            if OWN_DATA
            else []
        ),
    output:
        report(
            "results/figures/epochs.png",
            caption="../report/epochs.rst",
            category="Figures",
            labels={"figure": "R@1 per epoch"},
        ),
    log:
        "results/logs/figures/epochs.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        prefix=lambda w, output: output[0].removesuffix(".png"),
        zeroshot="--zeroshot" if OWN_DATA else "",
    shell:
        "python -m hnclip figure epochs --spec {input.spec} {params.zeroshot} --out-prefix {params.prefix} 2> {log}"


# your own data: loss and learning rate per step of each fine-tuned run (their dynamics.csv)
rule figure_training:
    input:
        spec=spec_path("main"),
        dynamics=[f"{d}/dynamics.csv" for d in spec_runs("main")],
    output:
        report(
            "results/figures/training.png",
            caption="../report/training.rst",
            category="Figures",
            labels={"figure": "loss and learning rate"},
        ),
    log:
        "results/logs/figures/training.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        prefix=lambda w, output: output[0].removesuffix(".png"),
    shell:
        "python -m hnclip figure training --spec {input.spec} --out-prefix {params.prefix} 2> {log}"


rule gallery:
    input:
        spec=spec_path("main"),
        evals=eval_paths("main"),
        runs=[f"{d}/model" for d in spec_runs("main")],
        data=[
            f"results/data/{b}/test{suffix}"
            for b in config["experiments"].get("main", {}).get("benchmarks", [])
            for suffix in (".csv", "_images")
        ],
    output:
        report(
            "results/figures/gallery.png",
            caption="../report/gallery.rst",
            category="Figures",
            labels={"figure": "retrieval gallery"},
        ),
    log:
        "results/logs/figures/gallery.log",
    conda:
        "../../envs/train.yaml"
    threads: get_threads("evaluate")
    resources:
        **get_resources("evaluate"),
    params:
        n=lookup(dpath="report/gallery_captions", within=config),
        prefix=lambda w, output: output[0].removesuffix(".png"),
        # your own data: the captions whose rank changed most between HN-CLIP and plain fine-tuning
        pick="--pick changed" if OWN_DATA else "",
    shell:
        "python -m hnclip gallery --spec {input.spec} --captions {params.n} {params.pick} "
        "--out-prefix {params.prefix} 2> {log}"
