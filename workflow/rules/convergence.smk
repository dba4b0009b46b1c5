# Per-direction convergence of the main runs: R@1 and retrieval error per epoch and direction, beside the
# epoch's standard InfoNCE (the paper's §2.4 and appendix E.3), as a table and a figure.


rule table_convergence:
    input:
        [f"{d}/{log}.csv" for d in spec_runs("main") for log in ("epochs", "dynamics")],
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
        spec=(
            json.dumps(plan.experiment_spec(config, "main"))
            if is_active("main")
            else "{}"
        ),
    shell:
        "hnclip table-convergence --spec {params.spec:q} --out-prefix results/tables/convergence 2> {log}"


rule figure_convergence:
    input:
        rules.table_convergence.input,
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
        spec=rules.table_convergence.params.spec,
    shell:
        "hnclip figure convergence --spec {params.spec:q} --out-prefix results/figures/convergence 2> {log}"
