# One rule per table and per figure of the paper; each reads the evaluations its experiment needs.


rule table:
    input:
        get_experiment_inputs,
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
        spec=get_experiment_spec,
        prefix="results/tables/{experiment}",
    shell:
        "hnclip table --spec {params.spec:q} --out-prefix {params.prefix} 2> {log}"


rule table_epochs:
    input:
        [f"{d}/epochs.csv" for d in spec_runs("main")]
        if "main" in config["experiments"]
        else [],
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
        spec=(
            json.dumps(plan.experiment_spec(config, "main"))
            if "main" in config["experiments"]
            else "{}"
        ),
    shell:
        "hnclip table-epochs --spec {params.spec:q} --out-prefix results/tables/epochs 2> {log}"


rule table_cost:
    input:
        summaries=get_summaries(),
        benchmarks=get_benchmark_files(),
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
    shell:
        "hnclip table-cost --summaries {input.summaries} --benchmarks {input.benchmarks} "
        "--scale {params.scale} --out-prefix results/tables/cost 2> {log}"


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
    params:
        batch_size=lookup(dpath="geometry/batch_size", within=config),
        n_batches=lookup(dpath="geometry/n_batches", within=config),
        seed=config["seeds"][0],
    shell:
        "hnclip geometry --model {input.model} --manifest {input.manifest} --benchmark {wildcards.benchmark} "
        "--batch-size {params.batch_size} --n-batches {params.n_batches} --seed {params.seed} "
        "--out-json {output.json} --out-figure {output.figure} 2> {log}"


rule figure_dynamics:
    input:
        [f"{d}/dynamics.csv" for d in spec_runs("fractions")],
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
        spec=json.dumps(plan.experiment_spec(config, "fractions")),
    shell:
        "hnclip figure dynamics --spec {params.spec:q} --out-prefix results/figures/dynamics 2> {log}"


rule figure_from_evaluations:
    input:
        get_experiment_inputs,
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
        experiment="fractions|gamma_sweep",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        spec=get_experiment_spec,
    shell:
        "hnclip figure {wildcards.experiment} --spec {params.spec:q} "
        "--out-prefix results/figures/{wildcards.experiment} 2> {log}"


rule figure_epochs:
    input:
        rules.table_epochs.input,
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
        spec=rules.table_epochs.params.spec,
    shell:
        "hnclip figure epochs --spec {params.spec:q} --out-prefix results/figures/epochs 2> {log}"


rule gallery:
    input:
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
    params:
        spec=json.dumps(plan.experiment_spec(config, "main")),
        n=lookup(dpath="report/gallery_captions", within=config),
    shell:
        "hnclip gallery --spec {params.spec:q} --captions {params.n} --out-prefix results/figures/gallery 2> {log}"
