"""The run grid: every experiment's cells (which run, evaluated where, shown in which row and group), and
the runs and evaluations they need, each once. A run is identified by its wildcards (train_set, method,
gamma, fraction, seed); experiments that need the same run share it, so it is trained once."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hnclip import paths
from hnclip.experiments import experiment_entry
from hnclip.paths import format_number
from hnclip.plan.benchmarks import epoch_eval_benchmarks
from hnclip.plan.roles import ZEROSHOT_ROW, spec_roles

__all__ = ["CellMaker", "Evaluation", "Run", "all_evaluations", "all_runs", "experiment_spec", "is_zeroshot",
           "transfer_targets", "zeroshot_eval_benchmarks", "zeroshot_eval_path", "zeroshot_run"]


@dataclass(frozen=True, order=True)
class Run:
    train_set: str
    method: str
    gamma: str
    fraction: str
    seed: int

    @property
    def path(self) -> str:
        return paths.run_path(self.train_set, self.method, self.gamma, self.fraction, self.seed)

    def info(self) -> dict:
        d = asdict(self)
        d["gamma"], d["fraction"] = float(self.gamma), float(self.fraction)
        return d


@dataclass(frozen=True, order=True)
class Evaluation:
    run: Run
    eval_benchmark: str

    @property
    def path(self) -> str:
        return paths.eval_path(self.run.path, self.eval_benchmark)


def _label(config: dict, section: str, key: str) -> str:
    return config[section][key].get("label") or key


def zeroshot_eval_path(eval_benchmark: str) -> str:
    return paths.zeroshot_eval_path(eval_benchmark)


def is_zeroshot(cell: dict) -> bool:
    return bool(cell.get("zeroshot"))


def zeroshot_run(config: dict) -> dict:
    """Run fields of the backbone's evaluation records (no train set, fraction 0): they key its record
    the way a run's fields key a fine-tuned model's."""
    return {"train_set": "none", "method": "zeroshot", "gamma": 0.0, "fraction": 0.0, "seed": config["seeds"][0]}


def _zeroshot_cell(config: dict, eval_benchmark: str, group: str) -> dict:
    return {"row": ZEROSHOT_ROW, "group": group, "variant": None, "x": None, "run": zeroshot_run(config),
            "eval_benchmark": eval_benchmark, "eval_path": zeroshot_eval_path(eval_benchmark), "run_dir": None,
            "zeroshot": True}


def _cell_run(cell: dict) -> Run:
    info = cell["run"]
    return Run(info["train_set"], info["method"], format_number(info["gamma"]), format_number(info["fraction"]),
               info["seed"])


def _runs_of(config: dict, name: str) -> list[Run]:
    return [_cell_run(c) for c in experiment_spec(config, name)["cells"] if not is_zeroshot(c)]


def _run(config: dict, train_set: str, method: str, gamma: float | None = None, fraction: float = 1.0,
         seed: int | None = None) -> Run:
    """A run with the defaults filled in: gamma from config for HN methods and 0 otherwise."""
    if not config["methods"][method].get("hn"):
        gamma = 0.0
    elif gamma is None:
        gamma = config["gamma"]
    seed = config["seeds"][0] if seed is None else seed
    return Run(train_set, method, format_number(gamma), format_number(fraction), int(seed))


def _cell(config: dict, run: Run, eval_benchmark: str, row: str, group: str, variant=None, x=None) -> dict:
    evaluation = Evaluation(run, eval_benchmark)
    return {
        "row": row,
        "group": group,
        "variant": variant,
        "x": x,
        "run": run.info(),
        "eval_benchmark": eval_benchmark,
        "eval_path": evaluation.path,
        "run_dir": paths.run_dir(run.path),
    }


def backbone_origin(config: dict) -> dict:
    """Where the runs' backbone comes from, as a table caption says it: ``source`` (released, pretrain, or a
    converted checkpoint's format) and what it names (the release folder, the architecture, the checkpoint)."""
    backbone = config.get("backbone") or {}
    source = backbone.get("source", "pretrain")
    named = backbone.get("checkpoint") or backbone.get("model") or backbone.get("name")
    return {"source": source, "name": str(named).rstrip("/").rsplit("/", 1)[-1] if named else None}


class CellMaker:
    """What an experiment's spec builder (:attr:`hnclip.experiments.ExperimentEntry.cells`) builds its cells
    with: the config's display labels, each benchmark's in-domain train set, runs with their defaults filled
    in, and the cells themselves."""

    def __init__(self, config: dict):
        self.config = config
        self.bench_label = {b: _label(config, "benchmarks", b) for b in config["benchmarks"]}
        self.method_label = {m: _label(config, "methods", m) for m in config["methods"]}

    def in_domain(self, bench: str) -> str:
        """The train set of ``bench``'s in-domain runs."""
        return self.config["benchmarks"][bench]["train_set"]

    def epoch_benchmarks(self, train_set: str) -> list[str]:
        """The benchmarks a run on ``train_set`` scores after each epoch (:func:`epoch_eval_benchmarks`)."""
        return epoch_eval_benchmarks(self.config, train_set)

    def run(self, train_set: str, method: str, gamma: float | None = None, fraction: float = 1.0,
            seed: int | None = None) -> Run:
        return _run(self.config, train_set, method, gamma=gamma, fraction=fraction, seed=seed)

    def cell(self, run: Run, eval_benchmark: str, row: str, group: str, variant=None, x=None) -> dict:
        return _cell(self.config, run, eval_benchmark, row, group, variant=variant, x=x)

    def zeroshot_cell(self, eval_benchmark: str, group: str) -> dict:
        return _zeroshot_cell(self.config, eval_benchmark, group)


def experiment_spec(config: dict, name: str) -> dict:
    """The cells of one experiment's table: which run, evaluated where, shown in which row and group (the
    experiment's registered spec builder, :mod:`hnclip.experiments`)."""
    exp = config["experiments"][name]
    entry = experiment_entry(name)
    cells = entry.cells(CellMaker(config), exp)
    return {"experiment": name, "scale": config["scale"], "settings": exp, "cells": cells,
            "statistics": dict(config.get("statistics") or {}), "gamma": float(config["gamma"]),
            "roles": spec_roles(config), "backbone": backbone_origin(config)}


def all_evaluations(config: dict) -> list[Evaluation]:
    """Every (run, eval benchmark) any experiment needs, each once, in a stable order (the zero-shot
    backbone's evaluations are not runs': :func:`zeroshot_eval_path`)."""
    evals = set()
    for name in config.get("experiments", {}):
        evals.update(Evaluation(_cell_run(c), c["eval_benchmark"]) for c in experiment_spec(config, name)["cells"]
                     if not is_zeroshot(c))
    return sorted(evals)


def zeroshot_eval_benchmarks(config: dict) -> list[str]:
    """Benchmarks the zero-shot backbone is evaluated on (its rows in the main and transfer tables), each
    once: its evaluations are :func:`zeroshot_eval_path` of these."""
    return sorted({c["eval_benchmark"] for name in config.get("experiments", {})
                   for c in experiment_spec(config, name)["cells"] if is_zeroshot(c)})


def transfer_targets(config: dict, train_set: str) -> list[str]:
    """The benchmarks that runs trained on ``train_set`` are transferred to (experiments.transfer's pairs)
    and the zero-shot backbone is scored on: the regime's "transfer_readable" condition reads these."""
    pairs = config.get("experiments", {}).get("transfer", {}).get("pairs", [])
    scored = set(zeroshot_eval_benchmarks(config))
    return sorted({p["eval"] for p in pairs if p["train"] == train_set and p["eval"] in scored})


def all_runs(config: dict) -> list[Run]:
    return sorted({e.run for e in all_evaluations(config)})
