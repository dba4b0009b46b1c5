"""``hnclip plan``: what a config will submit, and what it will cost, before anything is submitted.

For each experiment: its training and evaluation jobs (a run or evaluation shared by several experiments
is counted once, for the first experiment in the config that needs it, so the rows add up to the total;
the zero-shot backbone's evaluations count with the main and transfer tables, the protocol table's
test-split variants in a row of their own),
the samples its new runs train on, and the GPU-hours they take at a samples/s rate. The rate comes, in
order, from ``--samples-per-s``, from earlier runs (``results/runs/**/summary.json`` whose model has the
config's backbone; the median), or from :data:`DEFAULT_SAMPLES_PER_S`; the output names its source.
Training set sizes come from the config (``expected_counts.train``, the synthetic generator's
``n_train``), else a prepared manifest, else the adapter's protocol count. Evaluation and data preparation
are left out of the GPU-hours: they are minutes against the runs' hours.

Runs in a second or two on the paper grid: nothing is loaded but the config, JSON summaries and, when
prepared, the training manifests.
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hnclip import plan, protocols
from hnclip.data import BENCHMARKS
from hnclip.data.subsets import subset_size

__all__ = [
    "DEFAULT_BACKBONE",
    "DEFAULT_SAMPLES_PER_S",
    "ExperimentCost",
    "Throughput",
    "build_plan",
    "format_plan",
    "load_config",
    "measured_throughput",
    "print_plan",
    "profile_train_resources",
    "resolve_throughput",
    "run_samples",
    "train_set_sizes",
]

# Default calibration: training samples/s of one Long-CLIP-L (ViT-L/14 at 224 px + 248-token text tower)
# fine-tuning job on one A100/H200-class GPU in bf16 at the paper's micro-batch 16 x 8. An estimate, not
# a measurement: ~370 GFLOP per sample forward+backward (~123 GFLOP forward: 81 image + 42 text), at
# ~40 % of an A100's 312 TFLOP/s bf16 peak gives ~340 samples/s, halved for micro-batch 16, the FILIP
# token branch, the gradient-dynamics probes and the per-epoch evaluation. Replace it with a measured
# rate (--samples-per-s, or let a first run's summary.json be found).
DEFAULT_SAMPLES_PER_S = 150.0
DEFAULT_BACKBONE = "ViT-L-14-longclip"


@dataclass
class Throughput:
    samples_per_s: float
    source: str


@dataclass
class ExperimentCost:
    name: str
    train_jobs: int = 0  # runs the experiment needs
    new_train_jobs: int = 0  # of those, runs no earlier experiment needs
    eval_jobs: int = 0
    new_eval_jobs: int = 0
    samples: int = 0  # training samples of the new runs
    gpu_hours: float = 0.0
    longest_run_hours: float = 0.0
    runs: list = field(default_factory=list)


# ------------------------------------------------------------------------------------------- config
def _schema_path() -> Path:
    candidates = [Path.cwd() / "workflow/schemas/config.schema.yaml",
                  Path(__file__).resolve().parents[2] / "workflow/schemas/config.schema.yaml"]
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError("hnclip plan: workflow/schemas/config.schema.yaml not found in "
                            + " or ".join(str(p.parent.parent.parent) for p in candidates))


def load_config(configfiles) -> dict:
    """The config exactly as the workflow sees it: the file(s) alone (a --configfile replaces the embedded
    default; several layer in order, later keys winning and mappings merging, as Snakemake layers them),
    validated with defaults filled in, then cross-checked by :func:`hnclip.plan.check_config`."""
    from snakemake.utils import update_config  # Snakemake's own merge of several --configfile

    from hnclip.config_validation import validate_config

    paths = [Path(configfiles)] if isinstance(configfiles, str | Path) else [Path(p) for p in configfiles]
    config: dict = {}
    for configfile in paths:
        if not configfile.is_file():
            raise FileNotFoundError(f"hnclip plan: config file {configfile} does not exist")
        layer = yaml.safe_load(configfile.read_text())
        if not isinstance(layer, dict):
            raise ValueError(f"{configfile}: expected a YAML mapping, got {type(layer).__name__}")
        update_config(config, layer)
    validate_config(config, _schema_path())
    plan.check_config(config)
    return config


def profile_train_resources(profile) -> dict:
    """Resources the profile gives train jobs: its set-resources.train over its default-resources."""
    profile = Path(profile)
    path = next((p for p in (profile / "config.yaml", profile / "profile.yaml", profile) if p.is_file()), None)
    if path is None:
        raise FileNotFoundError(f"hnclip plan: no config.yaml in profile {profile}")
    data = yaml.safe_load(path.read_text()) or {}
    return {**(data.get("default-resources") or {}), **((data.get("set-resources") or {}).get("train") or {})}


# ---------------------------------------------------------------------------------------------- data
def _count_manifest(path: Path) -> int:
    from hnclip.data.manifest import read_manifest

    return len(read_manifest(path))


def _protocol_train_count(adapter: str) -> tuple[int, str] | None:
    """The train count an adapter's protocol fixes (DOCCI 9,647, VG 14,575, DCI's GOAL split 5,806)."""
    if adapter not in BENCHMARKS:
        return None
    module = importlib.import_module(BENCHMARKS[adapter], "hnclip.data")
    counts = getattr(module, "EXPECTED_COUNTS", None) or {}
    if isinstance(counts.get("train"), int):
        return counts["train"], f"{adapter} protocol count"
    for protocol, per_split in counts.items():  # per-protocol tables: the protocol that has a train split
        if isinstance(per_split, dict) and isinstance(per_split.get("train"), int):
            return per_split["train"], f"{adapter} protocol count ({protocol} split)"
    return None


def train_set_sizes(config: dict, train_sets, results_dir) -> dict[str, tuple[int, str]]:
    """Benchmark -> (training records, where the number comes from), for every benchmark trained on.

    The config's own numbers come first: a results folder may hold another config's manifests.
    """
    sizes = {}
    for name in sorted(set(train_sets)):
        bench = config["benchmarks"][name]
        manifest = Path(results_dir) / "data" / name / "train.csv"
        if isinstance(bench.get("expected_counts", {}).get("train"), int):
            sizes[name] = (bench["expected_counts"]["train"], f"config benchmarks.{name}.expected_counts.train")
        elif bench.get("adapter", "").startswith("synthetic") and bench.get("synthetic", {}).get("n_train"):
            sizes[name] = (int(bench["synthetic"]["n_train"]), f"config benchmarks.{name}.synthetic.n_train")
        elif manifest.is_file():
            sizes[name] = (_count_manifest(manifest), f"prepared manifest {manifest}")
        elif (count := _protocol_train_count(bench.get("adapter", ""))) is not None:
            sizes[name] = count
        else:
            raise ValueError(f"hnclip plan: the training set size of benchmark {name!r} is unknown; set "
                             f"benchmarks.{name}.expected_counts.train or prepare it ({manifest})")
    return sizes


# ----------------------------------------------------------------------------------------- throughput
def _backbone_name(config: dict, results_dir) -> str | None:
    """The architecture this config's runs start from, by registry name, if it can be known.

    A prepared backbone (``results/backbone/model``) counts only if it fits the config (same image size
    and text positions, and the configured name when the DAG pretrains it): a results folder left by
    another config must not lend its backbone, nor its runs' throughput, to this one.
    """
    backbone = config["backbone"]
    prepared = Path(results_dir) / "backbone/model/model.json"
    if prepared.is_file():
        try:
            spec = json.loads(prepared.read_text())["spec"]
            fits = (spec["context_length"] == backbone["context_length"]
                    and spec["config"]["vision_cfg"]["image_size"] == backbone["image_size"])
        except (OSError, json.JSONDecodeError, KeyError, TypeError):
            spec, fits = {}, False
        if backbone["source"] == "pretrain":
            fits = fits and spec.get("name") == backbone["name"]
        if fits and spec.get("name"):
            return spec["name"]
    if backbone["source"] == "pretrain":
        return backbone["name"]
    return None  # a checkpoint not converted yet: its architecture is known only after conversion


def measured_throughput(config: dict, results_dir) -> Throughput | None:
    """Median samples/s of earlier runs whose saved model has this config's backbone, if any."""
    backbone = _backbone_name(config, results_dir)
    if backbone is None:
        return None
    rates, devices = [], set()
    for summary_path in sorted((Path(results_dir) / "runs").rglob("summary.json")):
        model_json = summary_path.parent / "model/model.json"
        try:
            summary = json.loads(summary_path.read_text())
            name = json.loads(model_json.read_text()).get("spec", {}).get("name")
        except (OSError, json.JSONDecodeError):
            continue  # a run being written, or from an older layout: not a measurement
        if name == backbone and isinstance(summary.get("samples_per_s"), (int, float)) and summary["samples_per_s"] > 0:
            rates.append(float(summary["samples_per_s"]))
            devices.add(str(summary.get("device", "?")))
    if not rates:
        return None
    rate = statistics.median(rates)
    return Throughput(rate, f"measured: median of {len(rates)} run(s) of backbone {backbone!r} in "
                            f"{Path(results_dir) / 'runs'} on {', '.join(sorted(devices))}")


def resolve_throughput(config: dict, results_dir, samples_per_s: float | None) -> Throughput:
    if samples_per_s is not None:
        if not samples_per_s > 0:
            raise ValueError(f"hnclip plan: --samples-per-s must be > 0, got {samples_per_s}")
        return Throughput(float(samples_per_s), "--samples-per-s")
    measured = measured_throughput(config, results_dir)
    if measured is not None:
        return measured
    backbone = _backbone_name(config, results_dir)
    if backbone is None:
        note = f"; assumes the {config['backbone']['source']} checkpoint is Long-CLIP-L"
    elif backbone != DEFAULT_BACKBONE:
        note = f"; this config's backbone is {backbone!r}, so only a rough guess"
    else:
        note = ""
    return Throughput(DEFAULT_SAMPLES_PER_S,
                      f"default calibration (Long-CLIP-L, one A100/H200-class GPU, an estimate, not a "
                      f"measurement{note}); override with --samples-per-s")


# ------------------------------------------------------------------------------------------ the plan
def run_samples(train: dict, n_train: int, fraction: str) -> int:
    """Samples one run trains on: whole effective batches per epoch (the loop drops the last partial one)."""
    effective = train["micro_batch"] * train["accum_steps"]
    n = subset_size(n_train, float(fraction)) if float(fraction) < 1 else n_train
    steps_per_epoch = n // effective
    if steps_per_epoch == 0:
        raise ValueError(f"hnclip plan: {n} training samples (fraction {fraction} of {n_train}) are fewer than "
                         f"one effective batch ({train['micro_batch']} x {train['accum_steps']})")
    steps = train["epochs"] * steps_per_epoch
    if train.get("max_steps"):
        steps = min(steps, train["max_steps"])
    return steps * effective


def build_plan(config: dict, throughput: Throughput, sizes: dict[str, tuple[int, str]],
               gpus_per_job: int = 1) -> list[ExperimentCost]:
    """One row per experiment (config order), plus a ``backbone`` row when the DAG pretrains it and a
    ``protocols`` row (evaluations only) when the config has the protocol table.

    GPU-hours assume samples/s is per GPU and that a job with several GPUs scales linearly, so the
    GPU-hours do not depend on ``gpus_per_job``; a job's wall time does (longest_run_hours).
    """
    rows, seen_runs, seen_evals = [], set(), set()
    per_run = {}  # row name -> samples of each of its new runs
    if config["backbone"]["source"] == "pretrain":
        pre = config["pretrain"]
        row = ExperimentCost("backbone (pretrain)", train_jobs=1, new_train_jobs=1)
        per_run[row.name] = [run_samples(pre["train"], sizes[pre["benchmark"]][0], "1")]
        rows.append(row)
    for name in config.get("experiments", {}):
        row = ExperimentCost(name)
        runs, evals = set(), set()
        for cell in plan.experiment_spec(config, name)["cells"]:
            evals.add(cell["eval_path"])  # the zero-shot backbone's evaluations too (no run behind them)
            if plan.is_zeroshot(cell):
                continue
            info = cell["run"]
            runs.add(plan.Run(info["train_set"], info["method"], plan.format_number(info["gamma"]),
                              plan.format_number(info["fraction"]), info["seed"]))
        row.runs = sorted(runs - seen_runs)
        row.train_jobs, row.new_train_jobs = len(runs), len(row.runs)
        row.eval_jobs, row.new_eval_jobs = len(evals), len(evals - seen_evals)
        per_run[name] = [run_samples(config["train"], sizes[r.train_set][0], r.fraction) for r in row.runs]
        seen_runs |= runs
        seen_evals |= evals
        rows.append(row)
    # the protocol table's evaluations (hnclip.protocols): the main models on other papers' test-split
    # variants; their paper-protocol cells are the evaluations counted above, so only the variants are new
    protocol_evals = {c["eval_path"] for c in protocols.protocol_spec(config)["cells"]}
    if protocol_evals:
        rows.append(ExperimentCost("protocols", eval_jobs=len(protocol_evals),
                                   new_eval_jobs=len(protocol_evals - seen_evals)))
        per_run["protocols"] = []
    for row in rows:
        row.samples = sum(per_run[row.name])
        row.gpu_hours = row.samples / throughput.samples_per_s / 3600
        row.longest_run_hours = max(per_run[row.name], default=0) / throughput.samples_per_s / 3600 / max(1, gpus_per_job)
    return rows


def _hours(x: float) -> str:
    return f"{x:,.1f}" if x >= 10 else f"{x:.3g}"


def format_plan(rows: list[ExperimentCost], throughput: Throughput, sizes: dict[str, tuple[int, str]],
                configfile, resources: dict | None = None, profile=None) -> str:
    header = ("experiment", "train jobs", "new", "eval jobs", "new", "train samples", "GPU-h")
    table = [header]
    for r in rows:
        table.append((r.name, str(r.train_jobs), str(r.new_train_jobs), str(r.eval_jobs), str(r.new_eval_jobs),
                      f"{r.samples:,}", _hours(r.gpu_hours)))
    total_train = sum(r.new_train_jobs for r in rows)
    total_eval = sum(r.new_eval_jobs for r in rows)
    total_samples = sum(r.samples for r in rows)
    total_hours = sum(r.gpu_hours for r in rows)
    table.append(("total (each job once)", str(total_train), "", str(total_eval), "", f"{total_samples:,}",
                  _hours(total_hours)))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]

    def line(row):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))

    rule = "-" * len(line(header))
    out = [f"hnclip plan for {configfile}", "", line(header), rule, *(line(r) for r in table[1:-1]), rule,
           line(table[-1]), ""]
    out.append(f"total: {total_train} training jobs, {total_eval} evaluation jobs, {_hours(total_hours)} "
               f"GPU-hours ({total_hours * 3600:,.0f} GPU-seconds) of training; evaluation and data "
               f"preparation not included")
    out.append(f"throughput: {throughput.samples_per_s:g} samples/s per GPU, {throughput.source}")
    out.append("training set sizes:")
    out += [f"  {name}: {n:,} ({source})" for name, (n, source) in sizes.items()]
    if resources is not None:
        gpus, runtime = int(resources.get("gpu", 1) or 1), resources.get("runtime")
        longest = max((r.longest_run_hours for r in rows), default=0.0)
        out.append(f"profile {profile}: train jobs on partition {resources.get('slurm_partition', '(default)')} "
                   f"with {gpus} GPU(s), runtime limit {runtime} min; longest run ~{_hours(longest)} h wall")
        if runtime is not None and longest * 60 > float(runtime):
            out.append(f"  warning: the longest run needs ~{longest * 60:,.0f} min, more than the {runtime} min "
                       f"limit; it will be cut and resumed from its checkpoint on retry")
    return "\n".join(out)


def print_plan(configfile, profile=None, samples_per_s: float | None = None, results_dir="results",
               file=None) -> list[ExperimentCost]:
    """Print the plan of ``configfile`` (one path, or several layered in order) with ``profile``'s train
    resources, if given; return its rows."""
    config = load_config(configfile)
    runs = plan.all_runs(config)
    train_sets = {r.train_set for r in runs}
    if config["backbone"]["source"] == "pretrain":
        train_sets.add(config["pretrain"]["benchmark"])
    sizes = train_set_sizes(config, train_sets, results_dir)
    throughput = resolve_throughput(config, results_dir, samples_per_s)
    resources = profile_train_resources(profile) if profile else None
    gpus = int((resources or {}).get("gpu", 1) or 1)
    rows = build_plan(config, throughput, sizes, gpus_per_job=gpus)
    label = configfile if isinstance(configfile, str | Path) else " + ".join(map(str, configfile))
    print(format_plan(rows, throughput, sizes, label, resources, profile), file=file or sys.stdout)
    return rows
