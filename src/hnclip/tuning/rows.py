"""The report's tuning section, from a tuning record: per method, val R@1 at the paper-ratio rate and at the
tuned rate, the tuned rate's curve per epoch, and what the protocol flags (under-trained at the shared
budget; no rate of the grid above the zero-shot backbone), and the long budget's runs and differences when
the record has them (:mod:`hnclip.tuning.long_budget`)."""

from __future__ import annotations

from collections.abc import Mapping

from hnclip.tuning.long_budget import sentence
from hnclip.tuning.record import chosen_point
from hnclip.tuning.resolution import resolution_sentence

__all__ = ["tuning_section"]


def tuning_section(record: Mapping, labels: Mapping[str, str], config_problems: list[str] = ()) -> dict:
    """What the template shows; ``labels``: method key -> display label; ``config_problems``: where the run's
    rates are not the record's choices (:func:`hnclip.tuning.record.config_disagreements`)."""
    rows = []
    for method, entry in record["methods"].items():
        paper = next((p for p in entry["points"] if p["step"] == 0), None)
        chosen = chosen_point(entry)  # one of its points: load_record checked
        rows.append({
            "method": method, "label": labels.get(method, method), "key": entry["key"],
            "paper_rate": entry["paper_rate"], "paper_score": paper["score"] if paper else None,
            "rate": entry["chosen"], "score": entry["score"], "gain": entry["score"] - paper["score"] if paper else None,
            "curve": [e["mean"] for e in chosen["epochs"]], "rise": chosen.get("rise"),
            "under_trained": entry["under_trained"], "above_zeroshot": entry["above_zeroshot"],
            "rates": [p["rate"] for p in entry["points"]],
        })
    competitor = record.get("competitor")
    provenance = record.get("provenance") or {}
    return {"rows": rows, "zeroshot": record["zeroshot"]["mean"], "protocol": record["protocol"],
            "competitor": labels.get(competitor, competitor) if competitor else None,
            "not_lifted": [r["label"] for r in rows if not r["above_zeroshot"]],
            "under_trained": [r["label"] for r in rows if r["under_trained"]],
            "provenance": provenance, "config_problems": list(config_problems),
            "long_budget": _long_budget(record, labels), "resolution": resolution_sentence(record, labels)}


def _long_budget(record: Mapping, labels: Mapping[str, str]) -> dict | None:
    """The long budget's table (method, rate, R@1 per epoch) and differences, labelled; None without it."""
    section = record.get("long_budget")
    if not section:
        return None
    runs = [{"label": labels.get(m, m), "key": run["key"], "rate": run["rate"], "minutes": run["minutes"],
             "curve": [e["mean"] for e in run["curve"]]} for m, run in section["methods"].items()]
    differences = [{**d, "label": labels.get(d["method"], d["method"]), "against_label": labels.get(d["against"], d["against"])}
                   for d in section["differences"]]
    return {"epochs": section["epochs"], "runs": runs, "differences": differences,
            "sentence": sentence(record, labels)}
