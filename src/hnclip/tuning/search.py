"""The search: every tuned method's grid, each point trained as the workflow trains that method's run (the
same ``hnclip train`` command, the same settings, the first seed) but scored on the val split, then the
record (:mod:`hnclip.tuning.record`).

Each point is its own ``hnclip train`` process, one after another, in a folder keyed on everything that
changes it (:mod:`hnclip.tuning.work`: benchmark, split, budget, recipe, backbone, rate). A point whose run
finished (its ``summary.json``) is read, not trained again; a point an interrupted search left half-trained
is handed to the trainer again, which resumes it from its last checkpoint, so every point is scored on all
its epochs. A search stopped by SIGTERM (a scheduler's limit, ``snakemake`` stopping) passes it on to the
trainer it waits for, which stops as a terminated run does (its lock released, its checkpoint kept). The
zero-shot backbone is scored on the same split once, the floor every tuned method is held to.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from hnclip import cpu_kernels
from hnclip.analysis.bootstrap import settings_from_config
from hnclip.frameworks.registry import framework_entry
from hnclip.paths import format_number
from hnclip.tuning import grid, long_budget, resolution, score
from hnclip.tuning import work as folders
from hnclip.tuning.record import chosen_point, strongest_competitor, tuned_methods, tuned_rate_key
from hnclip.tuning.section import refuse_test_split, require_tuning

__all__ = ["Split", "point_items", "protocol_of", "run_child", "run_search", "search_minutes", "train_command"]

RATE_SOURCE = "config/paper.yaml"  # the paper's recipes, whose ratios centre each method's grid
STOP_WAIT_S = 60.0  # how long a terminated trainer gets to stop by itself before it is killed
GRACE_S = 1.0  # how long the trainer may take to stop on a signal of its own before the search passes SIGTERM on


class Split:
    """The prepared files the search reads: the benchmark's train split (and its framework products) and
    the split it scores on."""

    def __init__(self, data: Path, split: str):
        self.data, self.split = Path(data), split
        for name in ("train.csv", "train_images", f"{split}.csv", f"{split}_images"):
            if not (self.data / name).exists():
                raise FileNotFoundError(f"hnclip tune: {self.data / name} is missing; prepare the benchmark's "
                                        f"train and {split} splits first (`snakemake tune` does)")


def protocol_of(config: Mapping) -> dict:
    """What every method shares, as the record states it: where it is scored, the grid rule, the budget."""
    section = config["tuning"]
    train = config["train"]
    return {"benchmark": section["benchmark"], "split": section["split"],
            "score": f"mean of i2t and t2i R@1 on the {section['split']} split after the last epoch",
            "grid": f"half-decade steps around each method's paper-ratio rate, {section['steps']} on each side, "
                    f"extended by one step while the best sits on an edge (at most {section['max_extensions']})",
            "steps": section["steps"], "max_extensions": section["max_extensions"], "base_lr": section["base_lr"],
            "ratios_from": RATE_SOURCE, "seed": config["seeds"][0],
            "budget": {k: train.get(k) for k in ("epochs", "micro_batch", "accum_steps", "warmup_steps",
                                                 "weight_decay", "grad_clip", "schedule")}}


def point_items(config: Mapping, method: str, key: str, rate: float, epochs: int | None = None) -> list[str]:
    """The ``--set`` items of one grid point: the workflow's settings for ``method``'s first-seed run
    (:func:`hnclip.plan.train_overrides`), its ``key`` set to ``rate``, evaluated after every epoch, no
    gradient probe (it never changes the weights). ``epochs``: another budget than the shared one (a
    long-budget run, :mod:`hnclip.tuning.long_budget`)."""
    from hnclip import plan

    benchmark = config["tuning"]["benchmark"]
    gamma = config["gamma"] if config["methods"][method].get("hn") else 0.0
    run = plan.Run(config["benchmarks"][benchmark]["train_set"], method, format_number(gamma),
                   format_number(1.0), config["seeds"][0])
    items = [i for i in plan.train_overrides(config, run, probed=set(), epoch_evaluated={run})
             if not i.startswith((f"{key}=", "eval_every_epoch=")) and not (epochs and i.startswith("epochs="))]
    return items + [f"{key}={rate!r}", "eval_every_epoch=true"] + ([f"epochs={int(epochs)}"] if epochs else [])


def train_command(config: Mapping, method: str, key: str, rate: float, backbone: Path, split: Split,
                  out: Path, threads: int, epochs: int | None = None) -> list[str]:
    """The ``hnclip train`` command of one grid point (:func:`point_items`), scored on the split."""
    benchmark = config["tuning"]["benchmark"]
    items = point_items(config, method, key, rate, epochs)
    data = split.data
    command = [sys.executable, "-m", "hnclip", "train", "--init", str(backbone),
               "--manifest", str(data / "train.csv"), "--images", str(data / "train_images"),
               "--eval-manifest", str(data / f"{split.split}.csv"),
               "--eval-images", str(data / f"{split.split}_images"), "--eval-benchmark", benchmark,
               "--out", str(out), "--checkpoint-dir", str(out / "checkpoints"), "--threads", str(threads)]
    for product in framework_entry(config["methods"][method]["framework"]).products:
        command += ["--product", f"{product}={data / f'train_{product}'}"]
    for item in items:
        command += ["--set", item]
    return command


def _subprocess_trainer(config: Mapping, backbone: Path, split: Split, threads: int, log: Path):
    env = {**os.environ, cpu_kernels.ENV_SETTING: str(config.get("cpu_kernels", "native"))}

    def train(method: str, key: str, rate: float, out: Path, epochs: int | None = None) -> None:
        command = train_command(config, method, key, rate, backbone, split, out, threads, epochs)
        with open(log, "a", encoding="utf-8") as stream:
            stream.write(f"\n$ {' '.join(command)}\n")
            stream.flush()
            returncode = run_child(command, stream, env)
        if returncode:
            budget = f" for {epochs} epochs" if epochs else ""
            raise RuntimeError(f"hnclip tune: training {method} at {key} {rate:g}{budget} failed (exit "
                               f"{returncode}); its log is {log}")

    return train


def run_child(command: list[str], stream, env: Mapping) -> int:
    """Run one trainer and wait for it. Stopped meanwhile (SIGTERM, which ``hnclip`` raises as an exception;
    Ctrl-C), the search passes SIGTERM on and waits for the trainer to stop by itself (:data:`STOP_WAIT_S`):
    it releases its run lock and keeps its checkpoint, where ``subprocess.run`` would kill it outright."""
    child = subprocess.Popen(command, stdout=stream, stderr=stream, env=dict(env))
    try:
        return child.wait()
    except BaseException:
        # a signal sent to the whole process group (Snakemake, a scheduler) reached the trainer too: a second
        # SIGTERM would cut its own unwinding short, so it gets a moment to stop first
        if not _stopped(child, GRACE_S):
            child.send_signal(signal.SIGTERM)
            if not _stopped(child, STOP_WAIT_S):
                child.kill()
                child.wait()
        raise


def _stopped(child: subprocess.Popen, seconds: float) -> bool:
    try:
        child.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def _training_minutes(out: Path) -> float:
    """A point's training minutes as its run recorded them (``summary.json``'s ``wall_time_s``, over all its
    sessions): the same for a point trained now and one an interrupted search left on disk."""
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return round(float(summary["wall_time_s"]) / 60, 2)


def _zeroshot(backbone: Path, split: Split, benchmark: str, batch_size: int, threads: int, out: Path) -> dict:
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "hnclip", "evaluate", "--model", str(backbone),
                        "--manifest", str(split.data / f"{split.split}.csv"),
                        "--images", str(split.data / f"{split.split}_images"), "--eval-benchmark", benchmark,
                        "--split", split.split, "--batch-size", str(batch_size), "--threads", str(threads),
                        "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    metrics = json.loads(out.read_text(encoding="utf-8"))["metrics"]
    return {"i2t_r1": round(metrics["i2t_r1"], 4), "t2i_r1": round(metrics["t2i_r1"], 4),
            "mean": round(score.mean_r1(metrics), 4)}


class _Search:
    """One search's fixed parts: the config's tuning section, the split, where points go, how they train."""

    def __init__(self, config: Mapping, backbone: Path, data: Path, work: Path, threads: int,
                 trainer: Callable | None, progress: Callable[[str], None]):
        self.config, self.section = config, require_tuning(config, "hnclip tune")
        refuse_test_split(self.section)  # an effective config may predate the config check
        self.split = Split(data, self.section["split"])
        self.work, self.progress = Path(work), progress
        self.work.mkdir(parents=True, exist_ok=True)
        self.trainer = trainer or _subprocess_trainer(config, backbone, self.split, threads, self.work / "search.log")
        self.identity = folders.inputs_identity(backbone, data, self.split.split,
                                                str(config.get("cpu_kernels", "native")))
        self.method_dirs: dict[str, Path] = {}  # each tuned method's points' folder (:meth:`chosen_folder`)

    def products(self, method: str) -> dict[str, str]:
        """The framework products ``method`` trains on, by content: its runs' folders are keyed on them."""
        names = framework_entry(self.config["methods"][method]["framework"]).products
        return folders.products_identity(self.split.data, names)

    def chosen_folder(self, record: Mapping, method: str) -> Path:
        """The run folder of ``method``'s chosen grid point (after its grid was searched)."""
        entry = record["methods"][method]
        return folders.point_folder(self.method_dirs[method], entry["key"], float(chosen_point(entry)["rate"]))

    def point(self, method: str, key: str, rate: float, step: int, method_dir: Path, bootstrap) -> dict:
        """One grid point scored on all its epochs, trained (or resumed) first unless its run finished."""
        out = folders.point_folder(method_dir, key, rate)
        if not folders.finished(out):
            resumed = " (resuming an interrupted run)" if (out / "epochs.csv").exists() else ""
            self.progress(f"{method}: {key} {rate:g} (step {step:+d}) training{resumed}")
            self.trainer(method, key, rate, out)
        epochs = score.epoch_scores(out / "epochs.csv")
        self.progress(f"{method}: {key} {rate:g}: {self.split.split} R@1 "
                      + " / ".join(f"{e['mean']:.1f}" for e in epochs))
        return {"rate": rate, "step": step, "epochs": epochs, "score": epochs[-1]["mean"],
                "rise": score.last_rise(out / "epoch_ranks.csv", bootstrap), "minutes": _training_minutes(out)}

    def method(self, method: str, paper: Mapping, bootstrap, zeroshot: float) -> dict:
        """``method``'s grid, extended while its best sits on an edge, and its choice."""
        section, key = self.section, tuned_rate_key(self.config, method)
        ratio = grid.paper_ratio(paper, method, key)
        centre = float(section["base_lr"]) * ratio
        method_dir = folders.method_folder(self.work, section["benchmark"], self.identity, method,
                                           point_items(self.config, method, key, centre), key,
                                           self.products(method))
        self.method_dirs[method] = method_dir
        points: dict[int, dict] = {}
        pending = grid.start_steps(section["steps"])
        while pending:
            for step in pending:
                points[step] = self.point(method, key, grid.rate_at(centre, step), step, method_dir, bootstrap)
            step = grid.next_step({k: p["score"] for k, p in points.items()}, section["steps"],
                                  section["max_extensions"])
            pending = [] if step is None else [step]
        chosen = points[grid.choose({k: p["score"] for k, p in points.items()})]
        self.progress(f"{method}: chosen {key} {chosen['rate']:g} ({self.split.split} R@1 {chosen['score']:.1f})")
        return {"key": key, "paper_ratio": ratio, "paper_rate": grid.rate_at(centre, 0), "chosen": chosen["rate"],
                "score": chosen["score"], "above_zeroshot": chosen["score"] >= zeroshot,
                "under_trained": bool(chosen["rise"] and chosen["rise"]["under_trained"]),
                "points": [points[k] for k in sorted(points)]}


def run_search(config: Mapping, backbone: Path, data: Path, work: Path, threads: int = 1,
               methods: list[str] | None = None, trainer: Callable | None = None,
               progress: Callable[[str], None] = print) -> dict:
    """Tune ``methods`` (default: :func:`tuned_methods`) and return the record. ``trainer(method, key,
    rate, out)`` trains one point into ``out`` (default: an ``hnclip train`` process); ``work`` holds the
    points (:mod:`hnclip.tuning.work`) and the search's log."""
    from hnclip.analysis.summary import machine_record
    from hnclip.provenance import git_commit
    from hnclip.workflow_config import load_config

    search = _Search(config, backbone, data, work, threads, trainer, progress)
    section, split = search.section, search.split
    methods = methods or tuned_methods(config)
    long_budget.require_tuned(section.get("long_budget"), methods)
    paper = load_config([Path(__file__).resolve().parents[3] / RATE_SOURCE])
    bootstrap = settings_from_config(config)
    started, commit = time.monotonic(), git_commit()  # the code the points train with
    batch = config["evaluate"]["batch_size"]
    record = {"protocol": protocol_of(config),
              "zeroshot": _zeroshot(backbone, split, section["benchmark"], batch, threads,
                                    folders.zeroshot_file(search.work, section["benchmark"], search.identity, batch)),
              "methods": {}}
    progress(f"zero-shot backbone: {split.split} R@1 {record['zeroshot']['mean']:.1f}")
    for method in methods:
        record["methods"][method] = search.method(method, paper, bootstrap, record["zeroshot"]["mean"])
    record["competitor"] = strongest_competitor(record["methods"])
    record["resolution"] = resolution.competitor_resolution(search, record, bootstrap)
    if section.get("long_budget"):
        record["long_budget"] = long_budget.run(search, record, bootstrap)
    record["provenance"] = {**machine_record(commit), "cpu_kernels": str(config.get("cpu_kernels", "native")),
                            **search_minutes(record, time.monotonic() - started), "threads": threads}
    return record


def search_minutes(record: Mapping, session_s: float) -> dict:
    """The search's cost: ``minutes``, the sum of every grid point's own training minutes (each run's
    ``summary.json``, over all its sessions, so a search resumed over several sessions counts them all);
    ``long_budget_minutes``, the long-budget runs' own, counted apart (with a ``long_budget`` section); and
    ``session_minutes``, the wall time of the invocation that wrote the record, all of it (reading finished
    runs costs next to nothing)."""
    points = [p for entry in record["methods"].values() for p in entry["points"]]
    minutes = {"minutes": round(sum(p["minutes"] for p in points), 1), "points": len(points)}
    if record.get("long_budget"):
        runs = record["long_budget"]["methods"].values()
        minutes["long_budget_minutes"] = round(sum(r["minutes"] for r in runs), 1)
    return {**minutes, "session_minutes": round(session_s / 60, 1)}
