"""Whether the scoring split resolves the one choice the protocol makes between methods: the strongest
competitor (the baseline with the best tuned score) against the runner-up baseline, as the paired difference
of their chosen points' last-epoch mean R@1 with its bootstrap interval over the split's images
(:func:`hnclip.analysis.epoch_rise.last_difference`). An interval above 0 means the split is large enough to
tell them apart (docs/toy-design.md, "Split sizes"); otherwise the competitor was chosen inside the noise,
and the record says so."""

from __future__ import annotations

from collections.abc import Mapping

from hnclip.analysis.epoch_rise import last_difference
from hnclip.plan.roles import REFERENCE_METHOD

__all__ = ["check_resolution", "competitor_resolution", "resolution_sentence", "runner_up"]

KEYS = ("competitor", "runner_up", "value", "interval", "resolved")


def runner_up(methods: Mapping[str, Mapping], competitor: str | None) -> str | None:
    """The baseline with the best tuned score after the competitor (main-table order breaks ties)."""
    rest = [(m, e["score"]) for m, e in methods.items() if m not in (REFERENCE_METHOD, competitor)]
    return max(rest, key=lambda item: item[1])[0] if competitor and rest else None


def competitor_resolution(search, record: Mapping, bootstrap) -> dict | None:
    """The competitor minus the runner-up on the search's split (their chosen points' runs,
    :meth:`hnclip.tuning.search._Search.chosen_folder`), its interval, and ``resolved`` (the interval lies
    above 0); None with fewer than two baselines."""
    competitor = record.get("competitor")
    second = runner_up(record["methods"], competitor)
    if second is None:
        return None
    ranks = [search.chosen_folder(record, m) / "epoch_ranks.csv" for m in (competitor, second)]
    found = last_difference(*ranks, search.split.split, bootstrap)
    return {"competitor": competitor, "runner_up": second, **found, "resolved": found["interval"][0] > 0}


def check_resolution(section, path) -> None:
    """The optional ``resolution`` section: its keys and a two-number interval, or one line naming the file."""
    if section is None:
        return
    missing = [k for k in KEYS if k not in (section if isinstance(section, dict) else {})]
    if missing or not (isinstance(section["interval"], list) and len(section["interval"]) == 2):
        raise ValueError(f"tuning record {path}: resolution has no {', '.join(missing) or 'two-number interval'}: "
                         "not a section `hnclip tune` wrote")


def resolution_sentence(record: Mapping, labels: Mapping[str, str] | None = None) -> str | None:
    """One plain line: whether the split tells the competitor from the runner-up; None without the section."""
    found = record.get("resolution")
    if not found:
        return None
    labels = labels or {}
    split = record["protocol"].get("split", "val")
    low, high = found["interval"]
    verdict = "resolves" if found["resolved"] else "does not resolve"
    return (f"{split} {verdict} the competitor's choice: {labels.get(found['competitor'], found['competitor'])} "
            f"minus {labels.get(found['runner_up'], found['runner_up'])} {found['value']:+.2f} "
            f"[{low:+.2f}, {high:+.2f}]")
