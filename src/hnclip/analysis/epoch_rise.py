"""The last epoch's rise of a run's mean R@1, with its paired bootstrap interval, from the run's
``epoch_ranks.csv`` (each query's rank per epoch on the split it was evaluated on).

A run whose score still rises between its last two epochs by more than the noise of that rise (its paired
bootstrap interval over the split's images lies above 0) had not converged at its budget: the tuning record
marks such a point under-trained (hnclip.tuning.score), and an own-data summary flags the run as still
improving (hnclip.analysis.own_results). It lives beside the bootstrap it uses, below both readers.

The same paired bootstrap gives the difference of two runs' last epochs on one split
(:func:`last_difference`): the tuning record's HN-CLIP minus the competitor at the shared budget and at the
paper's 10 epochs (hnclip.tuning.long_budget).
"""

from __future__ import annotations

import csv
from pathlib import Path

from hnclip.analysis.bootstrap import BootstrapSettings, Estimate, Outcomes, Samples, interval

__all__ = ["last_difference", "last_rise"]


def _outcomes(row: dict, split: str) -> Outcomes:
    def ints(text):
        return [int(v) for v in text.split()]

    return Outcomes(ints(row["i2t"]), ints(row["t2i"]), ints(row["text_image"]), split)


def _mean_estimate(outcomes: Outcomes) -> Estimate:
    """Mean of both directions' R@1 of one evaluation, as an estimate the bootstrap can resample."""
    samples = Samples(("0",), (outcomes,))
    return (Estimate.of(samples, "i2t_r1", outcomes.value("i2t_r1"))
            + Estimate.of(samples, "t2i_r1", outcomes.value("t2i_r1"))) / 2


def _last_row(epoch_ranks_csv: Path) -> dict:
    with open(epoch_ranks_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{epoch_ranks_csv}: no epoch was evaluated")
    return rows[-1]


def last_difference(ranks_a: Path, ranks_b: Path, split: str,
                    settings: BootstrapSettings | None = None) -> dict:
    """Run a's mean R@1 after its last epoch minus run b's, on the same split, with its paired percentile
    bootstrap interval over the split's images (both runs' outcomes on the same resampled images: the
    split's shared difficulty cancels). ``split`` names the split both were evaluated on (the draw's key)."""
    settings = settings or BootstrapSettings()
    rows = [_last_row(Path(p)) for p in (ranks_a, ranks_b)]
    if rows[0]["text_image"] != rows[1]["text_image"]:
        raise ValueError(f"{ranks_a} and {ranks_b} were not evaluated on the same {split} queries; "
                         "a paired difference needs both on one split")
    key = f"tuning/{split}/{len(rows[0]['i2t'].split())}"  # one query draw per split (and size): paired
    a, b = (_mean_estimate(_outcomes(r, key)) for r in rows)
    difference = a - b
    low, high = interval(difference, settings)
    return {"value": round(float(difference), 4), "interval": [round(low, 4), round(high, 4)]}


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
    rise = _mean_estimate(last) - _mean_estimate(before)
    low, high = interval(rise, settings)
    return {"epochs": [int(float(rows[-2]["epoch"])), int(float(rows[-1]["epoch"]))],
            "value": round(float(rise), 4), "interval": [round(low, 4), round(high, 4)],
            "under_trained": bool(low > 0)}
