"""Expand the validated workflow config into runs, evaluations and table specs.

The Snakemake rules stay thin: every decision about which training runs an experiment needs lives here,
where it is testable without Snakemake and shared with ``hnclip plan``. A run is identified by its
wildcards (train_set, method, gamma, fraction, seed); experiments that need the same run share it, so it
is trained once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = [
    "EXPERIMENTS",
    "Evaluation",
    "Run",
    "all_evaluations",
    "all_runs",
    "check_config",
    "experiment_spec",
    "format_number",
    "train_overrides",
]

EXPERIMENTS = ("main", "plugin", "transfer", "fractions", "gamma_sweep", "ablation", "seeds")


def format_number(x: float) -> str:
    """Canonical text of a gamma or fraction in paths: 0.5 -> '0.5', 1.0 -> '1', 0 -> '0'."""
    return f"{float(x):g}"


@dataclass(frozen=True, order=True)
class Run:
    train_set: str
    method: str
    gamma: str
    fraction: str
    seed: int

    @property
    def path(self) -> str:
        return f"{self.train_set}/{self.method}/g{self.gamma}/f{self.fraction}/s{self.seed}"

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
        return f"results/evals/{self.run.path}/{self.eval_benchmark}.json"


def _fail(key: str, message: str):
    raise ValueError(f"config key {key}: {message}")


def _label(config: dict, section: str, key: str) -> str:
    return config[section][key].get("label") or key


def check_config(config: dict) -> None:
    """Cross-reference checks the JSON schema cannot express; each error names the offending key."""
    benchmarks, methods = config["benchmarks"], config["methods"]
    for name, bench in benchmarks.items():
        train_set = bench.get("train_set")
        if train_set is not None:
            if train_set not in benchmarks:
                _fail(f"benchmarks.{name}.train_set", f"unknown benchmark {train_set!r}")
            if "train" not in benchmarks[train_set].get("splits", ["train", "test"]):
                _fail(f"benchmarks.{name}.train_set", f"benchmark {train_set!r} has no train split")
    if config["backbone"]["source"] == "pretrain":
        bench = config["pretrain"]["benchmark"]
        if bench not in benchmarks:
            _fail("pretrain.benchmark", f"unknown benchmark {bench!r}")
    elif not config["backbone"].get("checkpoint"):
        _fail("backbone.checkpoint", f"required when backbone.source is {config['backbone']['source']!r}")
    experiments = config.get("experiments", {})
    for exp_name, exp in experiments.items():
        for i, bench in enumerate(exp.get("benchmarks", [])):
            if bench not in benchmarks:
                _fail(f"experiments.{exp_name}.benchmarks[{i}]", f"unknown benchmark {bench!r}")
            if benchmarks[bench].get("train_set") is None:
                _fail(f"experiments.{exp_name}.benchmarks[{i}]",
                      f"benchmark {bench!r} has no train_set, so it has no in-domain runs")
        referenced = list(exp.get("methods", []))
        if "method" in exp:
            referenced.append(exp["method"])
        referenced += [p[k] for p in exp.get("pairs", []) for k in ("plain", "hn") if k in p]
        referenced += [v["method"] for v in exp.get("variants", [])]
        for method in referenced:
            if method not in methods:
                _fail(f"experiments.{exp_name}", f"unknown method {method!r}; known: {', '.join(methods)}")
        for i, pair in enumerate(exp.get("pairs", [])):
            for k in ("train", "eval"):
                if k in pair and pair[k] not in benchmarks:
                    _fail(f"experiments.{exp_name}.pairs[{i}].{k}", f"unknown benchmark {pair[k]!r}")
            if "train" in pair and "train" not in benchmarks[pair["train"]].get("splits", ["train", "test"]):
                _fail(f"experiments.{exp_name}.pairs[{i}].train", f"benchmark {pair['train']!r} has no train split")
    _check_preprocess(config, experiments)
    if "rehearsal" in config and config["scale"] != "rehearsal":
        _fail("scale", f"is {config['scale']!r}, but a config with a rehearsal section runs on stand-in files: "
                       "its numbers must be labelled 'rehearsal'")
    if "gamma_sweep" in experiments and not methods[experiments["gamma_sweep"]["method"]].get("hn"):
        _fail("experiments.gamma_sweep.method", "must be a method with hn: true")
    for i, v in enumerate(experiments.get("ablation", {}).get("variants", [])):
        if v.get("gamma") and not methods[v["method"]].get("hn"):
            _fail(f"experiments.ablation.variants[{i}].gamma", f"method {v['method']!r} has hn: false")


def _check_preprocess(config: dict, experiments: dict) -> None:
    """GOAL/StructXLIP runs need a segmenter that can work on their training sets."""
    from hnclip.frameworks.registry import FRAMEWORK_PRODUCTS

    pre = config.get("preprocess", {})
    for run in (r for name in experiments for r in _runs_of(config, name)):
        if not FRAMEWORK_PRODUCTS.get(config["methods"][run.method]["framework"]):
            continue
        adapter = config["benchmarks"][run.train_set]["adapter"]
        if pre.get("segmenter") == "oracle" and not adapter.startswith("synthetic"):
            _fail("preprocess.segmenter", f"'oracle' works on synthetic benchmarks only, but method "
                                          f"{run.method!r} trains on {run.train_set!r} ({adapter})")
        if pre.get("segmenter", "sam") == "sam" and not pre.get("sam_model"):
            _fail("preprocess.sam_model", f"method {run.method!r} needs segments: set a local SAM folder")


def _cell_run(cell: dict) -> Run:
    info = cell["run"]
    return Run(info["train_set"], info["method"], format_number(info["gamma"]), format_number(info["fraction"]),
               info["seed"])


def _runs_of(config: dict, name: str) -> list[Run]:
    return [_cell_run(c) for c in experiment_spec(config, name)["cells"]]


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
        "run_dir": f"results/runs/{run.path}",
    }


def experiment_spec(config: dict, name: str) -> dict:
    """The cells of one experiment's table: which run, evaluated where, shown in which row and group."""
    exp = config["experiments"][name]
    bench_label = {b: _label(config, "benchmarks", b) for b in config["benchmarks"]}
    method_label = {m: _label(config, "methods", m) for m in config["methods"]}
    cells = []

    def in_domain(bench):
        return config["benchmarks"][bench]["train_set"]

    if name == "main":
        for m in exp["methods"]:
            for b in exp["benchmarks"]:
                cells.append(_cell(config, _run(config, in_domain(b), m), b, method_label[m], bench_label[b]))
    elif name == "plugin":
        for pair in exp["pairs"]:
            for b in exp["benchmarks"]:
                for variant, key in (("plain", "plain"), ("+HN", "hn")):
                    run = _run(config, in_domain(b), pair[key])
                    cells.append(_cell(config, run, b, pair["label"], bench_label[b], variant=variant))
    elif name == "transfer":
        for m in exp["methods"]:
            for pair in exp["pairs"]:
                group = f"{bench_label[pair['train']]} -> {bench_label[pair['eval']]}"
                cells.append(_cell(config, _run(config, pair["train"], m), pair["eval"], method_label[m], group))
    elif name == "fractions":
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
    else:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    return {"experiment": name, "scale": config["scale"], "cells": cells}


def all_evaluations(config: dict) -> list[Evaluation]:
    """Every (run, eval benchmark) any experiment needs, each once, in a stable order."""
    evals = set()
    for name in config.get("experiments", {}):
        evals.update(Evaluation(_cell_run(c), c["eval_benchmark"]) for c in experiment_spec(config, name)["cells"])
    return sorted(evals)


def all_runs(config: dict) -> list[Run]:
    return sorted({e.run for e in all_evaluations(config)})


def in_domain_eval_benchmark(config: dict, train_set: str) -> str | None:
    """The benchmark evaluated after every epoch of a run on ``train_set`` (first one trained on it)."""
    for name, bench in config["benchmarks"].items():
        if bench.get("train_set") == train_set and "test" in bench.get("splits", ["train", "test"]):
            return name
    return None


def train_overrides(config: dict, run: Run) -> list[str]:
    """``key=value`` fields of TrainConfig for one run: shared settings, then the method's and the run's."""
    method = config["methods"][run.method]
    settings = dict(config["train"])
    token_weight = method.get("token_weight")
    settings.update(
        framework=method["framework"],
        gamma=float(run.gamma),
        token_weight=config["token_weight"] if token_weight is None else token_weight,
        margin=method.get("margin", "recompute"),
        seed=run.seed,
    )
    return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in settings.items()]
