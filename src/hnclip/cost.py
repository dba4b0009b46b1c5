"""What a config's training will cost before anything is submitted: jobs, samples and GPU-hours per experiment.

For each experiment: its training and evaluation jobs (a run or evaluation shared by several experiments
is counted once, for the first experiment in the config that needs it, so the rows add up to the total;
the zero-shot backbone's evaluations count with the main and transfer tables, the protocol table's
test-split variants in a row of their own),
the samples its new runs train on, and the GPU-hours they take at a samples/s rate. The rate comes, in
order, from ``--samples-per-s``, from earlier runs (``results/runs/**/summary.json`` whose model has the
config's backbone; the median), or, for Long-CLIP-L (or a checkpoint not converted yet, assumed to be
it), from :data:`DEFAULT_SAMPLES_PER_S`; the output names its source. Any other backbone without a
measured run has no rate: the plan says so and leaves its GPU-hours unestimated (NaN, printed ``?``)
rather than price a small model at Long-CLIP-L's cost.
Training set sizes come from the config (``expected_counts.train``, the synthetic generator's
``n_train``), else a prepared manifest, else the adapter's protocol count. Evaluation and data preparation
are left out of the GPU-hours: they are minutes against the runs' hours.

Runs in a second or two on the paper grid: nothing is loaded but the config, JSON summaries and, when
prepared, the training manifests. What each kind of job needs (memory, time, the probe's share) is
:mod:`hnclip.job_needs`; ``hnclip plan`` (:mod:`hnclip.cli.plan`) prints both.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from hnclip import paths, plan, protocols
from hnclip.backbone.released import released_spec
from hnclip.checkpoint_formats import backbone_origin
from hnclip.config.validation import ConfigError
from hnclip.data import protocol_counts
from hnclip.data.subsets import subset_size

__all__ = [
    "DEFAULT_BACKBONE",
    "DEFAULT_SAMPLES_PER_S",
    "ExperimentCost",
    "backbone_runs",
    "planned_backbone",
    "Throughput",
    "build_plan",
    "measured_throughput",
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


# ---------------------------------------------------------------------------------------------- data
def _count_manifest(path: Path) -> int:
    from hnclip.data.manifest import read_manifest

    return len(read_manifest(path))


def _protocol_train_count(adapter: str) -> tuple[int, str] | None:
    """The train count an adapter's protocol fixes (DOCCI 9,647, VG 14,575, DCI's GOAL split 5,806)."""
    counts = protocol_counts(adapter)
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
        manifest = paths.in_results(results_dir, paths.manifest_path(name, "train"))
        if isinstance(bench.get("expected_counts", {}).get("train"), int):
            sizes[name] = (bench["expected_counts"]["train"], f"config benchmarks.{name}.expected_counts.train")
        elif bench.get("adapter", "").startswith("synthetic") and bench.get("synthetic", {}).get("n_train"):
            sizes[name] = (int(bench["synthetic"]["n_train"]), f"config benchmarks.{name}.synthetic.n_train")
        elif manifest.is_file() and _manifest_fits(bench, manifest):
            sizes[name] = (_count_manifest(manifest), f"prepared manifest {manifest}")
        elif (count := _protocol_train_count(bench.get("adapter", ""))) is not None:
            sizes[name] = count
        elif isinstance(count := _own_table_count(name, bench), tuple):
            sizes[name] = count
        else:
            why = f" ({count})" if count else ""
            raise UnknownTrainSize(
                f"the training set size of benchmark {name!r} is unknown until its data is prepared{why}: prepare "
                f"it with `snakemake {paths.manifest_path(name, 'train')}` and the same --configfile, or set "
                f"benchmarks.{name}.expected_counts.train to plan without it")
    return sizes


class UnknownTrainSize(ConfigError):
    """A training set whose size neither the config, a prepared manifest nor the files tell; ``hnclip plan``
    prints its one line (no traceback), as for a config error."""


def _own_table_count(name: str, bench: dict) -> tuple[int, str] | str | None:
    """A table benchmark not prepared yet: (its train table's rows, where from), read without opening an
    image; else why not (the table missing or unreadable), or None for another adapter."""
    if bench.get("adapter") != "table":
        return None
    from hnclip.data.own import split_files, split_settings
    from hnclip.data.table import table_rows

    try:
        settings = bench.get("table")
        table = split_files("table", bench["root"], settings, name).get("train", [None])[0]
        if table is None:
            return f"benchmarks.{name}.table.files has no train table"
        if not table.is_file():
            return f"its train table {table} does not exist"
        rows = sum(1 for _ in table_rows(table, split_settings("table", settings, name)))
    except (OSError, ValueError, KeyError) as error:
        return f"{type(error).__name__}: {error}"
    return rows, f"the rows of {table}, not prepared yet"


# ----------------------------------------------------------------------------------------- throughput
def _backbone_name(config: dict, results_dir) -> str | None:
    """The architecture this config's runs start from, by registry name, if it can be known.

    A prepared backbone (``results/backbone/model``) counts only if it fits the config (same image size
    and text positions, and the configured name when the DAG pretrains it): a results folder left by
    another config must not lend its backbone, nor its runs' throughput, to this one.
    """
    backbone, origin = config["backbone"], backbone_origin(config)
    prepared = Path(results_dir) / "backbone/model/model.json"
    if prepared.is_file():
        try:
            spec = json.loads(prepared.read_text())["spec"]
            fits = (spec["context_length"] == backbone["context_length"]
                    and spec["config"]["vision_cfg"]["image_size"] == backbone["image_size"])
        except (OSError, json.JSONDecodeError, KeyError, TypeError):
            spec, fits = {}, False
        if origin.trained_in_dag:
            fits = fits and spec.get("name") == backbone["name"]
        if fits and spec.get("name"):
            return spec["name"]
    if origin.trained_in_dag:
        return backbone["name"]
    if origin.ships_its_spec:
        try:
            return released_spec(backbone["checkpoint"]).get("name")
        except (OSError, ValueError, KeyError):
            return None
    return None  # a checkpoint not converted yet: its architecture is known only after conversion


def planned_backbone(config: dict, results_dir) -> str:
    """The architecture the plan prices: the config's backbone by name, or Long-CLIP-L for a checkpoint
    not converted yet (the default calibration's assumption, which the output states)."""
    return _backbone_name(config, results_dir) or DEFAULT_BACKBONE


def backbone_runs(config: dict, results_dir, device_type: str | None = None) -> list[dict]:
    """The summaries of earlier runs (``results/runs/**/summary.json``) whose saved model has this config's
    backbone and that ran on ``device_type`` (``cuda``/``cpu``; None: any) with a measured rate: a CPU
    rehearsal's runs must not price GPU jobs."""
    backbone = _backbone_name(config, results_dir)
    if backbone is None:
        return []
    found = []
    for summary_path in sorted(paths.in_results(results_dir, paths.RUNS_DIR).rglob("summary.json")):
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
            found.append(summary)
    return found


def measured_throughput(config: dict, results_dir, device_type: str | None = None) -> Throughput | None:
    """Median samples/s of :func:`backbone_runs`, if any."""
    backbone = _backbone_name(config, results_dir)
    runs = backbone_runs(config, results_dir, device_type)
    rates = [float(summary["samples_per_s"]) for summary in runs]
    devices = {str(summary.get("device", "?")) for summary in runs}
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
    if backbone is not None and backbone != DEFAULT_BACKBONE:
        where = f"{Path(results_dir) / 'runs'}" + (f" on {device_type}" if device_type else "")
        return Throughput(math.nan, f"none measured for backbone {backbone!r} (no run of it in {where}; the "
                                    f"default calibration is {DEFAULT_BACKBONE}'s, not this model's): GPU-hours "
                                    "not estimated; train one run and plan again, or give --samples-per-s")
    note = "" if backbone is not None else f"; assumes the {config['backbone']['source']} checkpoint is Long-CLIP-L"
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
        raise ConfigError(f"{n} training samples (fraction {fraction} of {n_train}) are fewer than one effective "
                          f"batch (train.micro_batch {train['micro_batch']} x train.accum_steps {train['accum_steps']})")
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
    if backbone_origin(config).trained_in_dag:
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
