"""Released checkpoints a config evaluates (``models:``): which benchmarks each is scored on, where its records
go, and the spec of the released-checkpoints table.

A released model is never trained here: it is converted once (``results/released/<name>/model``, rule
``convert_released``: :mod:`hnclip.models.convert`), given an image store in its own geometry for each benchmark
it is scored on (its image size and interpolation; hard-linked from the benchmark's own store when they are the
same), and evaluated there with the paper's protocol (R@1/5/10 both ways, every caption a query, as every
evaluation). Its records are keyed like a run's, with ``train_set`` ``released`` and the model's key as its
``method``, so the tables and their intervals read them as they read any record.

The table (``results/tables/released.*``) shows, per benchmark, the zero-shot backbone and the main table's
retrained methods (when the main table scores that benchmark) beside the released rows, labelled ``(released)``:
a reproduction's retrained GOAL next to GOAL's own weights, on the same test split and the same protocol.

Plain functions of the validated config, shared by the rules (``workflow/rules/released.smk``) and the tests;
nothing here touches torch.
"""

from __future__ import annotations

import hashlib
import shlex

from hnclip import paths, plan
from hnclip.checkpoint_formats import checkpoint_format, format_names
from hnclip.config.errors import fail, unknown

__all__ = ["RELEASED", "RELEASED_TRAIN_SET", "check_models", "convert_options", "released_benchmarks",
           "released_eval_path", "released_evaluations", "released_run", "released_spec", "released_spec_digest",
           "write_released_spec"]

RELEASED = "released"  # the table's (and its spec's) name
RELEASED_TRAIN_SET = "released"  # the train_set of a released model's records: trained elsewhere
_STRETCH_KEEP = 20  # Long-CLIP's rows kept by the 77 -> 248 stretch


def check_models(config: dict, probe_hub: bool = True) -> None:
    """What the schema cannot say about ``models:``; each error names the key. ``probe_hub``: a Hub id with no
    copy here may be looked up on the Hub (:mod:`hnclip.hub_models`; off in a job's own parse)."""
    benchmarks = config["benchmarks"]
    for name, entry in config.get("models", {}).items():
        key = f"models.{name}"
        _check_format_fields(entry, key)
        for i, bench in enumerate(entry.get("benchmarks") or []):
            if bench not in benchmarks:
                fail(f"{key}.benchmarks[{i}]", unknown("benchmark", bench, benchmarks))
            if "test" not in plan.benchmark_splits(benchmarks[bench]):
                fail(f"{key}.benchmarks[{i}]", f"benchmark {bench!r} has no test split to score it on")
        if not config.get("rehearsal"):  # a rehearsal writes its stand-in files in its first job
            _check_local_files(entry, key, probe_hub)
    if config.get("models") and not released_evaluations(config):
        fail("models", "no configured benchmark has a test split to score the released checkpoints on")


def _check_format_fields(entry: dict, key: str) -> None:
    """What the entry's format (:mod:`hnclip.checkpoint_formats`) needs, accepts a ``base`` for, and can stretch."""
    fmt = checkpoint_format(entry["source"])
    for field in fmt.needs:
        if not entry.get(field):
            fail(f"{key}.{field}", f"required for source {entry['source']}")
    if entry.get("base") and not fmt.takes_base:
        based = [name for name in format_names() if checkpoint_format(name).takes_base]
        listed = ", ".join(based[:-1]) + f" and {based[-1]}" if len(based) > 1 else "".join(based)
        fail(f"{key}.base", f"only for sources {listed} (this one is {entry['source']})")
    if entry.get("stretch") and not fmt.stretchable:
        fail(f"{key}.stretch", f"source {entry['source']} has its 248 positions already")


def _check_local_files(entry: dict, key: str, probe_hub: bool = True) -> None:
    """A local checkpoint file or folder that is not there, caught at config time (naming the key) instead of
    by its conversion job after the main runs trained, or fetched from the Hub as if it were a repository; and a
    CLIPModel folder spelled like a Hub id that is neither a folder nor a Hub model reachable from here."""
    from hnclip.model_files import missing_local_source

    kinds = {"checkpoint": checkpoint_format(entry["source"]).checkpoint_kind, "base": "folder"}
    for field, kind in kinds.items():
        if entry.get(field):
            problem = missing_local_source(entry[field], kind) or _unreachable_hub_folder(entry[field], kind,
                                                                                          probe_hub)
            if problem:
                fail(f"{key}.{field}", problem)


def _unreachable_hub_folder(value: str, kind: str, probe_hub: bool) -> str | None:
    """For a folder field whose value is no folder here (so a Hub id, ``hf://`` or not): why the Hub model
    cannot be had (hnclip.hub_models), or None."""
    from pathlib import Path

    from hnclip.hub_models import hub_model_problem

    text = str(value)
    if kind != "folder" or Path(text).expanduser().is_dir():
        return None
    problem = hub_model_problem(text.removeprefix("hf://"), probe=probe_hub)
    if problem is None:
        return None
    return (f"{text!r} is neither a folder here (relative paths are read from {Path.cwd()}) nor a Hub model "
            f"reachable from here: {problem}")


def released_benchmarks(config: dict, name: str) -> list[str]:
    """The benchmarks model ``name`` is scored on: its ``benchmarks``, else every one with a test split."""
    chosen = config["models"][name].get("benchmarks")
    if chosen:
        return list(chosen)
    return [b for b, bench in config["benchmarks"].items() if "test" in plan.benchmark_splits(bench)]


def released_evaluations(config: dict) -> list[tuple[str, str]]:
    """Every (model, benchmark) scored, in config order."""
    return [(name, bench) for name in config.get("models", {}) for bench in released_benchmarks(config, name)]


def released_run(name: str) -> dict:
    """The run fields of a released model's records (``train_set`` released, ``method`` its key)."""
    return {"train_set": RELEASED_TRAIN_SET, "method": name, "gamma": 0.0, "fraction": 0.0, "seed": 0}


def released_eval_path(name: str, benchmark: str) -> str:
    return paths.released_eval_path(name, benchmark)


def convert_options(config: dict, name: str) -> str:
    """``hnclip convert-checkpoint``'s options for model ``name`` (its ``--out`` and ``--key`` aside)."""
    entry = config["models"][name]
    options = [("--format", entry["source"]), ("--source", entry.get("checkpoint")), ("--model", entry.get("model")),
               ("--revision", entry.get("revision")), ("--sha256", entry.get("sha256")), ("--base", entry.get("base")),
               ("--base-revision", entry.get("base_revision"))]
    if entry.get("stretch"):
        options.append(("--stretch", str(_STRETCH_KEEP)))
    return " ".join(f"{flag} {shlex.quote(str(value))}" for flag, value in options if value)


def _label(config: dict, name: str) -> str:
    return f"{config['models'][name].get('label') or name} (released)"


def released_spec(config: dict) -> dict:
    """The released-checkpoints table's cells (the main table's layout: rows, groups = benchmarks): per benchmark
    a released model is scored on, the zero-shot backbone and the main table's methods where the main table
    scores that benchmark, then each released model."""
    labels = {b: config["benchmarks"][b].get("label") or b for b in config["benchmarks"]}
    scored = list(dict.fromkeys(b for _, b in released_evaluations(config)))
    cells = []
    if "main" in config.get("experiments", {}):
        cells += [c for c in plan.experiment_spec(config, "main")["cells"] if c["eval_benchmark"] in scored]
    for name, bench in released_evaluations(config):
        cells.append({"row": _label(config, name), "group": labels[bench], "variant": None, "x": None,
                      "run": released_run(name), "eval_benchmark": bench, "eval_path": released_eval_path(name, bench),
                      "run_dir": None, "released": True, "model_dir": paths.released_model_dir(name)})
    return {"experiment": RELEASED, "scale": config["scale"], "settings": {"models": sorted(config["models"])},
            "cells": cells, "statistics": dict(config.get("statistics") or {}), "gamma": float(config["gamma"]),
            "roles": plan.spec_roles(config)}


def released_spec_digest(config: dict) -> str:
    """SHA-256 of the file :func:`write_released_spec` would write (the spec rule's params trigger)."""
    return hashlib.sha256(plan.spec_text(released_spec(config)).encode()).hexdigest()


def write_released_spec(config: dict, path, log=None):
    return plan.write_spec_file(released_spec(config), path, log=log)
