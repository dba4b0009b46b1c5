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
import math
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
    "DiagnosticsCost",
    "ExperimentCost",
    "Throughput",
    "build_plan",
    "format_plan",
    "load_config",
    "measured_throughput",
    "JOB_COST_FILE",
    "JobNeed",
    "cost_at",
    "diagnostics_cost",
    "format_diagnostics",
    "format_job_needs",
    "job_needs",
    "job_resources",
    "load_job_cost",
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

    from hnclip.config_validation import load_config_file, validate_config

    paths = [Path(configfiles)] if isinstance(configfiles, str | Path) else [Path(p) for p in configfiles]
    config: dict = {}
    for configfile in paths:
        if not configfile.is_file():
            raise FileNotFoundError(f"hnclip plan: config file {configfile} does not exist")
        update_config(config, load_config_file(configfile))  # a syntax error names file, line and column
    validate_config(config, _schema_path())
    plan.check_config(config)
    return config


def _profile_data(profile) -> dict:
    profile = Path(profile)
    path = next((p for p in (profile / "config.yaml", profile / "profile.yaml", profile) if p.is_file()), None)
    if path is None:
        raise FileNotFoundError(f"hnclip plan: no config.yaml in profile {profile}")
    return yaml.safe_load(path.read_text()) or {}


def profile_train_resources(profile) -> dict:
    """Resources the profile gives train jobs: its set-resources.train over its default-resources."""
    data = _profile_data(profile)
    return {**(data.get("default-resources") or {}), **((data.get("set-resources") or {}).get("train") or {})}


def job_resources(config: dict, kind: str, profile=None) -> dict:
    """What a ``train``/``evaluate`` job asks for: the profile's default-resources, under the config's
    ``resources.<kind>`` (the rules' own), under the profile's set-resources (which override a rule's)."""
    data = _profile_data(profile) if profile else {}
    return {**(data.get("default-resources") or {}), **(config.get("resources", {}).get(kind) or {}),
            **((data.get("set-resources") or {}).get(kind) or {})}


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


def _manifest_fits(bench: dict, manifest: Path) -> bool:
    """A prepared manifest counts only if it was prepared for this benchmark config: its source record
    (written by the fetch rule beside it) names the same adapter and expected counts. A rehearsal's
    8-image DOCCI must not size the paper's."""
    source = manifest.parent / "source.json"
    if not source.is_file():
        return True  # prepared by hand: nothing to tell it apart
    try:
        record = json.loads(source.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return (record.get("adapter") == bench.get("adapter")
            and (record.get("expected_counts") or {}) == (bench.get("expected_counts") or {}))


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
        elif manifest.is_file() and _manifest_fits(bench, manifest):
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


def measured_throughput(config: dict, results_dir, device_type: str | None = None) -> Throughput | None:
    """Median samples/s of earlier runs whose saved model has this config's backbone, if any, and that ran
    on ``device_type`` (``cuda``/``cpu``; None: any): a CPU rehearsal's runs must not price GPU jobs."""
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
        ran_on = summary.get("device_type") or ("cpu" if summary.get("device") == "cpu" else "cuda")
        if device_type is not None and ran_on != device_type:
            continue
        if name == backbone and isinstance(summary.get("samples_per_s"), (int, float)) and summary["samples_per_s"] > 0:
            rates.append(float(summary["samples_per_s"]))
            devices.add(str(summary.get("device", "?")))
    if not rates:
        return None
    rate = statistics.median(rates)
    return Throughput(rate, f"measured: median of {len(rates)} run(s) of backbone {backbone!r} in "
                            f"{Path(results_dir) / 'runs'} on {', '.join(sorted(devices))}")


def resolve_throughput(config: dict, results_dir, samples_per_s: float | None,
                       device_type: str | None = None) -> Throughput:
    if samples_per_s is not None:
        if not samples_per_s > 0:
            raise ValueError(f"hnclip plan: --samples-per-s must be > 0, got {samples_per_s}")
        return Throughput(float(samples_per_s), "--samples-per-s")
    measured = measured_throughput(config, results_dir, device_type)
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


# ------------------------------------------------------------------------------------- per-job needs
JOB_COST_FILE = Path("benchmarks") / "job_cost.json"
# the default calibration's samples/s is that of an HN-CLIP step (token branch included), so frameworks'
# measured costs are taken relative to it
REFERENCE_FRAMEWORK = "hnclip"


@dataclass
class JobNeed:
    """What one kind of job needs: memory at the config's micro-batch, time, and the limits it gets."""

    job: str
    methods: list
    memory_mb: float
    memory_how: str
    seconds_per_sample: float  # forward + backward on the measuring device
    ratio: float  # time per sample relative to REFERENCE_FRAMEWORK (evaluation: relative to its training)
    longest_hours: float  # the longest such job at the plan's throughput, scaled by ratio
    limits: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)


def job_cost_path(path=None) -> Path | None:
    """The measured job costs: ``path``, else ``benchmarks/job_cost.json`` here or in the repository."""
    if path is not None:
        return Path(path)
    for candidate in (Path.cwd() / JOB_COST_FILE, Path(__file__).resolve().parents[2] / JOB_COST_FILE):
        if candidate.is_file():
            return candidate
    return None


def load_job_cost(path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"hnclip plan: cannot read the job costs {path}: {err}") from err
    for key in ("machine", "date", "frameworks", "evaluate"):
        if key not in data:
            raise ValueError(f"hnclip plan: {path} has no {key!r} (write it with benchmarks/job_cost.py)")
    return data


def cost_at(measured: list[dict], size_key: str, size: float, keys) -> dict:
    """Values at ``size``: the measurement at that size, or the least-squares line through the measured
    sizes (a negative slope, i.e. noise, counts as flat: no cost shrinks with more samples)."""
    exact = [m for m in measured if m[size_key] == size]
    if exact:
        return {**{k: float(exact[0][k]) for k in keys if k in exact[0]}, "how": "measured"}
    sizes = sorted({m[size_key] for m in measured})
    values = {}
    for key in (k for k in keys if all(k in m for m in measured)):
        xs = [float(m[size_key]) for m in measured]
        ys = [float(m[key]) for m in measured]
        if len(sizes) < 2:
            values[key] = ys[0] * size / xs[0] if key.endswith("_s") else ys[0]
            continue
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / \
            sum((x - mean_x) ** 2 for x in xs)
        values[key] = max(ys) if slope < 0 else mean_y + slope * (size - mean_x)
    return {**values, "how": f"line through {size_key} {', '.join(f'{s:g}' for s in sizes)}"}


def _framework_label(config: dict, method: str) -> str:
    spec = config["methods"][method]
    token = config["token_weight"] if spec.get("token_weight") is None else spec["token_weight"]
    if spec["framework"] == "longclip":
        return "hnclip" if token > 0 else "longclip"
    return spec["framework"]


def _test_size(config: dict, bench: str) -> int | None:
    counts = config["benchmarks"][bench].get("expected_counts") or {}
    if isinstance(counts.get("test"), int):
        return counts["test"]
    adapter = config["benchmarks"][bench]["adapter"]
    if adapter not in BENCHMARKS:
        return None
    counts = getattr(importlib.import_module(BENCHMARKS[adapter], "hnclip.data"), "EXPECTED_COUNTS", None) or {}
    if isinstance(counts.get("test"), int):
        return counts["test"]
    per_protocol = [c["test"] for c in counts.values() if isinstance(c, dict) and isinstance(c.get("test"), int)]
    return max(per_protocol, default=None)  # DCI: GOAL's 1,999 or all 7,805; the larger bounds the time


def _memory_check(need: JobNeed, kind: str, limits: dict, measured_on: str) -> None:
    runs_on = "cuda" if int(limits.get("gpu", 0) or 0) >= 1 else "cpu"
    mem_mb = limits.get("mem_mb")
    if mem_mb is None or measured_on == "cuda":  # GPU memory is not a profile resource: printed only
        return
    if float(mem_mb) < need.memory_mb:
        bound = "" if runs_on == measured_on else (
            " (measured on a CPU, where model, gradients, optimizer state and activations all sit in host "
            "memory: an upper bound for a GPU job, whose host holds much less)")
        need.warnings.append(f"warning: {need.job}: mem_mb {mem_mb} is less than the {need.memory_mb:,.0f} MB "
                             f"measured at micro-batch {kind}{bound}")


def job_needs(config: dict, job_cost: dict, throughput: Throughput, sizes: dict, train_limits: dict,
              eval_limits: dict) -> list[JobNeed]:
    """One row per framework the config trains (and one for evaluation): measured memory at the config's
    micro-batch (per process), time per sample, and the longest job at the plan's throughput."""
    gpus = max(1, int(train_limits.get("gpu", 1) or 1))
    micro = max(1, config["train"]["micro_batch"] // gpus)
    measured_on = job_cost["machine"].get("device", "cpu")
    frameworks = job_cost["frameworks"]
    keys = ("forward_backward_s", "peak_rss_mb", "peak_device_mb")
    at_micro = {label: cost_at(f["measured"], "micro_batch", micro, keys) for label, f in frameworks.items()}
    per_sample = {label: v["forward_backward_s"] / micro for label, v in at_micro.items()}
    reference = per_sample.get(REFERENCE_FRAMEWORK) or next(iter(per_sample.values()))
    memory_key = "peak_device_mb" if measured_on == "cuda" else "peak_rss_mb"
    by_label: dict[str, list] = {}
    for run in plan.all_runs(config):
        by_label.setdefault(_framework_label(config, run.method), []).append(run)
    needs = []
    for label, runs in sorted(by_label.items()):
        if label not in at_micro:
            needs.append(JobNeed(f"train {label}", sorted({r.method for r in runs}), float("nan"), "not measured",
                                 float("nan"), float("nan"), float("nan"),
                                 warnings=[f"warning: the job costs have no measurement of {label!r} "
                                           "(benchmarks/job_cost.py --frameworks ...)"]))
            continue
        ratio = per_sample[label] / reference
        longest = max(run_samples(config["train"], sizes[r.train_set][0], r.fraction) for r in runs)
        need = JobNeed(f"train {label}", sorted({r.method for r in runs}), at_micro[label][memory_key],
                       at_micro[label]["how"], per_sample[label], ratio,
                       longest * ratio / throughput.samples_per_s / 3600 / gpus, limits=train_limits)
        _memory_check(need, str(micro), train_limits, measured_on)
        if train_limits.get("runtime") is not None and need.longest_hours * 60 > float(train_limits["runtime"]):
            need.warnings.append(f"warning: {need.job}: the longest run needs ~{need.longest_hours * 60:,.0f} min, "
                                 f"more than the {train_limits['runtime']} min runtime; it will be cut and "
                                 "resumed from its checkpoint on retry")
        needs.append(need)
    evaluate = job_cost["evaluate"]
    batch = config.get("evaluate", {}).get("batch_size", 128)
    at_batch = cost_at(evaluate["measured"], "batch", batch, ("encode_s", "peak_rss_mb", "peak_device_mb"))
    largest = max((n for b in {e.eval_benchmark for e in plan.all_evaluations(config)}
                   if (n := _test_size(config, b)) is not None), default=0)
    # the measuring device's speed relative to the plan's GPU throughput, from the reference framework
    device_factor = (1 / throughput.samples_per_s) / reference
    need = JobNeed("evaluate", ["every evaluation"], at_batch[memory_key], at_batch["how"],
                   at_batch["encode_s"] / batch, at_batch["encode_s"] / batch / reference,
                   largest * at_batch["encode_s"] / batch * device_factor / 3600, limits=eval_limits)
    _memory_check(need, f"{batch} (evaluate.batch_size)", eval_limits, measured_on)
    if eval_limits.get("runtime") is not None and need.longest_hours * 60 > float(eval_limits["runtime"]):
        need.warnings.append(f"warning: evaluate: encoding {largest:,} images and captions needs "
                             f"~{need.longest_hours * 60:,.0f} min, more than the {eval_limits['runtime']} min runtime")
    needs.append(need)
    return needs


def format_job_needs(needs: list[JobNeed], job_cost: dict, path, micro_batch: int) -> str:
    m = job_cost["machine"]
    load = job_cost.get("load_average_before", [None])[0], job_cost.get("load_average_after", [None])[0]
    out = ["", f"per-job needs, measured by benchmarks/job_cost.py ({path}) on {job_cost['date'][:10]}: "
               f"{m.get('device', 'cpu')} ({m.get('gpu') or m.get('processor', '?')}, {m.get('cpus', '?')} CPUs, "
               f"{m.get('threads', '?')} thread(s), {job_cost.get('precision', 'fp32')}), load average "
               f"{load[0]} -> {load[1]}" + ("; times are inflated by other processes" if (load[0] or 0) > (m.get("cpus") or 1)
                                            else "")]
    header = ("job", "memory MB", "s/sample", "vs HN-CLIP", "longest job h", "limits (mem_mb, runtime min)", "methods")
    rows = [header]
    for n in needs:
        rows.append((n.job, f"{n.memory_mb:,.0f}" if n.memory_mb == n.memory_mb else "-",
                     f"{n.seconds_per_sample:.3g}" if n.seconds_per_sample == n.seconds_per_sample else "-",
                     f"{n.ratio:.2f}x" if n.ratio == n.ratio else "-",
                     _hours(n.longest_hours) if n.longest_hours == n.longest_hours else "-",
                     f"{n.limits.get('mem_mb', '-')}, {n.limits.get('runtime', '-')}", ", ".join(n.methods)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for r in rows:
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False)))
                   + "  " + r[-1])
    out.append(f"memory: peak at micro-batch {micro_batch} per process ("
               f"{'device memory' if m.get('device') == 'cuda' else 'resident set of a CPU job'}; "
               f"{next((n.memory_how for n in needs if n.memory_how != 'not measured'), '')}); time: forward + backward on the measuring device, the "
               "longest job scaled from the plan's throughput by each framework's measured cost")
    out += [w for n in needs for w in n.warnings]
    return "\n".join(out)


# ------------------------------------------------------------------------------------- diagnostics
@dataclass
class DiagnosticsCost:
    """What the gradient-dynamics probe costs one kind of training job (a framework label)."""

    job: str
    runs: int  # runs of this kind in the grid
    probed: int  # of those, runs that probe (hnclip.plan.probed_runs)
    step_s: float  # a plain optimizer step (accum_steps micro-batches + AdamW) on the measuring device
    probe_s: float  # what a probed step adds to it
    job_share: float  # share of a probing job's time spent probing
    hours: float  # GPU-hours of this kind's runs (as the plan counts them)
    probe_hours: float  # of those, spent probing, with the config's probe_runs
    probe_hours_all: float  # the same with every run probing (train.probe_runs: all)
    how: str
    earlier_probe: bool = False  # measured with the probe before it read the step's .grad


def _probed_steps(steps: int, every: int) -> int:
    """Steps 1, 1 + k, 1 + 2k, ... of ``steps`` (hnclip.train.probes_step)."""
    return -(-steps // every) if every > 0 else 0


def diagnostics_cost(config: dict, job_cost: dict, throughput: Throughput, sizes: dict,
                     gpus: int = 1) -> list[DiagnosticsCost]:
    """Per framework label: the probe's share of a probing job's time and of the kind's GPU-hours.

    A probed micro-batch adds ``ratio * forward_backward``, ``ratio`` the median over the measured
    micro-batches of ``(probe_step_s - forward_backward_s - optimizer_s) / forward_backward_s``, each from
    one process (``benchmarks/job_cost.py``, one micro-batch per step, the probe as the loop runs it; the
    file's ``probe`` section where it has the framework, else the framework's own entry); the plain
    costs at the config's micro-batch are the framework's own lines. A step of ``accum_steps``
    micro-batches costs ``accum * forward_backward + optimizer``, a probed one ``accum * ratio *
    forward_backward`` more. A run probes ``ceil(steps / dynamics_every)`` of its
    steps if it is one of :func:`hnclip.plan.probed_runs`; its probe share of its time applies to its
    GPU-hours as the plan counts them (samples / samples-per-s).
    """
    train = config["train"]
    accum, every = train["accum_steps"], train["dynamics_every"]
    micro = max(1, train["micro_batch"] // max(1, gpus))
    probed = plan.probed_runs(config)
    by_label: dict[str, list] = {}
    for run in plan.all_runs(config):
        by_label.setdefault(_framework_label(config, run.method), []).append(run)
    rows = []
    probe_section = (job_cost.get("probe") or {}).get("frameworks") or {}
    for label, runs in sorted(by_label.items()):
        # the file's probe section (job_cost.py --probe-only) first, else the framework's own measurement
        entry = probe_section.get(label) or job_cost["frameworks"].get(label) or {}
        measured = entry.get("measured") or []
        keys = ("forward_backward_s", "optimizer_s", "probe_step_s")
        if not measured or not all(k in m for m in measured for k in keys):
            rows.append(DiagnosticsCost(f"train {label}", len(runs), sum(r in probed for r in runs), *[math.nan] * 6,
                                        "not measured (benchmarks/job_cost.py)"))
            continue
        # what a probed micro-batch adds, relative to its forward + backward in the same process: a ratio
        # that other processes' load inflates far less than the absolute times
        ratio = max(0.0, statistics.median(
            (m["probe_step_s"] - m["forward_backward_s"] - m["optimizer_s"]) / m["forward_backward_s"] for m in measured))
        base = job_cost["frameworks"].get(label, {}).get("measured") or []
        if not base or not all(k in m for m in base for k in keys[:2]):
            base = measured
        at = cost_at(base, "micro_batch", micro, keys[:2])
        step_s = accum * at["forward_backward_s"] + at["optimizer_s"]
        probe_s = accum * ratio * at["forward_backward_s"]
        hours = probe_hours = probe_hours_all = 0.0
        for run in runs:
            samples = run_samples(train, sizes[run.train_set][0], run.fraction)
            steps = samples // (train["micro_batch"] * accum)
            run_hours = samples / throughput.samples_per_s / 3600
            extra = _probed_steps(steps, every) * probe_s
            share = extra / (steps * step_s + extra) if steps else 0.0
            hours += run_hours
            probe_hours_all += run_hours * share
            probe_hours += run_hours * share if run in probed else 0.0
        full = _probed_steps(1000 * every, every) * probe_s  # a long run's steady share
        where = f"{entry['date'][:10]} probe section" if label in probe_section else "its own entry"
        rows.append(DiagnosticsCost(f"train {label}", len(runs), sum(r in probed for r in runs), step_s, probe_s,
                                    full / (1000 * every * step_s + full) if every else 0.0, hours, probe_hours,
                                    probe_hours_all, f"{label} {ratio:.2f}x ({where})",
                                    not all(m.get("probe") for m in measured)))
    return rows


def format_diagnostics(rows: list[DiagnosticsCost], config: dict, micro_batch: int) -> str:
    train = config["train"]
    every, probe_runs = train["dynamics_every"], train.get("probe_runs", "read")
    probed, total = sum(r.probed for r in rows), sum(r.runs for r in rows)
    out = ["", f"diagnostics: the gradient-dynamics probe on every {every}th optimizer step of {probed} of {total} "
               f"runs (train.probe_runs: {probe_runs}" + ("; the runs whose probe columns the report reads"
                                                           if probe_runs == "read" else "") + ")"]
    if not every:
        out[-1] = "diagnostics: none (train.dynamics_every is 0: no run probes)"
        return "\n".join(out)
    header = ("training job", "probing runs", "probed step", "of a probing job", "of the kind's GPU-h",
              "all runs probing")
    table = [header]
    for r in rows:
        measured = r.step_s == r.step_s
        table.append((r.job.removeprefix("train "), f"{r.probed} of {r.runs}",
                       f"+{r.probe_s / r.step_s:.0%}" if measured else "-",
                       f"{r.job_share:.1%}" if measured else "-",
                       f"{r.probe_hours / r.hours:.1%}" if measured and r.hours else "-",
                       f"{r.probe_hours_all / r.hours:.1%}" if measured and r.hours else "-"))
    widths = [max(len(t[i]) for t in table) for i in range(len(header))]
    out += ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(t, widths, strict=True)))
            for t in table]
    measured = [r for r in rows if r.step_s == r.step_s]
    hours = sum(r.hours for r in measured)
    probe_hours, probe_hours_all = sum(r.probe_hours for r in measured), sum(r.probe_hours_all for r in measured)
    if hours:
        out.append(f"the grid: {_hours(probe_hours)} of {_hours(hours)} training GPU-hours probing "
                   f"({probe_hours / hours:.1%}); with every run probing (train.probe_runs: all) "
                   f"{_hours(probe_hours_all)} ({probe_hours_all / hours:.1%})"
                   + ("" if len(measured) == len(rows) else f"; {len(rows) - len(measured)} kind(s) not measured"))
    out.append(f"probe cost: what a probed micro-batch adds, relative to its forward + backward, measured in one "
               f"process each ({', '.join(r.how for r in measured) or 'not measured'}), on the plain step's cost at "
               f"micro-batch {micro_batch}; the per-epoch evaluation is not counted")
    earlier = [r.job.removeprefix("train ") for r in measured if r.earlier_probe]
    if earlier:
        out.append(f"  {', '.join(earlier)}: measured with the probe before it read the step's .grad (two passes where the "
                   "objectives differ, fp32 copies of both gradients): an upper bound; re-measure with "
                   f"benchmarks/job_cost.py --probe-only --frameworks {','.join(earlier)}")
    return "\n".join(out)


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
               file=None, job_cost=None) -> list[ExperimentCost]:
    """Print the plan of ``configfile`` (one path, or several layered in order) with ``profile``'s train
    resources, if given, and, when job costs were measured (``job_cost``, default benchmarks/job_cost.json;
    False: leave them out), what each job needs against its limits; return its rows."""
    config = load_config(configfile)
    runs = plan.all_runs(config)
    train_sets = {r.train_set for r in runs}
    if config["backbone"]["source"] == "pretrain":
        train_sets.add(config["pretrain"]["benchmark"])
    sizes = train_set_sizes(config, train_sets, results_dir)
    train_limits = job_resources(config, "train", profile)
    device_type = "cuda" if int(train_limits.get("gpu", 0) or 0) >= 1 else "cpu"
    throughput = resolve_throughput(config, results_dir, samples_per_s, device_type)
    resources = profile_train_resources(profile) if profile else None
    gpus = int((resources or {}).get("gpu", 1) or 1)
    rows = build_plan(config, throughput, sizes, gpus_per_job=gpus)
    label = configfile if isinstance(configfile, str | Path) else " + ".join(map(str, configfile))
    text = format_plan(rows, throughput, sizes, label, resources, profile)
    cost_path = None if job_cost is False else job_cost_path(job_cost)
    if job_cost is False:
        pass
    elif cost_path is not None and cost_path.is_file():
        cost = load_job_cost(cost_path)
        needs = job_needs(config, cost, throughput, sizes, train_limits, job_resources(config, "evaluate", profile))
        text += "\n" + format_job_needs(needs, cost, cost_path, config["train"]["micro_batch"])
        text += "\n" + format_diagnostics(diagnostics_cost(config, cost, throughput, sizes, gpus), config,
                                          max(1, config["train"]["micro_batch"] // gpus))
    elif job_cost is not None:
        raise FileNotFoundError(f"hnclip plan: job costs {job_cost} do not exist")
    else:
        text += "\nper-job needs: no benchmarks/job_cost.json (run benchmarks/job_cost.py to measure them)"
    print(text, file=file or sys.stdout)
    return rows
