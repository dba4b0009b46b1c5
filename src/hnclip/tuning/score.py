"""How a grid point is scored, from the files its training run writes: ``epochs.csv`` (R@1 per epoch on the
val split) for the score, ``epoch_ranks.csv`` (each val query's rank per epoch) for the interval of the
last epoch's rise.

The score is the mean of both directions' val R@1 after the last epoch: the number the main table reports,
on the split the test never sees. A run whose score still rises between its last two epochs by more than
the noise of that rise (its paired bootstrap interval over val images lies above 0) had not converged at
the shared budget: the record marks it under-trained rather than giving it more epochs than the others.
"""

from __future__ import annotations

import csv
from pathlib import Path

from hnclip.analysis.bootstrap import BootstrapSettings, Estimate, Outcomes, Samples, interval

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


def _outcomes(row: dict, split: str) -> Outcomes:
    def ints(text):
        return [int(v) for v in text.split()]

    return Outcomes(ints(row["i2t"]), ints(row["t2i"]), ints(row["text_image"]), split)


def last_rise(epoch_ranks_csv: Path, settings: BootstrapSettings | None = None) -> dict | None:
    """The change of mean val R@1 from the second-to-last to the last epoch, with its paired percentile
    bootstrap interval over val images (both epochs' outcomes on the same resampled images); None for a
    run of one epoch. ``under_trained``: the interval lies above 0."""
    settings = settings or BootstrapSettings()
    with open(epoch_ranks_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if len(rows) < 2:
        return None
    split = f"tuning/{Path(epoch_ranks_csv).parent.name}"
    before, last = (_outcomes(r, split) for r in rows[-2:])

    def mean_estimate(outcomes: Outcomes) -> Estimate:
        samples = Samples(("0",), (outcomes,))
        return (Estimate.of(samples, "i2t_r1", outcomes.value("i2t_r1"))
                + Estimate.of(samples, "t2i_r1", outcomes.value("t2i_r1"))) / 2

    rise = mean_estimate(last) - mean_estimate(before)
    low, high = interval(rise, settings)
    return {"epochs": [int(float(rows[-2]["epoch"])), int(float(rows[-1]["epoch"]))],
            "value": round(float(rise), 4), "interval": [round(low, 4), round(high, 4)],
            "under_trained": bool(low > 0)}
