# hnclip-repro: the HN-CLIP reproduction DAG. Logic lives in src/hnclip; rules call the `hnclip` CLI.
from snakemake.utils import min_version

min_version("9.20")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/backbone.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/rehearsal.smk"


rule all:
    default_target: True
    input:
        get_final_output(),
