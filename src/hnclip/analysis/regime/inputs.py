"""The regime's inputs and output file: a model's features, the plain runs (their summaries, evaluations and
logs) and a written regime report read back."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hnclip.analysis.regime.definitions import (
    CONDITION_KEYS,
)
from hnclip.dynamics_log import MICRO_BATCH_INFONCE, is_plain_run


# ------------------------------------------------------------------------------------- inputs
@dataclass
class ModelFeatures:
    """A model's L2-normalised test features: one row per test image and one per caption."""

    images: np.ndarray
    texts: np.ndarray


@dataclass
class PlainRun:
    """One plain fine-tuning run: its folder, summary, dynamics log, evaluation record on the benchmark and
    (for the model-based conditions) its test features."""

    run_dir: str
    summary: dict
    dynamics: pd.DataFrame
    record: dict
    features: ModelFeatures | None = None

    @property
    def seed(self) -> str:
        return str(self.summary.get("seed", self.summary["config"]["seed"]))


def _run_tail(run_dir) -> str:
    return "/".join(Path(run_dir).parts[-5:])


def load_plain_runs(run_dirs: Iterable, eval_paths: Iterable, benchmark: str) -> list[PlainRun]:
    """Each run folder's summary, dynamics log and evaluation record on ``benchmark`` (matched by the run's
    path, ``train_set/method/g../f../s..``), refusing a run that is not plain (:func:`is_plain_run`)."""
    from hnclip.analysis.records import load_eval, run_name

    records = {}
    for path in eval_paths:
        record = load_eval(path)
        if record["eval_benchmark"] == benchmark:
            records[run_name(record["run"])] = (str(path), record)
    runs = []
    for run_dir in run_dirs:
        run_dir = Path(run_dir)
        summary = json.loads((run_dir / "summary.json").read_text())
        summary.setdefault("run_dir", str(run_dir))
        if not is_plain_run(summary):
            raise ValueError(f"run {run_dir} does not play role 'plain' (gamma 0, no token term, full data, "
                             f"Long-CLIP framework)")
        tail = _run_tail(run_dir)
        if tail not in records:
            raise ValueError(f"no evaluation record on {benchmark} for run {run_dir} among the --evals given")
        dynamics_path = run_dir / "dynamics.csv"
        if not dynamics_path.is_file():
            raise FileNotFoundError(f"dynamics log {dynamics_path} does not exist")
        runs.append(PlainRun(str(run_dir), summary, pd.read_csv(dynamics_path, dtype={MICRO_BATCH_INFONCE: str}),
                             records[tail][1]))
    return runs


def load_regime(path) -> dict:
    """A ``results/regime/<benchmark>.json``, checked for the eight conditions in order."""
    data = json.loads(Path(path).read_text())
    keys = tuple(c.get("key") for c in data.get("conditions", []))
    if keys != CONDITION_KEYS:
        raise ValueError(f"regime file {path}: conditions {keys}, expected {CONDITION_KEYS}")
    return data
