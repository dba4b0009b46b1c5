# hnclip-repro: the HN-CLIP reproduction DAG. Logic lives in src/hnclip; rules call `python -m hnclip`.
from pathlib import Path

from snakemake.utils import min_version

min_version("9.20")


# The embedded default, found next to this Snakefile whatever the working directory (--directory). A
# --configfile replaces it (see workflow/rules/common.smk), so it is not even read then.
if not workflow.config_settings.configfiles:

    configfile: Path(workflow.basedir) / "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/backbone.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/convergence.smk"
include: "workflow/rules/protocols.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/rehearsal.smk"


onstart:
    warn_on_local_gpu_cap(workflow.resource_settings.resources, workflow.local_exec)
    make_rehearsal_files()


rule all:
    default_target: True
    input:
        get_final_output(),
