"""The claims judged from the files the workflow left: ``hnclip claims`` writes ``results/claims.json``.

What is read: the experiment specs, the evaluation records their cells point to, the
premise measurements (``results/premise.json``) and the run logs :func:`hnclip.plan.report_run_logs` names
(the main runs' ``epochs.csv`` and ``summary.json``, the reference method's ``dynamics.csv``), and each main run's
``epoch_ranks.csv`` beside its ``epochs.csv`` (the per-epoch intervals), found by the run folder: the train
rule declares it as an output and the claims rule as an input, without a flag of its own.
The tables the claims judge are rebuilt from the records (cheap, and independent of the table files'
formatting). The report renders the verdicts this writes; it judges nothing itself.

``claims.json``: ``{"claims": [verdict, ...], "power": {"notes": [...], "reference": "..."}, "collapsed":
{baseline: {benchmark: [row - zero-shot, low, high]}}}``, the verdicts as
:func:`hnclip.analysis.claims.evaluate_claims` returns them, the notes of
:func:`hnclip.analysis.claims.power_notes` and the baselines at or below the zero-shot backbone
(:func:`hnclip.analysis.claims.collapsed_rows`; absent from older files). A number that is not finite (an interval nobody could draw)
is written as JSON's ``NaN``/``Infinity``, which Python's ``json`` reads back as the same float.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from hnclip import paths, plan
from hnclip.analysis.claims import collapsed_rows, evaluate_claims, power_notes

__all__ = ["judge_from_files", "load_claims", "run_costs", "spec_records", "write_claims"]


def spec_records(specs: Mapping[str, Mapping], declared: Iterable | None = None) -> tuple[dict, list[dict]]:
    """(experiment -> its records, every record once by run and benchmark): the evaluation records the
    specs' cells point to that exist.

    ``declared``: the evaluation files a rule declared as inputs; a record read outside them is an error."""
    from hnclip.analysis.records import load_records

    per_spec, records, seen = {}, [], set()
    for name, spec in specs.items():
        if declared is not None:
            _check_declared("evaluation record", [c["eval_path"] for c in spec["cells"]
                                                  if c.get("eval_path") and Path(c["eval_path"]).is_file()],
                            declared)
        per_spec[name] = load_records(spec)
        for r in per_spec[name]:
            key = json.dumps([r["run"], r["eval_benchmark"]], sort_keys=True)
            if key not in seen:
                seen.add(key)
                records.append(r)
    return per_spec, records


def _check_declared(kind: str, needed: Iterable, declared: Iterable) -> None:
    declared = {os.path.normpath(str(p)) for p in declared}
    undeclared = [str(p) for p in needed if os.path.normpath(str(p)) not in declared]
    if undeclared:
        raise ValueError(f"hnclip claims: the specs need {kind}(s) not passed as inputs: {', '.join(undeclared[:5])}"
                         + (f" and {len(undeclared) - 5} more" if len(undeclared) > 5 else ""))


def _epochs_table(specs: Mapping[str, Mapping]):
    """The main runs' per-epoch retrieval, when every run logged it (``train.eval_every_epoch``)."""
    from hnclip.analysis.tables import build_epochs_table, epoch_cells

    spec = specs.get("main")
    if not spec:
        return None
    cells = epoch_cells(spec)
    if not cells or not all(Path(c["run_dir"], "epochs.csv").is_file() for c in cells):
        return None
    return build_epochs_table(spec)


def _caption_words(specs: Mapping[str, Mapping], records: Iterable[Mapping]) -> dict[str, float]:
    """Mean caption length (words) per benchmark label, from the evaluation records that carry it."""
    words = {r["eval_benchmark"]: r["mean_caption_words"] for r in records if r.get("mean_caption_words")}
    return {c["group"]: float(words[c["eval_benchmark"]]) for spec in specs.values() for c in spec["cells"]
            if c["eval_benchmark"] in words and " -> " not in str(c["group"])}


def run_costs(specs: Iterable[Mapping | None]) -> list[dict]:
    """Each run's training cost, once per run (cells repeat over benchmarks and experiments), from the summary.json
    in its folder: method, seed, train set, gamma and fraction (the cell's run), ``train_time_s`` (wall time
    less the per-epoch evaluations and the probe's estimated excess; the wall time for an older summary) and
    ``probed_steps`` (0: the run never probed). A run without a summary is left out."""
    out, seen = [], set()
    for cell in (c for spec in specs for c in (spec or {}).get("cells", [])):
        run_dir = cell.get("run_dir")
        if cell.get("zeroshot") or not run_dir or run_dir in seen or not Path(run_dir, "summary.json").is_file():
            continue
        seen.add(run_dir)
        summary = json.loads(Path(run_dir, "summary.json").read_text())
        timing = summary.get("timing") or {}
        seconds = timing.get("train_time_s")
        out.append({**{k: cell["run"][k] for k in ("method", "seed", "train_set", "gamma", "fraction")},
                    "run_dir": run_dir, "train_time_s": float(seconds if seconds is not None else summary["wall_time_s"]),
                    "probed_steps": int(timing.get("probed_steps") or 0)})
    return out


def load_premise(premise) -> dict | None:
    """The premise measurements from a dict or a JSON file (None: those claims say "no data")."""
    if premise is None or isinstance(premise, Mapping):
        return dict(premise) if premise else None
    return json.loads(Path(premise).read_text())


def judge_from_files(scale: str, specs: Mapping[str, Mapping], premise=None, *, evals: Iterable | None = None,
                     run_logs: Iterable | None = None) -> dict:
    """``{"claims": verdicts, "power": {"notes", "reference"}, "collapsed": ...}`` from the specs' records and
    run logs.

    ``premise``: a dict or ``results/premise.json``. ``evals``/``run_logs``: the files a rule declared
    (evaluation records; ``epochs.csv``/``dynamics.csv``); given, every such file the specs need must be
    among them. The run logs are found by key whatever their label: the main runs' per-epoch logs and the
    dynamics logs of the reference method's runs (the specs' ``roles.reference``) at the config's gamma.
    """
    from hnclip.analysis.records import load_dynamics
    from hnclip.analysis.tables import build_table

    specs = {name: spec for name, spec in (specs or {}).items() if spec}
    per_spec, records = spec_records(specs, declared=evals)
    built = {name: build_table(spec, per_spec[name]) for name, spec in specs.items()}
    logs = plan.report_run_logs(specs)  # the rules' declared run logs
    if run_logs is not None:
        run_logs = list(run_logs)
        _check_declared("run log", [p for p in logs["epochs"] + logs["dynamics"] + logs["summaries"]
                                    if Path(p).is_file()], run_logs)
    dynamics = {}
    for path in logs["dynamics"]:
        run_dir = Path(path).parent
        label = paths.run_of_dir(run_dir.as_posix())
        if Path(path).is_file():
            dynamics[label] = load_dynamics(run_dir)
    epochs = _epochs_table(specs)
    if epochs is not None:
        built["epochs"] = epochs
    claims = evaluate_claims(built, scale, specs=specs, records=records, premise=load_premise(premise),
                             caption_words=_caption_words(specs, records), dynamics=dynamics,
                             costs=run_costs([specs.get("main"), specs.get("seeds")]))
    notes, reference = power_notes(built.get("main"), specs.get("main"))
    return {"claims": claims, "power": {"notes": notes, "reference": reference},
            "collapsed": collapsed_rows(built, specs)}


def _plain(value):
    """numpy scalars and arrays, tuples and sets as the JSON types they stand for."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def write_claims(path, judged: Mapping) -> Path:
    """``claims.json``, written atomically; see the module's docstring for its shape."""
    from hnclip.fileio import write_text_atomic

    return write_text_atomic(path, json.dumps(_plain(judged), indent=2) + "\n")


def load_claims(path) -> dict:
    """``claims.json`` as :func:`write_claims` wrote it, checked for its two keys."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list) or "power" not in data:
        raise ValueError(f"{path}: not a claims file (expected {{'claims': [...], 'power': {{...}}}}; "
                         "write it with hnclip claims)")
    power = data["power"] or {}
    return {"claims": data["claims"], "power": {"notes": list(power.get("notes") or []),
                                                 "reference": str(power.get("reference") or "")},
            "collapsed": dict(data.get("collapsed") or {})}
