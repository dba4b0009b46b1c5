"""What each kind of job needs, from measured costs: memory at the config's micro-batch, time per sample,
the longest job against its limits, and what the gradient-dynamics probe adds to a training job.

The measurements are ``hnclip/job_cost.json`` (package data, written by ``benchmarks/job_cost.py``) at a few
micro-batch and batch sizes; :func:`cost_at` reads a value at the config's size off them (the measurement
itself, or a least-squares line through the sizes measured). Times scale to the plan's GPU throughput
(:mod:`hnclip.cost`) through the reference framework's measured cost.

The file measures one model (its ``model``; the committed one Long-CLIP-L at the paper's shapes) and
prices only a config of that backbone (:func:`job_cost_fits`). Any other is priced from its own earlier
runs (:func:`run_needs`: each framework's ``summary.json`` peak memory and samples/s), or the plan says it
has no measurement: a toy or own-data model must not be shown Long-CLIP-L's 19 GB and seconds per sample.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from hnclip import plan
from hnclip.cost import DEFAULT_BACKBONE, Throughput, backbone_runs, planned_backbone, run_samples
from hnclip.data import protocol_counts

__all__ = [
    "JOB_COST_FILE",
    "REFERENCE_FRAMEWORK",
    "DiagnosticsCost",
    "JobNeed",
    "cost_at",
    "diagnostics_cost",
    "committed_job_cost_path",
    "job_cost_fits",
    "job_cost_path",
    "job_needs",
    "load_job_cost",
    "speed_against_reference",
    "run_needs",
]

# the paper's speed claims (abstract; D.1, Table A3): these frameworks' training time against HN-CLIP's,
# by the key of report/published_numbers.yaml that holds the paper's number
SPEED_CLAIMS = {"goal": "speed.goal", "structxlip": "speed.structxlip"}

# the committed measurements: package data (importlib.resources), written by benchmarks/job_cost.py
JOB_COST_FILE = "job_cost.json"
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
    """The measured job costs: ``path``, else the committed ones shipped with the package
    (``hnclip/job_cost.json``), None if that is absent."""
    if path is not None:
        return Path(path)
    return committed_job_cost_path()


def committed_job_cost_path() -> Path | None:
    """``hnclip/job_cost.json``, the package's measurements (``benchmarks/job_cost.py`` writes them)."""
    candidate = Path(str(resources.files("hnclip") / JOB_COST_FILE))
    return candidate if candidate.is_file() else None


def load_job_cost(path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"hnclip plan: cannot read the job costs {path}: {err}") from err
    for key in ("machine", "date", "frameworks", "evaluate"):
        if key not in data:
            raise ValueError(f"hnclip plan: {path} has no {key!r} (write it with benchmarks/job_cost.py)")
    return data


def job_cost_fits(config: dict, job_cost: dict, results_dir) -> bool:
    """Whether the measured job costs are of this config's backbone (a file without ``model`` is of
    Long-CLIP-L, as job_cost.py's default)."""
    return job_cost.get("model", DEFAULT_BACKBONE) == planned_backbone(config, results_dir)


def _summary_label(settings: dict) -> str:
    """A run summary's framework label, as :func:`_framework_label` names a config's method."""
    if settings.get("framework", "longclip") == "longclip":
        return "hnclip" if float(settings.get("token_weight", 0) or 0) > 0 else "longclip"
    return str(settings["framework"])


def run_needs(config: dict, results_dir, sizes: dict, train_limits: dict) -> list[JobNeed]:
    """One row per framework the config trains, from its earlier runs of this config's backbone on the
    plan's device (:func:`hnclip.cost.backbone_runs`): the largest peak memory of its runs' summaries and
    their median samples/s (wall time over the run: what a job of it takes); a framework none of whose
    runs was measured gets a row saying so. Empty when no run was measured."""
    device_type = "cuda" if int(train_limits.get("gpu", 0) or 0) >= 1 else "cpu"
    by_label: dict[str, list] = {}
    for summary in backbone_runs(config, results_dir, device_type):
        by_label.setdefault(_summary_label(summary.get("config") or {}), []).append(summary)
    if not by_label:
        return []
    rate = {label: statistics.median(float(s["samples_per_s"]) for s in runs) for label, runs in by_label.items()}
    reference = rate.get(REFERENCE_FRAMEWORK) or next(iter(rate.values()))
    planned: dict[str, list] = {}
    for run in plan.all_runs(config):
        planned.setdefault(_framework_label(config, run.method), []).append(run)
    needs = []
    for label, runs in sorted(planned.items()):
        methods = sorted({r.method for r in runs})
        if label not in by_label:
            needs.append(JobNeed(f"train {label}", methods, math.nan, "not measured", math.nan, math.nan, math.nan,
                                 warnings=[f"warning: no earlier run of {label!r} on this backbone measured it"]))
            continue
        summaries = by_label[label]
        memory = [float(s["peak_memory_mb"]) for s in summaries if isinstance(s.get("peak_memory_mb"), (int, float))]
        micro = sorted({int((s.get("config") or {}).get("micro_batch", 0)) for s in summaries})
        longest = max(run_samples(config["train"], sizes[r.train_set][0], r.fraction) for r in runs)
        need = JobNeed(f"train {label}", methods, max(memory) if memory else math.nan,
                       f"peak of {len(summaries)} run(s) at micro-batch {', '.join(map(str, micro))}",
                       1 / rate[label], reference / rate[label], longest / rate[label] / 3600, limits=train_limits)
        _memory_check(need, ", ".join(map(str, micro)), train_limits, device_type)
        _runtime_check(need, train_limits)
        needs.append(need)
    return needs


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
    counts = protocol_counts(config["benchmarks"][bench]["adapter"])
    if isinstance(counts.get("test"), int):
        return counts["test"]
    per_protocol = [c["test"] for c in counts.values() if isinstance(c, dict) and isinstance(c.get("test"), int)]
    return max(per_protocol, default=None)  # DCI: GOAL's 1,999 or all 7,805; the larger bounds the time


def _runtime_check(need: JobNeed, limits: dict) -> None:
    """Warn when the longest training job of ``need``'s kind outlasts its runtime limit."""
    if limits.get("runtime") is not None and need.longest_hours * 60 > float(limits["runtime"]):
        need.warnings.append(f"warning: {need.job}: the longest run needs ~{need.longest_hours * 60:,.0f} min, "
                             f"more than the {limits['runtime']} min runtime; it will be cut and "
                             "resumed from its checkpoint on retry")


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
        _runtime_check(need, train_limits)
        needs.append(need)
    evaluate = job_cost["evaluate"]
    batch = config["evaluate"]["batch_size"]
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


def speed_against_reference(needs: list[JobNeed], config: dict, sizes: dict,
                            throughput: Throughput) -> list[dict]:
    """The paper's cost claim at this config's scale, from the measured job costs: for each framework of
    :data:`SPEED_CLAIMS` the config trains, its training time per sample against HN-CLIP's (a plain step of
    each: neither the gradient probe nor the evaluations after each epoch, which are no cost of the method),
    the hours of one full-data run on each train set at the plan's throughput, and the preprocessing
    products it needs first (their time is not in the job costs: "not measured")."""
    from hnclip.frameworks.registry import framework_entry

    by_job = {n.job.removeprefix("train "): n for n in needs}
    reference = by_job.get(REFERENCE_FRAMEWORK)
    rows = []
    for framework, key in SPEED_CLAIMS.items():
        need = by_job.get(framework)
        if need is None:
            continue
        runs = [r for r in plan.all_runs(config) if config["methods"][r.method]["framework"] == framework
                and float(r.fraction) == 1.0]
        hours = {t: run_samples(config["train"], sizes[t][0], "1") * need.ratio / throughput.samples_per_s / 3600
                 for t in sorted({r.train_set for r in runs})}
        rows.append({"framework": framework, "published": key, "ratio": need.ratio if reference else math.nan,
                     "hours": hours, "products": list(framework_entry(framework).products)})
    return rows


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
    """Steps 1, 1 + k, 1 + 2k, ... of ``steps`` (hnclip.training.step.probes_step)."""
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
