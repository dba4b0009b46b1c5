"""The run grid: every experiment's cells (which run, evaluated where, shown in which row and group), and
the runs and evaluations they need, each once. A run is identified by its wildcards (train_set, method,
gamma, fraction, seed); experiments that need the same run share it, so it is trained once."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from hnclip import paths
from hnclip.paths import format_number
from hnclip.plan.benchmarks import epoch_eval_benchmarks
from hnclip.plan.roles import EXPERIMENTS, ZEROSHOT_ROW, spec_roles

__all__ = ["Evaluation", "Run", "all_evaluations", "all_runs", "experiment_spec", "is_zeroshot", "transfer_targets",
           "zeroshot_eval_benchmarks", "zeroshot_eval_path", "zeroshot_run"]


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


def experiment_spec(config: dict, name: str) -> dict:
    """The cells of one experiment's table: which run, evaluated where, shown in which row and group."""
    exp = config["experiments"][name]
    bench_label = {b: _label(config, "benchmarks", b) for b in config["benchmarks"]}
    method_label = {m: _label(config, "methods", m) for m in config["methods"]}
    cells = []

    def in_domain(bench):
        return config["benchmarks"][bench]["train_set"]

    if name == "main":
        cells += [_zeroshot_cell(config, b, bench_label[b]) for b in exp["benchmarks"]]
        for m in exp["methods"]:
            for b in exp["benchmarks"]:
                cell = _cell(config, _run(config, in_domain(b), m), b, method_label[m], bench_label[b])
                # which benchmark the run's epochs.csv scores for this cell: its own where the run evaluates
                # it after each epoch (DOCCI's runs log DOCCI and Long-DCI), else the run's first
                logged = epoch_eval_benchmarks(config, in_domain(b))
                cell["epochs_benchmark"] = b if b in logged else (logged[0] if logged else None)
                cells.append(cell)
    elif name == "plugin":
        for pair in exp["pairs"]:
            for b in exp["benchmarks"]:
                for variant, key in (("plain", "plain"), ("+HN", "hn")):
                    run = _run(config, in_domain(b), pair[key])
                    cells.append(_cell(config, run, b, pair["label"], bench_label[b], variant=variant))
    elif name == "transfer":
        for pair in exp["pairs"]:
            group = f"{bench_label[pair['train']]} -> {bench_label[pair['eval']]}"
            cells.append(_zeroshot_cell(config, pair["eval"], group))
        for m in exp["methods"]:
            for pair in exp["pairs"]:
                group = f"{bench_label[pair['train']]} -> {bench_label[pair['eval']]}"
                cells.append(_cell(config, _run(config, pair["train"], m), pair["eval"], method_label[m], group))
    elif name == "fractions":
        # the backbone every fraction starts from, at fraction 0: what a fraction's fine-tuning adds
        cells += [_zeroshot_cell(config, b, bench_label[b]) for b in exp["benchmarks"]]
        for m in exp["methods"]:
            for f in exp["fractions"]:
                for b in exp["benchmarks"]:
                    run = _run(config, in_domain(b), m, fraction=f)
                    cells.append(_cell(config, run, b, method_label[m], bench_label[b], x=float(f)))
    elif name == "gamma_sweep":
        m = exp["method"]
        for g in exp["gammas"]:
            for b in exp["benchmarks"]:
                run = _run(config, in_domain(b), m, gamma=g)
                cells.append(_cell(config, run, b, f"gamma={format_number(g)}", bench_label[b], x=float(g)))
    elif name == "ablation":
        for v in exp["variants"]:
            for b in exp["benchmarks"]:
                run = _run(config, in_domain(b), v["method"], gamma=v.get("gamma"))
                cells.append(_cell(config, run, b, v["label"], bench_label[b]))
    elif name == "seeds":
        for m in exp["methods"]:
            for s in config["seeds"]:
                for b in exp["benchmarks"]:
                    run = _run(config, in_domain(b), m, seed=s)
                    cells.append(_cell(config, run, b, method_label[m], bench_label[b]))
    elif name == "retention":
        # the main table's models (same runs, trained on their in-domain sets) on short-caption benchmarks
        main = config["experiments"]["main"]
        train_sets = list(dict.fromkeys(in_domain(b) for b in main["benchmarks"]))

        def group(train_set, bench):
            return f"{bench_label[train_set]} -> {bench_label[bench]}"

        cells += [_zeroshot_cell(config, b, group(t, b)) for b in exp["benchmarks"] for t in train_sets]
        for m in main["methods"]:
            for b in exp["benchmarks"]:
                for t in train_sets:
                    cells.append(_cell(config, _run(config, t, m), b, method_label[m], group(t, b)))
    else:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
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
