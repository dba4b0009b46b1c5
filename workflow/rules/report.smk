# The deliverable: one self-contained HTML report of every table, figure and claim, with provenance.


rule report:
    input:
        unpack(lambda w: get_report_inputs()),
    output:
        "results/report.html",
    log:
        "results/logs/report.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        title=lookup(dpath="report/title", within=config),
        scale=config["scale"],
    shell:
        "python -m hnclip report --title {params.title:q} --scale {params.scale} --specs {input.specs} "
        "--tables {input.tables} --figures {input.figures} --geometry {input.geometry} "
        "--summaries {input.summaries} --premise {input.premise} --regime {input.regime} "
        "--out {output} 2> {log}"
