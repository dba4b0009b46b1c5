# hnclip-repro: the HN-CLIP reproduction DAG. Logic lives in src/hnclip; rules call `python -m hnclip`.
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.20")


# The embedded default, found next to this Snakefile whatever the working directory (--directory). A
# --configfile replaces it (see workflow/rules/common.smk), so it is not even read then. It is parsed by
# hnclip first, so a YAML syntax error names its file, line and column (Snakemake's loader names neither;
# a --configfile is read by Snakemake before this file runs: README, "Configuration").
if not workflow.config_settings.configfiles:
    sys.path.insert(0, str(Path(workflow.basedir) / "src"))
    from hnclip.config.validation import ConfigError, load_config_file

    try:
        load_config_file(Path(workflow.basedir) / "config/config.yaml")
    except ConfigError as error:
        raise ConfigError(str(error)) from None

    configfile: Path(workflow.basedir) / "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/run_inputs.smk"
include: "workflow/rules/table_inputs.smk"
include: "workflow/rules/backbone_inputs.smk"
include: "workflow/rules/hooks.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/backbone.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/convergence.smk"
include: "workflow/rules/protocols.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/rehearsal.smk"
include: "workflow/rules/export.smk"
include: "workflow/rules/released.smk"
include: "workflow/rules/tuning.smk"


onstart:
    refuse_running_trainers()
    warn_on_local_gpu_cap(workflow.resource_settings.resources, workflow.local_exec)
    make_rehearsal_files()


onerror:
    surface_job_errors(log)


rule all:
    default_target: True
    input:
        get_final_output(),
