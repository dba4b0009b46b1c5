"""The results/ layout: where a run, its evaluations, protocol variants, exports, logs and job benchmarks
live. The one home of these paths: the plan, the records and tables, the protocol table and the workflow's
rules (``workflow/rules/*.smk``) all build them here.

A run is named by :data:`RUN`, ``<train_set>/<method>/g<gamma>/f<fraction>/s<seed>``. Every function's
arguments default to Snakemake wildcards, so a rule's path is the same call as a job's concrete one:
``paths.eval_path()`` is ``results/evals/{train_set}/.../s{seed}/{eval_benchmark}.json`` and
``paths.eval_path(run.path, "docci")`` one run's record. Numbers are written as their callers pass them;
:func:`format_number` is the canonical text of a gamma, fraction or seed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "RESULTS",
    "RUN",
    "RUNS_DIR",
    "RUN_FIELDS",
    "benchmark_path",
    "checkpoint_dir",
    "eval_path",
    "export_dir",
    "format_number",
    "log_path",
    "parse_run_path",
    "protocol_path",
    "run_dir",
    "run_name",
    "run_of_dir",
    "run_path",
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
