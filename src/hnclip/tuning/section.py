"""What a config's ``tuning`` section must hold for a search to mean anything, checked with the rest of the
config (:func:`hnclip.config_checks.check_config`) and again by the search itself (``hnclip tune`` may read an
effective config written before this check).

The split that scores the grid is never ``test``: a rate chosen on the split the tables report would make
every reported number an optimistic one (the choice would have seen the answer). A search needs the
benchmark's train split (every point trains on it) and the scoring split.
"""

from __future__ import annotations

from collections.abc import Mapping

from hnclip.config.errors import fail, unknown
from hnclip.plan.benchmarks import benchmark_splits

__all__ = ["DOCS", "check_tuning", "refuse_test_split", "require_tuning"]

DOCS = "docs/own-data.md, 'Tuning on your own data'"


def require_tuning(config: Mapping, verb: str = "snakemake tune") -> Mapping:
    """The config's ``tuning`` section, or a one-line :class:`ConfigError` naming the missing key."""
    section = config.get("tuning")
    if not section:
        fail("tuning", f"missing: {verb} needs a tuning section (benchmark, split, base_lr, record; {DOCS})")
    return section


def refuse_test_split(section: Mapping) -> None:
    """``tuning.split: test`` refused, in one line naming the key and why."""
    if section.get("split", "val") == "test":
        fail("tuning.split", "is 'test': rates are chosen on a held-out split (val), never on the test split the "
                             f"tables report; add a val split to the benchmark ({DOCS})")


def check_tuning(config: Mapping) -> None:
    """A configured ``tuning`` section names a benchmark with a train split and a scoring split that is not
    ``test``; nothing to check without one (``snakemake tune`` then says so: :func:`require_tuning`)."""
    section = config.get("tuning")
    if not section:
        return
    refuse_test_split(section)
    split, bench = section.get("split", "val"), section["benchmark"]
    benchmarks = config["benchmarks"]
    if bench not in benchmarks:
        fail("tuning.benchmark", unknown("benchmark", bench, benchmarks))
    splits = benchmark_splits(benchmarks[bench])
    for needed, key in (("train", "tuning.benchmark"), (split, "tuning.split")):
        if needed not in splits:
            fail(key, f"benchmark {bench!r} has no {needed!r} split (its splits: {splits}; {DOCS})")
    _check_long_budget(config, section.get("long_budget"))


def _check_long_budget(config: Mapping, long_budget: Mapping | None) -> None:
    """``tuning.long_budget`` trains tuned methods at their chosen rates: HN-CLIP among them, and every method it
    names one of ``experiments.main``'s. A config without a main table tunes nothing (its rates are unchecked,
    :func:`hnclip.tuning.record.rate_source`), so it has no long budget to check either."""
    if not long_budget or not (config.get("experiments") or {}).get("main"):
        return
    from hnclip.tuning.long_budget import long_methods
    from hnclip.tuning.record import tuned_methods

    tuned = tuned_methods(config)
    untuned = [m for m in long_methods(long_budget, None) if m not in tuned]
    if untuned:
        fail("tuning.long_budget.methods", f"{', '.join(untuned)} not tuned (experiments.main.methods: "
                                           f"{', '.join(tuned) or 'none'}); a long-budget run trains at its chosen rate")
