"""How a grid point is scored, from the files its training run writes: ``epochs.csv`` (R@1 per epoch on the
val split) for the score, ``epoch_ranks.csv`` (each val query's rank per epoch) for the interval of the
last epoch's rise.

The score is the mean of both directions' val R@1 after the last epoch: the number the main table reports,
on the split the test never sees. A run whose score still rises between its last two epochs by more than
the noise of that rise (its paired bootstrap interval over val images lies above 0; hnclip.analysis.epoch_rise) had not converged at
the shared budget: the record marks it under-trained rather than giving it more epochs than the others.
"""

from __future__ import annotations

import csv
from pathlib import Path

from hnclip.analysis.epoch_rise import last_rise

__all__ = ["epoch_scores", "last_rise", "mean_r1"]


def mean_r1(row: dict) -> float:
    """Mean of i2t and t2i R@1 of one evaluation row (an epoch's, or an evaluation record's metrics)."""
    return (float(row["i2t_r1"]) + float(row["t2i_r1"])) / 2


def epoch_scores(epochs_csv: Path) -> list[dict]:
    """Per epoch: ``epoch``, ``i2t_r1``, ``t2i_r1`` and their ``mean``, from a run's ``epochs.csv``."""
    with open(epochs_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{epochs_csv}: no epoch was evaluated (was the run trained with an eval split?)")
    return [{"epoch": int(float(r["epoch"])), "i2t_r1": round(float(r["i2t_r1"]), 4),
             "t2i_r1": round(float(r["t2i_r1"]), 4), "mean": round(mean_r1(r), 4)} for r in rows]
