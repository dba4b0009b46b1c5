# Config validation, wildcard constraints and the small get_* functions the rules use.
# Which runs each experiment needs is decided in hnclip.plan (testable without Snakemake).
import copy
import json
import sys
from pathlib import Path

from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

# Jobs call `hnclip`, installed beside the Python running Snakemake (.venv/bin): find it there even when
# the venv is not activated. Not with --use-conda/--sdm conda, where each rule's own environment must win.
if "conda" not in {
    str(m).lower() for m in workflow.deployment_settings.deployment_method
}:
    shell.prefix(f'export PATH="{Path(sys.executable).parent}:$PATH"; ')
from hnclip import plan  # noqa: E402
from hnclip.frameworks.registry import FRAMEWORK_PRODUCTS  # noqa: E402
from hnclip.train_config import override_items  # noqa: E402

if workflow.config_settings.configfiles:
    # A --configfile is a complete configuration (config/paper.yaml, a test's micro config): it replaces
    # the embedded default instead of being merged into it, which would leave the synthetic benchmarks
    # and toy experiments in the paper grid. --config key=value overrides still apply on top.
    config.clear()
    config.update(copy.deepcopy(workflow.config_settings.overwrite_config))

validate(config, schema="../schemas/config.schema.yaml")
plan.check_config(config)

RUNS = plan.all_runs(config)
EVALUATIONS = plan.all_evaluations(config)
BENCHMARKS = list(config["benchmarks"])


wildcard_constraints:
    benchmark="|".join(BENCHMARKS),
    train_set="|".join(BENCHMARKS),
    eval_benchmark="|".join(BENCHMARKS),
    method="|".join(config["methods"]),
    experiment="|".join(config["experiments"]),
    split="train|test",
    gamma=r"[0-9]+(\.[0-9]+)?",
    fraction=r"[0-9]+(\.[0-9]+)?(e-[0-9]+)?",
    seed=r"[0-9]+",


def get_final_output():
    """The report, which gathers every table, figure and geometry result."""
    return ["results/report.html"]


def is_active(experiment):
    return experiment in config["experiments"]


def get_report_inputs():
    """Everything the report shows; an experiment absent from the config drops its table and figure."""
    tables = [f"results/tables/{e}.csv" for e in config["experiments"]] + [
        "results/tables/cost.csv"
    ]
    figures = []
    if is_active("main"):
        tables.append("results/tables/epochs.csv")
        figures += ["results/figures/epochs.png", "results/figures/gallery.png"]
    if is_active("fractions"):
        figures += ["results/figures/dynamics.png", "results/figures/fractions.png"]
    if is_active("gamma_sweep"):
        figures.append("results/figures/gamma_sweep.png")
    geometry = [f"results/geometry/{b}.json" for b in BENCHMARKS]
    figures += [f"results/figures/geometry_{b}.png" for b in BENCHMARKS]
    return {
        "tables": tables,
        "figures": figures,
        "geometry": geometry,
        "summaries": get_summaries(),
    }


def run_of(wildcards):
    return plan.Run(
        wildcards.train_set,
        wildcards.method,
        wildcards.gamma,
        wildcards.fraction,
        int(wildcards.seed),
    )


def get_train_overrides(wildcards):
    return " ".join(
        f"--set {item}" for item in plan.train_overrides(config, run_of(wildcards))
    )


def get_subset(wildcards):
    if float(wildcards.fraction) == 1.0:
        return []
    return f"results/data/{wildcards.train_set}/subsets/f{wildcards.fraction}_s{wildcards.seed}.txt"


def get_epoch_eval(wildcards):
    """In-domain test data evaluated after each epoch (the convergence table), if any."""
    bench = plan.in_domain_eval_benchmark(config, wildcards.train_set)
    if bench is None or not config["train"]["eval_every_epoch"]:
        return {}
    return {
        "eval_manifest": f"results/data/{bench}/test.csv",
        "eval_images": f"results/data/{bench}/test_images",
    }


def get_product_names(wildcards):
    framework = config["methods"][wildcards.method]["framework"]
    return FRAMEWORK_PRODUCTS.get(framework, ())


def get_products(wildcards):
    """Cached preprocessing the run's framework trains on (GOAL: segments; StructXLIP: + edges)."""
    return {
        name: f"results/data/{wildcards.train_set}/train_{name}"
        for name in get_product_names(wildcards)
    }


def get_train_launcher():
    """Several GPUs per training job (resources.train.gpu > 1): one process per GPU through torchrun;
    the configured micro-batch is then the global one, split evenly over the processes.
    """
    gpus = int(config["resources"]["train"].get("gpu", 0) or 0)
    if gpus <= 1:
        return ""
    return f"torchrun --standalone --nproc-per-node {gpus} --no-python "


def get_resources(kind):
    return config["resources"][kind]


def eval_paths(experiment):
    """Evaluation JSONs one experiment's table reads (empty when the experiment is not configured)."""
    if experiment not in config["experiments"]:
        return []
    spec = plan.experiment_spec(config, experiment)
    return sorted({c["eval_path"] for c in spec["cells"]})


def get_experiment_inputs(wildcards):
    return eval_paths(wildcards.experiment)


def get_experiment_spec(wildcards):
    return json.dumps(plan.experiment_spec(config, wildcards.experiment))


def get_summaries(runs=None):
    return [
        f"results/runs/{r.path}/summary.json" for r in (RUNS if runs is None else runs)
    ]


def get_benchmark_files():
    return [f"results/benchmarks/train/{r.path}.tsv" for r in RUNS]


def spec_runs(experiment):
    """Run folders of an experiment's cells (figures that read per-run logs)."""
    if experiment not in config["experiments"]:
        return []
    spec = plan.experiment_spec(config, experiment)
    return sorted({c["run_dir"] for c in spec["cells"]})


def geometry_split(benchmark):
    return "train" if "train" in config["benchmarks"][benchmark]["splits"] else "test"
