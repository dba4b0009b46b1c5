"""The results/ layout: where a run, its evaluations, protocol variants, exports, logs and job benchmarks
live. The one home of these paths: the plan, the records and tables, the protocol table and the workflow's
rules (``workflow/rules/*.smk``) all build them here.

A run is named by :data:`RUN`, ``<train_set>/<method>/g<gamma>/f<fraction>/s<seed>``. Every function's
arguments default to Snakemake wildcards, so a rule's path is the same call as a job's concrete one:
``paths.eval_path()`` is ``results/evals/{train_set}/.../s{seed}/{eval_benchmark}.json`` and
``paths.eval_path(run.path, "docci")`` one run's record. Numbers are written as their callers pass them;
:func:`format_number` is the canonical text of a gamma, fraction or seed.

Beside the runs: the backbone and each benchmark's prepared data, the specs, tables, figures and report files,
and the ``resources/`` folders the checkout pins. Rules keep their input/output literals (the DAG's
declaration; tests/test_paths.py checks them against these functions); Python code, the rules' input
functions and help texts build every such path here (the same test scans src/ for one spelled elsewhere).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "BACKBONES_DIR",
    "BACKBONE_MODEL",
    "CLAIMS",
    "DATA_DIR",
    "EFFECTIVE_CONFIG",
    "PREMISE",
    "PRETRAINED_MODEL",
    "REPORT",
    "RESOURCES",
    "RESULTS",
    "RUN",
    "RUNS_DIR",
    "RUN_FIELDS",
    "SUMMARY_JSON",
    "SUMMARY_MD",
    "TUNING_RECORD",
    "WEIGHTS_DIR",
    "benchmark_path",
    "checkpoint_dir",
    "data_dir",
    "eval_path",
    "export_dir",
    "figure_path",
    "format_number",
    "geometry_path",
    "images_dir",
    "in_results",
    "log_path",
    "manifest_path",
    "parse_run_path",
    "product_dir",
    "protocol_path",
    "regime_path",
    "released_eval_path",
    "released_model_dir",
    "run_dir",
    "run_name",
    "run_of_dir",
    "run_path",
    "source_record_path",
    "spec_path",
    "subset_path",
    "table_path",
    "zeroshot_eval_path",
    "zeroshot_protocol_path",
]

RESULTS = "results"
RUNS_DIR = f"{RESULTS}/runs"
RUN_FIELDS = ("train_set", "method", "gamma", "fraction", "seed")
# a run's path below results/runs/ (and results/evals/, results/protocols/, ...): Snakemake wildcards, and a
# str.format template of the run's fields
RUN = "{train_set}/{method}/g{gamma}/f{fraction}/s{seed}"


def format_number(x) -> str:
    """Canonical text of a gamma, fraction or seed in run paths: 0.5 -> '0.5', 1.0 -> '1', 0 -> '0'.

    The one formatter of these numbers, for the plan and for the records read back (which key a record
    by the same text); a value that is not a number (a hand-made record's seed) is kept as its text."""
    try:
        return f"{float(x):g}"
    except (TypeError, ValueError):
        return str(x)


def run_path(train_set, method, gamma, fraction, seed) -> str:
    """:data:`RUN` of these fields, each written as given (``str``)."""
    return RUN.format(train_set=train_set, method=method, gamma=gamma, fraction=fraction, seed=seed)


def run_name(run: Mapping, numbers=format_number) -> str:
    """:data:`RUN` of a run's fields (a mapping with :data:`RUN_FIELDS`), gamma, fraction and seed written
    by ``numbers`` (:func:`format_number`; ``str`` keeps them as they are)."""
    return run_path(run["train_set"], run["method"], numbers(run["gamma"]), numbers(run["fraction"]),
                    numbers(run["seed"]))


def run_dir(run: str = RUN) -> str:
    """A run's folder: summary.json, dynamics.csv, epochs.csv, epoch_ranks.csv, model/."""
    return f"{RUNS_DIR}/{run}"


def run_of_dir(folder) -> str:
    """The run's path (:data:`RUN`) of its folder :func:`run_dir`; any other path unchanged."""
    return str(folder).removeprefix(f"{RUNS_DIR}/")


# :data:`RUN` as a regular expression of a path's tail: each field one path component's text (the seed's
# up to an optional ``.tsv``, the suffix of a run's Snakemake benchmark file)
_RUN_TAIL = re.compile("".join(re.escape(text) if i % 2 == 0 else "([^/]+?)"
                               for i, text in enumerate(re.split(r"\{(\w+)\}", RUN))) + r"(?:\.tsv)?$")


def parse_run_path(path) -> tuple[str, ...] | None:
    """The run's fields (:data:`RUN_FIELDS`, as text) from the tail of a path that ends in :data:`RUN`: a run
    folder (``.../docci/hnclip/g0.5/f1/s0``) or a file named after its run (``.../s0.tsv``); None where the
    path ends otherwise."""
    match = _RUN_TAIL.search(Path(path).as_posix().rstrip("/"))
    return match.groups() if match else None


def train_set_of_dir(folder) -> str | None:
    """The train set of a run's folder, the part after ``runs`` in ``.../runs/<train_set>/<method>/...``,
    wherever the results folder lies (a relative or absolute path); ``None`` for any other path."""
    parts = Path(str(folder)).parts
    runs = Path(RUNS_DIR).name
    return parts[parts.index(runs) + 1] if runs in parts[:-1] else None


def checkpoint_dir(run: str = RUN) -> str:
    """A run's resumable checkpoints (not a declared output: a requeued job must find them)."""
    return f"{RESULTS}/checkpoints/{run}"


def eval_path(run: str = RUN, eval_benchmark: str = "{eval_benchmark}") -> str:
    """A run's evaluation record on one benchmark's test split."""
    return f"{RESULTS}/evals/{run}/{eval_benchmark}.json"


def zeroshot_eval_path(eval_benchmark: str = "{eval_benchmark}") -> str:
    """The backbone's evaluation record before fine-tuning (the zero-shot row)."""
    return f"{RESULTS}/evals/zeroshot/{eval_benchmark}.json"


def protocol_path(run: str = RUN, eval_benchmark: str = "{eval_benchmark}", variant: str = "{variant}") -> str:
    """A run's evaluation on one published test-split variant of a benchmark (the protocol table)."""
    return f"{RESULTS}/protocols/{run}/{eval_benchmark}/{variant}.json"


def zeroshot_protocol_path(eval_benchmark: str = "{eval_benchmark}", variant: str = "{variant}") -> str:
    return f"{RESULTS}/protocols/zeroshot/{eval_benchmark}/{variant}.json"


def export_dir(run: str = RUN, fmt: str = "{format}") -> str:
    """A run's model in another library's format (``hnclip export``)."""
    return f"{RESULTS}/exports/{run}/{fmt}"


def log_path(job: str, name: str) -> str:
    """A job's log: ``results/logs/<job>/<name>.log``."""
    return f"{RESULTS}/logs/{job}/{name}.log"


def benchmark_path(job: str, name: str) -> str:
    """A job's Snakemake benchmark TSV: ``results/benchmarks/<job>/<name>.tsv``."""
    return f"{RESULTS}/benchmarks/{job}/{name}.tsv"


# ------------------------------------------------------------------------ the backbone and the prepared data
# Every argument defaults to its Snakemake wildcard, as above; help texts pass placeholders ("<benchmark>").
BACKBONE_MODEL = f"{RESULTS}/backbone/model"  # the model every run fine-tunes and the zero-shot row scores
PRETRAINED_MODEL = f"{RESULTS}/pretrain/long/model"  # the DAG's own pretrained backbone (backbone.source pretrain)
DATA_DIR = f"{RESULTS}/data"  # one folder per benchmark: its source record, manifests, image stores, subsets


def data_dir(benchmark: str = "{benchmark}") -> str:
    """A benchmark's prepared data: ``source.json``, ``<split>.csv``, ``<split>_images/``, ``subsets/``."""
    return f"{DATA_DIR}/{benchmark}"


def source_record_path(benchmark: str = "{benchmark}") -> str:
    """What the fetch step found for a benchmark (its files and checksums)."""
    return f"{data_dir(benchmark)}/source.json"


def manifest_path(benchmark: str = "{benchmark}", split: str = "{split}") -> str:
    """A split's manifest: one row per caption."""
    return f"{data_dir(benchmark)}/{split}.csv"


def images_dir(benchmark: str = "{benchmark}", split: str = "{split}") -> str:
    """A split's image store, at the backbone's geometry."""
    return f"{data_dir(benchmark)}/{split}_images"


def product_dir(train_set: str = "{train_set}", product: str = "{product}") -> str:
    """A train set's cached preprocessing for a framework (``segments``, ``edges``)."""
    return f"{data_dir(train_set)}/train_{product}"


def subset_path(benchmark: str = "{benchmark}", fraction: str = "{fraction}", seed: str = "{seed}") -> str:
    """The ids of a nested fraction subset of a train set's training manifest, one a line."""
    return f"{data_dir(benchmark)}/subsets/f{fraction}_s{seed}.txt"


# ------------------------------------------------------------------------ what the analysis and the report read
REPORT = f"{RESULTS}/report.html"
SUMMARY_MD = f"{RESULTS}/summary.md"
SUMMARY_JSON = f"{RESULTS}/summary.json"
CLAIMS = f"{RESULTS}/claims.json"  # the paper's claims judged (hnclip claims)
PREMISE = f"{RESULTS}/premise.json"  # the premise measurements from the plain and HN-only runs
EFFECTIVE_CONFIG = f"{RESULTS}/config.json"  # the config as Snakemake validated it, defaults filled in
TUNING_RECORD = f"{RESULTS}/tuning/record.json"  # what `snakemake tune` found


def spec_path(experiment: str = "{experiment}") -> str:
    """An experiment's spec: its cells as the tables, figures and report read them (hnclip.plan.write_spec)."""
    return f"{RESULTS}/specs/{experiment}.json"


def table_path(name: str = "{experiment}", ext: str = "csv") -> str:
    return f"{RESULTS}/tables/{name}.{ext}"


def figure_path(name: str, ext: str = "png") -> str:
    return f"{RESULTS}/figures/{name}.{ext}"


def geometry_path(benchmark: str = "{benchmark}") -> str:
    """A benchmark's embedding geometry (hnclip geometry)."""
    return f"{RESULTS}/geometry/{benchmark}.json"


def regime_path(benchmark: str = "{benchmark}") -> str:
    """A benchmark's regime conditions (hnclip regime)."""
    return f"{RESULTS}/regime/{benchmark}.json"


def in_results(results_dir, path: str) -> Path:
    """``path`` (one of this module's, below results/) in another results folder ``results_dir``: where
    ``hnclip plan --results`` and the premise printout find a finished run's files."""
    return Path(results_dir) / Path(path).relative_to(RESULTS)


def released_model_dir(name: str = "{model}") -> str:
    """A released checkpoint converted for evaluation (``models.<name>``; rule ``convert_released``)."""
    return f"{RESULTS}/released/{name}/model"


def released_eval_path(name: str = "{model}", benchmark: str = "{eval_benchmark}") -> str:
    """A released checkpoint's evaluation record on one benchmark (its ``train_set`` is ``released``)."""
    return f"{RESULTS}/evals/released/{name}/{benchmark}.json"


# ------------------------------------------------------------------------ resources/: what the checkout pins
RESOURCES = "resources"
WEIGHTS_DIR = f"{RESOURCES}/checkpoints"  # Hub weights, one locked folder per source (hnclip.data.weights)
BACKBONES_DIR = f"{RESOURCES}/backbones"  # the released backbones the repository ships, one model folder each
