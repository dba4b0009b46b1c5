"""The long budget: HN-CLIP, the strongest competitor and the methods ``tuning.long_budget.methods`` names,
each trained once more at its chosen rate for ``tuning.long_budget.epochs`` (the paper's appendix D.1 trains
every method 10 epochs; the toy's shared budget is shorter), evaluated on the tuning split after every
epoch.

Why: the rates are chosen at the shared budget, and a method that converges more slowly could lose a
comparison at 3 epochs that it would win at 10. The record states HN-CLIP minus each other long-budget
method (the competitor first) on the tuning split, at the shared budget (the two chosen grid points' last
epochs) and at the long budget (the two long runs' last epochs), each with its paired bootstrap interval
over the split's images (:func:`hnclip.analysis.epoch_rise.last_difference`), so a reader sees whether the
budget changes the comparison. The rates are not chosen again at the long budget: the runs show what the
shared budget's choices do with more epochs.

Each run trains as its method's grid points do (the same ``hnclip train`` command, its ``epochs`` item
replaced) in its own resumable folder, ``<work>/long_budget/<benchmark>-<split>/<method>-<digest>/<key><rate>``
(keyed as the points are, the epochs included; a grid's folders sit directly under ``<work>`` in a
``<benchmark>-<split>`` folder, whose name always holds a hyphen, so the two never meet). A finished run is
read, not trained again.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hnclip.analysis.epoch_rise import last_difference
from hnclip.plan.roles import REFERENCE_METHOD
from hnclip.tuning import score
from hnclip.tuning import work as folders

__all__ = ["FOLDER", "long_methods", "require_tuned", "run", "sentence"]

FOLDER = "long_budget"  # under the search's work folder; no hyphen, unlike every grid's <benchmark>-<split>


def long_methods(section: Mapping, competitor: str | None) -> list[str]:
    """The methods trained at the long budget: HN-CLIP, the record's competitor, then the section's others,
    each once, in that order."""
    named = [REFERENCE_METHOD, competitor, *section.get("methods", [])]
    return list(dict.fromkeys(m for m in named if m))


def require_tuned(section: Mapping | None, tuned: list[str]) -> None:
    """Every long-budget method is among the search's ``tuned`` ones (it trains at its chosen rate): checked
    before the grids train, so a search never ends in this error after hours; one line naming the key. The
    competitor, not known yet, is one of the tuned methods by construction."""
    if not section:
        return
    untuned = [m for m in long_methods(section, None) if m not in tuned]
    if untuned:
        raise ValueError(f"config key tuning.long_budget.methods: {', '.join(untuned)} not tuned by this search "
                         f"(tuned: {', '.join(tuned)}); a long-budget run trains at its chosen rate (tuning.long_budget: null: "
                         "no long-budget runs)")


def _run_one(search, method: str, entry: Mapping, epochs: int) -> tuple[dict, Path]:
    """One method at its chosen rate for ``epochs``: trained (or resumed) unless finished, then read."""
    from hnclip.tuning.search import _training_minutes, point_items

    section, key, rate = search.section, entry["key"], float(entry["chosen"])
    method_dir = folders.method_folder(search.work / FOLDER, section["benchmark"], search.identity, method,
                                       point_items(search.config, method, key, rate, epochs), key,
                                       search.products(method))
    out = folders.point_folder(method_dir, key, rate)
    if not folders.finished(out):
        resumed = " (resuming an interrupted run)" if (out / "epochs.csv").exists() else ""
        search.progress(f"{method}: {key} {rate:g} for {epochs} epochs training{resumed}")
        search.trainer(method, key, rate, out, epochs=epochs)
    curve = score.epoch_scores(out / "epochs.csv")
    if len(curve) != epochs:
        raise ValueError(f"{out / 'epochs.csv'}: {len(curve)} epochs evaluated, the long budget is {epochs} "
                         f"(tuning.long_budget.epochs); remove {out} to train it again")
    search.progress(f"{method}: {key} {rate:g}, {epochs} epochs: {search.split.split} R@1 "
                    + " / ".join(f"{e['mean']:.1f}" for e in curve))
    return {"key": key, "rate": rate, "curve": curve, "minutes": _training_minutes(out)}, out


def run(search, record: Mapping, bootstrap) -> dict:
    """The record's ``long_budget`` section, after every grid and the competitor are chosen: each long-budget
    method's run, and HN-CLIP minus each other one at the shared budget and at the long budget."""
    section = search.section["long_budget"]
    epochs, split = int(section["epochs"]), search.split.split
    methods = long_methods(section, record.get("competitor"))  # all tuned: run_search checked before its grids
    runs, folders_of = {}, {}
    for method in methods:
        runs[method], folders_of[method] = _run_one(search, method, record["methods"][method], epochs)
    budget = int(record["protocol"]["budget"]["epochs"])
    differences = []
    for against in methods[1:]:  # methods[0] is HN-CLIP (long_methods)
        shared = [search.chosen_folder(record, m) for m in (REFERENCE_METHOD, against)]
        for budget_epochs, (ours, theirs) in ((budget, shared), (epochs, (folders_of[REFERENCE_METHOD],
                                                                          folders_of[against]))):
            found = last_difference(ours / "epoch_ranks.csv", theirs / "epoch_ranks.csv", split, bootstrap)
            differences.append({"method": REFERENCE_METHOD, "against": against, "budget_epochs": budget_epochs,
                                **found})
    return {"epochs": epochs, "methods": runs, "differences": differences}


def sentence(record: Mapping, labels: Mapping[str, str] | None = None) -> str | None:
    """One plain line: HN-CLIP minus the competitor on the split at the shared and at the long budget, each
    with its interval; None without a ``long_budget`` section or without that comparison."""
    section, competitor = record.get("long_budget"), record.get("competitor")
    if not section or not competitor:
        return None
    found = [d for d in section["differences"] if d["method"] == REFERENCE_METHOD and d["against"] == competitor]
    if not found:
        return None
    labels = labels or {}
    parts = [f"{d['value']:+.1f} [{d['interval'][0]:+.1f}, {d['interval'][1]:+.1f}] at {d['budget_epochs']} epochs"
             for d in sorted(found, key=lambda d: d["budget_epochs"])]
    split = record["protocol"].get("split", "val")
    return (f"{labels.get(REFERENCE_METHOD, 'HN-CLIP')} minus {labels.get(competitor, competitor)} on {split}: "
            + ", ".join(parts))
