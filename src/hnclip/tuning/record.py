"""The tuning record: what the search found, shipped in the repository (``tuning.record``) as the released
backbone's ``release.json`` is, and what the config must agree with.

Which methods are tuned, and at whose rate the others train, is decided here once:

- every method of ``experiments.main`` is tuned (the baselines and HN-CLIP alike);
- a plug-in "+HN" variant (``experiments.plugin.pairs``) trains at its plain method's tuned rate: HN is
  added to a recipe, not retuned;
- any other method trains at the tuned rate of the one main-table method with its framework and HN flag
  (HN-CLIP's frozen-G variant at HN-CLIP's).

The strongest competitor is the main-table baseline (every tuned method but HN-CLIP) with the best val
score at its tuned rate: chosen on val, never on test.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from hnclip import paths
from hnclip.frameworks.registry import framework_entry
from hnclip.plan import Run, run_settings
from hnclip.plan.roles import REFERENCE_METHOD

__all__ = ["check_record", "chosen_point", "config_disagreements", "load_record", "rate_source", "record_check",
           "record_warnings", "resolve_record", "strongest_competitor", "tuned_methods", "tuned_rate_key"]

REPO = Path(__file__).resolve().parents[3]  # a relative tuning.record not in the working directory: the checkout's
_ENTRY_KEYS = ("key", "chosen", "score", "paper_rate", "under_trained", "above_zeroshot", "points")
_POINT_KEYS = ("rate", "step", "score", "epochs")
_LONG_RUN_KEYS = ("key", "rate", "curve", "minutes")
_DIFFERENCE_KEYS = ("method", "against", "budget_epochs", "value", "interval")


def tuned_methods(config: Mapping) -> list[str]:
    """The methods the protocol tunes: ``experiments.main``'s, in its order (none without a main table)."""
    return list((config.get("experiments") or {}).get("main", {}).get("methods", []))


def tuned_rate_key(config: Mapping, method: str) -> str:
    """The train setting the protocol searches for ``method``: its framework's ``tuned_rate``."""
    return framework_entry(config["methods"][method]["framework"]).tuned_rate


def rate_source(config: Mapping, method: str) -> str | None:
    """The tuned method whose chosen rate ``method`` trains at (itself when tuned), or None when no rule
    gives it one (it keeps the config's rate, unchecked)."""
    tuned = tuned_methods(config)
    if method in tuned:
        return method
    for pair in (config.get("experiments") or {}).get("plugin", {}).get("pairs", []):
        if pair["hn"] == method and pair["plain"] in tuned:
            return pair["plain"]
    entry = config["methods"][method]
    same = [m for m in tuned if config["methods"][m]["framework"] == entry["framework"]
            and bool(config["methods"][m].get("hn")) == bool(entry.get("hn"))]
    return same[0] if len(same) == 1 else None


def strongest_competitor(methods: Mapping[str, Mapping]) -> str | None:
    """The baseline (every tuned method but :data:`REFERENCE_METHOD`) with the best val score at its chosen
    rate; a tie goes to the first in the main table's order. None when no baseline was tuned."""
    best, best_score = None, -math.inf
    for method, entry in methods.items():
        if method == REFERENCE_METHOD:
            continue
        if entry["score"] > best_score:
            best, best_score = method, entry["score"]
    return best


def load_record(path: str | Path) -> dict:
    """A tuning record, with an error that names the file when it is missing or not a record."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"tuning record {path} is missing: run `snakemake tune` and copy its "
                                f"{paths.TUNING_RECORD} there (docs/toy-design.md, 'Tuning')") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"tuning record {path} is not JSON: {error}") from None
    if not isinstance(record, dict) or not isinstance(record.get("methods"), dict):
        raise ValueError(f"tuning record {path} has no 'methods' table: not a record `hnclip tune` wrote")
    check_record(record, path)
    return record


def chosen_point(entry: Mapping) -> Mapping | None:
    """The grid point at the entry's chosen rate, None when its grid has no such point."""
    return next((p for p in entry["points"] if math.isclose(float(p["rate"]), float(entry["chosen"]),
                                                             rel_tol=1e-9)), None)


def check_record(record: Mapping, path) -> None:
    """What a reader of the record relies on, one line naming the file, the method and what is wrong: every
    entry's keys, every point's, and a chosen rate that is one of its grid's points."""
    for name in ("protocol", "zeroshot"):
        if not isinstance(record.get(name), dict):
            raise ValueError(f"tuning record {path} has no {name!r}: not a record `hnclip tune` wrote")
    for method, entry in record["methods"].items():
        missing = [k for k in _ENTRY_KEYS if k not in (entry if isinstance(entry, dict) else {})]
        if missing:
            raise ValueError(f"tuning record {path}: methods.{method} has no {', '.join(missing)}")
        for point in entry["points"]:
            lacking = [k for k in _POINT_KEYS if k not in point]
            if lacking:
                raise ValueError(f"tuning record {path}: a point of methods.{method} has no {', '.join(lacking)}")
        if chosen_point(entry) is None:
            rates = ", ".join(f"{float(p['rate']):g}" for p in entry["points"])
            raise ValueError(f"tuning record {path}: methods.{method} chose {entry['key']} "
                             f"{float(entry['chosen']):g}, which is none of its grid's points ({rates}); "
                             "rerun `snakemake tune` or restore the record")
    if "long_budget" in record:
        _check_long_budget(record["long_budget"], path)
    from hnclip.tuning.resolution import check_resolution

    check_resolution(record.get("resolution"), path)


def _check_long_budget(section, path) -> None:
    """The optional ``long_budget`` section (:mod:`hnclip.tuning.long_budget`): its epochs, each run's keys
    and a curve of that many epochs, each difference's keys and a two-number interval."""
    def bad(key: str, what: str):
        raise ValueError(f"tuning record {path}: long_budget{key} {what}: not a section `hnclip tune` wrote")

    if not isinstance(section, dict):
        bad("", "is not a table")
    for name, kind in (("epochs", int), ("methods", dict), ("differences", list)):
        if not isinstance(section.get(name), kind) or isinstance(section.get(name), bool):
            bad(f".{name}", "is missing or not " + {int: "an integer", dict: "a table", list: "a list"}[kind])
    for method, entry in section["methods"].items():
        missing = [k for k in _LONG_RUN_KEYS if k not in (entry if isinstance(entry, dict) else {})]
        if missing:
            bad(f".methods.{method}", f"has no {', '.join(missing)}")
        if not isinstance(entry["curve"], list) or len(entry["curve"]) != section["epochs"] or not all(
                isinstance(e, dict) and "mean" in e for e in entry["curve"]):
            bad(f".methods.{method}.curve", f"is not {section['epochs']} epochs with a mean each")
    for i, difference in enumerate(section["differences"]):
        missing = [k for k in _DIFFERENCE_KEYS if k not in (difference if isinstance(difference, dict) else {})]
        if missing:
            bad(f".differences[{i}]", f"has no {', '.join(missing)}")
        if not isinstance(difference["interval"], list) or len(difference["interval"]) != 2:
            bad(f".differences[{i}].interval", "is not [low, high]")


def _configured_rate(config: Mapping, method: str, key: str) -> float:
    """The rate ``key`` a run of ``method`` trains at, as the plan gives it to every run of the method
    (:func:`hnclip.plan.run_settings`: its recipe over the shared train section); the run's other fields do
    not enter a rate, so any run of the method stands for them all."""
    run = Run(train_set="", method=method, gamma=str(config["gamma"]), fraction="1", seed=0)
    return float(run_settings(dict(config), run)[key])


def config_disagreements(config: Mapping, record: Mapping) -> list[str]:
    """Every method whose configured rate is not the record's choice for its rate source (one line each,
    naming the method, the key and both rates); empty when the config trains what the record chose."""
    problems = []
    for method in config["methods"]:
        source = rate_source(config, method)
        if source is None:
            continue
        if source not in record["methods"]:
            problems.append(f"methods.{method}: its rate comes from {source}, which the tuning record did not tune")
            continue
        chosen = record["methods"][source]
        key = chosen["key"]
        configured = _configured_rate(config, method, key)
        if not math.isclose(configured, float(chosen["chosen"]), rel_tol=1e-9):
            problems.append(f"methods.{method}: {key} {configured:g} in the config, the tuning record chose "
                            f"{float(chosen['chosen']):g} for {source}")
    if record.get("competitor") and config.get("competitor") != record["competitor"]:
        problems.append(f"competitor: {config.get('competitor')!r} in the config, the tuning record's strongest "
                        f"baseline on val is {record['competitor']!r}")
    return problems


def resolve_record(path) -> Path:
    """``tuning.record`` as the workflow reads it: from the working directory, else from the checkout (the
    shipped ``resources/tuning/record.json`` for a run in another ``--directory``)."""
    path = Path(path)
    if path.is_absolute() or path.exists() or not (REPO / path).exists():
        return path
    return REPO / path


def record_warnings(config: Mapping) -> list[str]:
    """The config's rates against its tuning record, one warning line each naming the config key and the
    record file (:func:`config_disagreements`); a record that is missing or broken says so in one line. None
    without a ``tuning`` section, or while the record is the search's own output and not written yet."""
    section = config.get("tuning") or {}
    path = resolve_record(section["record"]) if section.get("record") else None
    if path is None or (path == Path(paths.TUNING_RECORD) and not path.exists()):
        return []
    try:
        record = load_record(path)
    except (FileNotFoundError, ValueError) as error:
        return [f"config key tuning.record: {error}"]
    return [f"config key {problem} (tuning.record {path})" for problem in config_disagreements(config, record)]


def record_check(config: Mapping, path) -> dict:
    """What the summary says of the tuning record: its file, the split it chose on, and every place the
    config's rates are not its choices (:func:`config_disagreements`), or the one line that makes it no
    record (``error``)."""
    try:
        record = load_record(path)
    except (FileNotFoundError, ValueError) as error:
        return {"record": str(path), "error": str(error)}
    from hnclip.tuning.long_budget import sentence
    from hnclip.tuning.resolution import resolution_sentence

    labels = {m: e.get("label") or m for m, e in (config.get("methods") or {}).items()}
    return {"record": str(path), "split": record["protocol"].get("split"),
            "problems": config_disagreements(config, record), "long_budget": sentence(record, labels),
            "resolution": resolution_sentence(record, labels)}
