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

__all__ = ["config_disagreements", "load_record", "rate_source", "strongest_competitor", "tuned_methods",
           "tuned_rate_key"]


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
    return record


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
