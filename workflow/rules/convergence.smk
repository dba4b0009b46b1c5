# Per-direction convergence of the main runs: R@1 and retrieval error per epoch and direction, beside the
# epoch's standard InfoNCE (the paper's §2.4 and appendix E.3), as a table and a figure.


rule table_convergence:
    input:
        spec=spec_path("main"),
        logs=[
            f"{d}/{log}.csv"
            for d in spec_runs("main")
            for log in ("epochs", "dynamics")
        ],
        summaries=run_summaries("main"),
    output:
        report(
            "results/tables/convergence.html",
            caption="../report/convergence.rst",
            category="Tables",
            labels={"table": "convergence"},
        ),
        csv="results/tables/convergence.csv",
    log:
        "results/logs/tables/convergence.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        prefix=lambda w, output: output.csv.removesuffix(".csv"),
    shell:
        "python -m hnclip table-convergence --spec {input.spec} --out-prefix {params.prefix} 2> {log}"


rule figure_convergence:
    input:
        spec=spec_path("main"),
        logs=rules.table_convergence.input.logs,
    output:
        report(
            "results/figures/convergence.png",
            caption="../report/convergence.rst",
            category="Figures",
            labels={"figure": "error beside InfoNCE"},
        ),
    log:
        "results/logs/figures/convergence.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        prefix=lambda w, output: output[0].removesuffix(".png"),
    shell:
        "python -m hnclip figure convergence --spec {input.spec} --out-prefix {params.prefix} 2> {log}"
