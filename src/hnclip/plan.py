"""Expand the validated workflow config into runs, evaluations and table specs.

The Snakemake rules stay thin: every decision about which training runs an experiment needs lives here,
where it is testable without Snakemake and shared with ``hnclip plan``. A run is identified by its
wildcards (train_set, method, gamma, fraction, seed); experiments that need the same run share it, so it
is trained once.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from hnclip import paths
from hnclip.config_validation import ConfigError, did_you_mean
from hnclip.paths import format_number

__all__ = [
    "ABLATION_ROLES",
    "BASELINE_METHOD",
    "EXPERIMENTS",
    "Evaluation",
    "FROZEN_METHOD",
    "REFERENCE_METHOD",
    "ZEROSHOT_ROW",
    "Run",
    "all_evaluations",
    "all_runs",
    "check_config",
    "dynamics_figure_cells",
    "epoch_cells",
    "epoch_eval_benchmarks",
    "epoch_evaluated_runs",
    "epoch_readers",
    "experiment_spec",
    "fetched_benchmark",
    "format_number",
    "is_zeroshot",
    "plain_runs",
    "probe_readers",
    "probed_runs",
    "regime_benchmarks",
    "report_run_logs",
    "run_settings",
    "spec_digest",
    "spec_text",
    "train_overrides",
    "write_spec",
    "write_spec_file",
    "zeroshot_eval_benchmarks",
    "zeroshot_eval_path",
    "zeroshot_run",
]

EXPERIMENTS = ("main", "plugin", "transfer", "fractions", "gamma_sweep", "ablation", "seeds", "retention")
# The backbone before fine-tuning: the first row of the main and transfer tables, a reference every
# fine-tuned model is compared with (not a training run: its cells name no run folder).
ZEROSHOT_ROW = "Zero-shot backbone"
# The roles the analysis compares, by method key (config ``methods``), declared here once and carried by
# every spec (``roles``): tables, figures, claims and the gallery find rows by these keys, so a renamed
# display label (``methods.<key>.label``) changes what is shown, never what is found.
REFERENCE_METHOD = "hnclip"  # the paper's method, HN-CLIP
BASELINE_METHOD = "longclip"  # its plain fine-tuning baseline, Long-CLIP FT
FROZEN_METHOD = "hnclip_frozen"  # HN-CLIP with frozen margins G (appendix B.2): a variant, not a competitor
# The ablation's variants by what they train (method key, whether the HN term is on, i.e. gamma > 0).
ABLATION_ROLES = {"infonce": (BASELINE_METHOD, False), "hn": ("longclip_hn", True),
                  "token": (REFERENCE_METHOD, False), "full": (REFERENCE_METHOD, True),
                  "frozen": (FROZEN_METHOD, True)}


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


def _fail(key: str, message: str):
    raise ConfigError(f"config key {key}: {message}")


NEVER_MATCHES = "(?!)"  # a wildcard constraint no path matches


def wildcard_pattern(names) -> str:
    """A Snakemake wildcard constraint that matches exactly these names, each taken literally; with no
    names, one that matches nothing, so that the rules it constrains apply to no path (a config without
    experiments, protocol variants, or train sets of one kind)."""
    return "|".join(re.escape(name) for name in names) or NEVER_MATCHES


DEFAULT_SPLITS = ("train", "test")  # a benchmark that lists no `splits` has both


def benchmark_splits(bench: dict) -> list[str]:
    """The splits a benchmark's config entry holds (``splits``; both when it names none)."""
    return list(bench.get("splits", DEFAULT_SPLITS))


_OWN_FILES = {"table": "files", "webdataset": "shards"}  # your own captions: adapter -> its splits' key


def _check_own_captions(name: str, bench: dict) -> None:
    """Adapters table and webdataset need their block, whose files or shards list exactly the splits."""
    adapter = bench["adapter"]
    for other in _OWN_FILES:
        if other != adapter and other in bench:
            _fail(f"benchmarks.{name}.{other}", f"only for adapter {other} (this benchmark's adapter is {adapter!r})")
    if adapter not in _OWN_FILES:
        return
    key = f"benchmarks.{name}.{adapter}"
    files = (bench.get(adapter) or {}).get(_OWN_FILES[adapter]) or {}
    if not files:
        _fail(f"{key}.{_OWN_FILES[adapter]}", f"required for adapter {adapter}: each split's "
                                              f"{'table file' if adapter == 'table' else 'shards'}, "
                                              "e.g. {train: ..., test: ...} (config/README.md, Your own captions)")
    splits = benchmark_splits(bench)
    for split in splits:
        if split not in files:
            _fail(f"{key}.{_OWN_FILES[adapter]}", f"has no {split!r} entry, but benchmarks.{name}.splits lists "
                                                  f"{split!r} (set splits: {sorted(files)} if that is all there is)")
    for split in files:
        if split not in splits:
            _fail(f"{key}.{_OWN_FILES[adapter]}.{split}", f"split {split!r} is not in benchmarks.{name}.splits "
                                                          f"{splits}; add it there or remove it here")


def _unknown(kind: str, name: str, known) -> str:
    """``unknown method 'hnclp'; did you mean 'hnclip'?`` (or the known names when none is close)."""
    return f"unknown {kind} {name!r}; {did_you_mean(name, known)}"


def _label(config: dict, section: str, key: str) -> str:
    return config[section][key].get("label") or key


def check_config(config: dict) -> None:
    """Cross-reference checks the JSON schema cannot express; each error names the offending key."""
    benchmarks, methods = config["benchmarks"], config["methods"]
    for name, bench in benchmarks.items():
        _check_own_captions(name, bench)
        train_set = bench.get("train_set")
        if train_set is not None:
            if train_set not in benchmarks:
                _fail(f"benchmarks.{name}.train_set", _unknown("benchmark", train_set, benchmarks))
            if "train" not in benchmark_splits(benchmarks[train_set]):
                _fail(f"benchmarks.{name}.train_set", f"benchmark {train_set!r} has no train split")
    if config["backbone"]["source"] == "pretrain":
        bench = config["pretrain"]["benchmark"]
        if bench not in benchmarks:
            _fail("pretrain.benchmark", _unknown("benchmark", bench, benchmarks))
        long = config["pretrain"]["long"]
        micro_batch = long.get("train", {}).get("micro_batch")
        if micro_batch and micro_batch % long["processes"]:
            _fail("pretrain.long.processes", f"{long['processes']} does not divide pretrain.long.train.micro_batch "
                                             f"{micro_batch} (each process takes an even share)")
    elif config["backbone"]["source"] == "open_clip":
        if not config["backbone"].get("model"):
            _fail("backbone.model", "required when backbone.source is 'open_clip' (an architecture such as ViT-B-32 "
                                    "with a pretrained tag in backbone.checkpoint, hf-hub:ORG/REPO or local-dir:FOLDER)")
    elif not config["backbone"].get("checkpoint"):
        _fail("backbone.checkpoint", f"required when backbone.source is {config['backbone']['source']!r}")
    if config["backbone"].get("stretch") and config["backbone"]["source"] not in ("openai", "open_clip", "transformers"):
        _fail("backbone.stretch", f"stretches a converted 77-position tower (sources openai, open_clip, transformers); "
                                  f"source {config['backbone']['source']!r} has its positions already")
    from hnclip.released import check_models

    check_models(config)
    _check_files_from(benchmarks)
    experiments = config.get("experiments", {})
    for exp_name, exp in experiments.items():
        for i, bench in enumerate(exp.get("benchmarks", [])):
            if bench not in benchmarks:
                _fail(f"experiments.{exp_name}.benchmarks[{i}]", _unknown("benchmark", bench, benchmarks))
            if exp_name == "retention":  # scored by the main table's models: no runs of its own
                if "test" not in benchmark_splits(benchmarks[bench]):
                    _fail(f"experiments.retention.benchmarks[{i}]", f"benchmark {bench!r} has no test split")
                continue
            if benchmarks[bench].get("train_set") is None:
                _fail(f"experiments.{exp_name}.benchmarks[{i}]",
                      f"benchmark {bench!r} has no train_set, so it has no in-domain runs")
        where = f"experiments.{exp_name}"
        referenced = [(f"{where}.methods[{i}]", m) for i, m in enumerate(exp.get("methods", []))]
        if "method" in exp:
            referenced.append((f"{where}.method", exp["method"]))
        referenced += [(f"{where}.pairs[{i}].{k}", p[k]) for i, p in enumerate(exp.get("pairs", []))
                       for k in ("plain", "hn") if k in p]
        referenced += [(f"{where}.variants[{i}].method", v["method"]) for i, v in enumerate(exp.get("variants", []))]
        for key, method in referenced:
            if method not in methods:
                _fail(key, _unknown("method", method, methods))
        for i, pair in enumerate(exp.get("pairs", [])):
            for k in ("train", "eval"):
                if k in pair and pair[k] not in benchmarks:
                    _fail(f"experiments.{exp_name}.pairs[{i}].{k}", _unknown("benchmark", pair[k], benchmarks))
            if "train" in pair and "train" not in benchmark_splits(benchmarks[pair["train"]]):
                _fail(f"experiments.{exp_name}.pairs[{i}].train", f"benchmark {pair['train']!r} has no train split")
    if "retention" in experiments and "main" not in experiments:
        _fail("experiments.retention", "scores the main table's models (the zero-shot backbone and every method of "
                                       "experiments.main): configure experiments.main too")
    _check_preprocess(config, experiments)
    if "rehearsal" in config and config["scale"] != "rehearsal":
        _fail("scale", f"is {config['scale']!r}, but a config with a rehearsal section runs on stand-in files: "
                       "its numbers must be labelled 'rehearsal'")
    main = experiments.get("main")
    if main and config["gamma"] > 0 and all(methods[m].get("hn") for m in main.get("methods", [])):
        # the main table, its claims and the gallery compare HN-CLIP with baselines; without one they
        # could only fail (or say nothing) after every run is trained
        _fail("experiments.main.methods", f"{main.get('methods')} has no baseline: add a method with hn: false "
                                          "(gamma 0), e.g. longclip")
    if "gamma_sweep" in experiments and not methods[experiments["gamma_sweep"]["method"]].get("hn"):
        _fail("experiments.gamma_sweep.method", "must be a method with hn: true")
    for i, v in enumerate(experiments.get("ablation", {}).get("variants", [])):
        if v.get("gamma") and not methods[v["method"]].get("hn"):
            _fail(f"experiments.ablation.variants[{i}].gamma", f"method {v['method']!r} has hn: false")


def _check_files_from(benchmarks: dict) -> None:
    """A benchmark reading another's files (``files_from``) names one that fetches its own, with the same
    adapter and root, so the config shows the one folder both read."""
    for name, bench in benchmarks.items():
        source = bench.get("files_from")
        if source is None:
            continue
        key = f"benchmarks.{name}.files_from"
        if source not in benchmarks or source == name:
            _fail(key, _unknown("benchmark", source, [b for b in benchmarks if b != name]))
        if benchmarks[source].get("files_from") is not None:
            _fail(key, f"benchmark {source!r} reads another benchmark's files itself; name the one that fetches them")
        for field in ("adapter", "root"):
            if bench[field] != benchmarks[source][field]:
                _fail(f"benchmarks.{name}.{field}", f"is {bench[field]!r}, but files_from {source!r} reads the files of "
                                                    f"benchmarks.{source}, whose {field} is {benchmarks[source][field]!r}")


def fetched_benchmark(config: dict, benchmark: str) -> str:
    """The benchmark whose fetch writes ``benchmark``'s files: its ``files_from``, else itself."""
    return config["benchmarks"][benchmark].get("files_from") or benchmark


def _check_preprocess(config: dict, experiments: dict) -> None:
    """GOAL/StructXLIP runs need a segmenter that can work on their training sets."""
    from hnclip.frameworks.registry import framework_entry

    pre = config.get("preprocess", {})
    for run in (r for name in experiments for r in _runs_of(config, name)):
        if not framework_entry(config["methods"][run.method]["framework"]).products:
            continue
        adapter = config["benchmarks"][run.train_set]["adapter"]
        if pre.get("segmenter") == "oracle" and not adapter.startswith("synthetic"):
            _fail("preprocess.segmenter", f"'oracle' works on synthetic benchmarks only, but method "
                                          f"{run.method!r} trains on {run.train_set!r} ({adapter})")
        if pre.get("segmenter", "sam") == "sam" and not pre.get("sam_model"):
            _fail("preprocess.sam_model", f"method {run.method!r} needs segments: set a SAM folder or hf://OWNER/REPO")


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
            "roles": spec_roles()}


def main_comparison(config: dict, benchmark: str) -> tuple[str, list[dict]] | None:
    """The main comparison over seeds on ``benchmark`` (regime condition 7): the experiment and its cells
    of :data:`REFERENCE_METHOD` and :data:`BASELINE_METHOD` evaluated there, from the seeds experiment
    where it holds both methods (the main table trains the first seed only), else from the main table;
    None where neither holds both."""
    for experiment in ("seeds", "main"):
        if experiment not in config["experiments"]:
            continue
        cells = [c for c in experiment_spec(config, experiment)["cells"]
                 if c["eval_benchmark"] == benchmark and c["run"]["method"] in (REFERENCE_METHOD, BASELINE_METHOD)
                 and not is_zeroshot(c)]
        if {c["run"]["method"] for c in cells} == {REFERENCE_METHOD, BASELINE_METHOD}:
            return experiment, cells
    return None


def spec_roles() -> dict[str, str]:
    """The method keys a spec's readers compare (``spec["roles"]``): reference, baseline, frozen."""
    return {"reference": REFERENCE_METHOD, "baseline": BASELINE_METHOD, "frozen": FROZEN_METHOD}


def spec_text(spec: dict) -> str:
    """A spec as its file holds it (sorted keys, so equal specs are equal files)."""
    return json.dumps(spec, indent=1, sort_keys=True) + "\n"


def spec_digest(config: dict, name: str) -> str:
    """SHA-256 of the spec file :func:`write_spec` would write: changes exactly when the file would."""
    return hashlib.sha256(spec_text(experiment_spec(config, name)).encode()).hexdigest()


def write_spec(config: dict, name: str, path, log=None) -> Path:
    """Write experiment ``name``'s spec (``results/specs/{name}.json``): the file the tables, figures and
    report of that experiment read, so no spec travels on a command line (the paper grid's are 6-18 KB each,
    ~60 KB together, half of Linux's 128 KB limit on one argument).
    """
    return write_spec_file(experiment_spec(config, name), path, log=log)


def write_spec_file(spec: dict, path, log=None) -> Path:
    """Write one spec (an experiment's, or the protocol table's) atomically; ``log`` gets one line: the
    file, its cells, the runs they name and the file's SHA-256."""
    from hnclip.fileio import write_text_atomic

    text = spec_text(spec)
    path = write_text_atomic(path, text)
    if log is not None:
        cells = json.loads(text)["cells"]
        runs = {c["run_dir"] for c in cells if c.get("run_dir")}  # the zero-shot row names no run
        write_text_atomic(log, f"{path}: {len(cells)} cells, {len(runs)} runs, sha256 "
                               f"{hashlib.sha256(text.encode()).hexdigest()}\n")
    return path


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


def self_evaluated_train_sets(config: dict) -> list[str]:
    """Benchmarks that runs train on and that hold their own test split: a run on one of these is
    evaluated on that split by its training job, once its model is saved (``workflow/rules/train.smk``:
    one process, the imports and the model load paid once), not by a separate evaluate job. Every other
    evaluation (transfer, a train set without a test split such as VG paragraphs) stays one job each."""
    trained = {bench.get("train_set") for bench in config["benchmarks"].values()}
    return [name for name, bench in config["benchmarks"].items()
            if name in trained and "test" in benchmark_splits(bench)]


def epoch_eval_benchmarks(config: dict, train_set: str) -> list[str]:
    """The benchmarks evaluated after every epoch of a run on ``train_set``: every benchmark with a test
    split whose runs train on it (DOCCI's runs: DOCCI and Long-DCI; VG's: Urban-1K), in config order, so
    the per-epoch claims, which speak of all four benchmarks, have every benchmark's curve."""
    return [name for name, bench in config["benchmarks"].items()
            if bench.get("train_set") == train_set and "test" in benchmark_splits(bench)]



def _train_settings(config: dict, run: Run) -> dict:
    """The workflow's ``train`` settings of one run: the shared section, the method's recipe over it
    (``methods.<m>.train``, null = shared), then the method's and the run's keys."""
    method = config["methods"][run.method]
    settings = dict(config["train"])
    settings.update({k: v for k, v in (method.get("train") or {}).items() if v is not None})
    token_weight = method.get("token_weight")
    settings.update(
        framework=method["framework"],
        gamma=float(run.gamma),
        token_weight=config["token_weight"] if token_weight is None else token_weight,
        margin=method.get("margin", "recompute"),
        seed=run.seed,
    )
    return settings


def run_settings(config: dict, run: Run) -> dict:
    """The run's TrainConfig as its ``summary.json`` will hold it (``TrainConfig.to_dict()``), probing
    left at its default (the probe does not change what the run trains)."""
    from hnclip.train_config import TrainConfig, override_items

    items = override_items(_train_settings(config, run), read=True)
    return TrainConfig.from_overrides(dict(item.split("=", 1) for item in items)).to_dict()


def dynamics_figure_cells(spec: dict) -> dict[tuple[float, str], dict]:
    """The cells whose runs the gradient-dynamics figure draws (``hnclip figure dynamics``, a fractions
    spec): per (fraction, group), the first HN row's (gamma > 0) cell of the lowest seed."""
    hn_cells = [c for c in spec["cells"] if not is_zeroshot(c) and float(c["run"]["gamma"]) > 0]
    if not hn_cells:
        return {}
    row = hn_cells[0]["row"]
    chosen: dict[tuple[float, str], dict] = {}
    for cell in hn_cells:
        if cell["row"] != row:
            continue
        key = (float(cell["x"] if cell.get("x") is not None else cell["run"]["fraction"]), cell["group"])
        if key not in chosen or float(cell["run"]["seed"]) < float(chosen[key]["run"]["seed"]):
            chosen[key] = cell
    return chosen


def probe_readers(config: dict) -> dict[Run, list[str]]:
    """Every run whose gradient-probe columns (``hnclip.dynamics_log.PROBE_COLUMNS``) the report reads,
    with what reads them, derived from the experiments:

    - the premise (``results/premise.json``) reads them from the plain and HN-only runs
      (:func:`hnclip.dynamics_log.settings_role` on the run's settings, at the config's gamma, the one
      the premise rule passes);
    - the gradient-dynamics figure draws them from the fractions spec's :func:`dynamics_figure_cells`.

    Nothing else reads them: the convergence table and figure read ``infonce``, which every step logs;
    the report's "peak gradient ratio per run" (a measure beside the premise claim) reads the HN-CLIP
    runs that did probe and leaves the others out.
    """
    from hnclip.dynamics_log import PROBE_ROLES, settings_role

    readers: dict[Run, list[str]] = {}
    for run in all_runs(config):
        role = settings_role(run_settings(config, run), subset=float(run.fraction) < 1, gamma=config["gamma"])
        if role in PROBE_ROLES:
            readers.setdefault(run, []).append(f"premise ({role} run)")
    if "fractions" in config.get("experiments", {}):
        for run in sorted({_cell_run(c) for c in dynamics_figure_cells(experiment_spec(config, "fractions")).values()}):
            readers.setdefault(run, []).append("gradient-dynamics figure")
    return readers


def probed_runs(config: dict) -> set[Run]:
    """The runs that run the gradient probe: every run under ``train.probe_runs: all``, else (``read``)
    the runs of :func:`probe_readers`. A run probes on every ``train.dynamics_every``-th step (0: never)."""
    if config["train"].get("probe_runs", "read") == "all":
        return set(all_runs(config))
    return set(probe_readers(config))


def epoch_readers(config: dict) -> dict[Run, list[str]]:
    """Every run whose per-epoch retrieval (``epochs.csv``, ``epoch_ranks.csv``) the report reads, with what
    reads it: the main experiment's runs (the epochs table, the convergence table and figure, the per-epoch
    claims). Nothing else reads them: every other table scores a run's final model (``hnclip evaluate``)."""
    readers: dict[Run, list[str]] = {}
    if "main" in config.get("experiments", {}):
        for cell in experiment_spec(config, "main")["cells"]:
            if not is_zeroshot(cell):
                readers.setdefault(_cell_run(cell), ["epochs table", "convergence table and figure",
                                                     "per-epoch claims"])
    return readers


def epoch_evaluated_runs(config: dict) -> set[Run]:
    """The runs evaluated after every epoch (``train.eval_every_epoch`` on): every run under
    ``train.epoch_eval_runs: all``, else (``read``) the runs of :func:`epoch_readers`. Each evaluation scores
    the in-domain test split (a few seconds of a toy run's half minute); the weights do not depend on it."""
    if not config["train"].get("eval_every_epoch", True):
        return set()
    if config["train"].get("epoch_eval_runs", "read") == "all":
        return set(all_runs(config))
    return set(epoch_readers(config))


def train_overrides(config: dict, run: Run, probed: set[Run] | None = None,
                    epoch_evaluated: set[Run] | None = None) -> list[str]:
    """``key=value`` items of TrainConfig for one run: the shared ``train`` section, the method's own recipe
    over it (``methods.<m>.train``, null = shared), then the method's and the run's keys. Only the run's
    framework section (e.g. ``finelip.margin=0.2``) is passed: see :func:`hnclip.train_config.override_items`.

    ``probed``: :func:`probed_runs` (computed here when not given); a run outside it gets
    ``dynamics_probe=false`` when it would otherwise probe. That setting is not in the config hash (the
    probe never changes the weights), so turning probing off for a run resumes or rebuilds it from its
    checkpoint; a run turned on whose checkpoint did not probe trains again (see
    :meth:`hnclip.training.checkpoint.RunCheckpoint.read`).
    """
    from hnclip.train_config import override_items

    probed = probed_runs(config) if probed is None else probed
    epoch_evaluated = epoch_evaluated_runs(config) if epoch_evaluated is None else epoch_evaluated
    return override_items(_train_settings(config, run), read=run in probed, epochs_read=run in epoch_evaluated)


def plain_runs(config: dict, eval_benchmark: str) -> list[Run]:
    """The plain fine-tuning runs behind ``eval_benchmark``'s regime conditions: runs on the benchmark's
    train set, evaluated on it, whose settings play role ``plain`` (:func:`hnclip.analysis.premise.run_role`:
    Long-CLIP framework, gamma 0, no token term, recomputed margins, full data), every seed configured."""
    from hnclip.analysis.premise import is_plain_run

    train_set = config["benchmarks"][eval_benchmark].get("train_set")
    if not train_set:
        return []
    evaluated = {e.run for e in all_evaluations(config) if e.eval_benchmark == eval_benchmark}
    return sorted(r for r in evaluated if r.train_set == train_set and float(r.fraction) == 1.0
                  and is_plain_run({"config": run_settings(config, r), "run": {"subset_path": None}}))


def regime_benchmarks(config: dict) -> list[str]:
    """Benchmarks whose regime conditions the workflow measures (``results/regime/<benchmark>.json``): those
    with a zero-shot evaluation and plain fine-tuning runs (:func:`plain_runs`)."""
    return [b for b in zeroshot_eval_benchmarks(config) if plain_runs(config, b)]


def epoch_cells(spec: dict) -> list[dict]:
    """Cells with a run whose epochs.csv scores the cell's own benchmark (zero-shot cells have no run)."""
    cells = []
    for cell in spec["cells"]:
        if cell.get("zeroshot"):
            continue
        if not cell.get("run_dir"):
            raise ValueError(f"{spec['experiment']} spec: cell of run {_cell_run(cell).path} has no run_dir")
        if cell.get("epochs_benchmark", cell["eval_benchmark"]) != cell["eval_benchmark"]:
            continue
        cells.append(cell)
    return cells


def report_run_logs(specs: dict) -> dict[str, list[str]]:
    """The run logs the claims read beside the evaluation records, as the claims rule declares them:
    ``epochs``, the main runs' ``epochs.csv`` (the per-epoch claims), and ``dynamics``, the ``dynamics.csv`` of the
    reference method's runs (``roles.reference``) at the config's gamma (the gradient-ratio peak), found
    by method key. A spec without ``gamma`` (hand-made) takes every gamma > 0."""
    epochs = [f"{c['run_dir']}/epochs.csv" for c in epoch_cells(specs["main"])] if specs.get("main") else []
    dynamics = []
    for spec in specs.values():
        reference = spec.get("roles", spec_roles())["reference"]
        for cell in spec["cells"]:
            gamma = float(cell["run"]["gamma"])
            # the gamma sweep's other gammas are not the method's runs
            at_gamma = spec.get("gamma") is None or abs(gamma - float(spec["gamma"])) < 1e-12
            if cell["run"]["method"] == reference and gamma > 0 and at_gamma and cell.get("run_dir"):
                dynamics.append(f"{cell['run_dir']}/dynamics.csv")
    return {"epochs": list(dict.fromkeys(epochs)), "dynamics": list(dict.fromkeys(dynamics))}
