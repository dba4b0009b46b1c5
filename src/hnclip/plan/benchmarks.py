"""What the config's benchmarks hold, as the plan and the rules read it: their splits, whose files they
read, which train sets evaluate themselves, and the wildcard constraints built from such lists."""

from __future__ import annotations

import re

__all__ = ["DEFAULT_SPLITS", "NEVER_MATCHES", "benchmark_splits", "epoch_eval_benchmarks", "fetched_benchmark",
           "self_evaluated_train_sets", "wildcard_pattern"]

NEVER_MATCHES = "(?!)"  # a wildcard constraint no path matches


def wildcard_pattern(names) -> str:
    """A Snakemake wildcard constraint that matches exactly these names, each taken literally; with no
    names, one that matches nothing, so that the rules it constrains apply to no path (a config without
    experiments, protocol variants, or train sets of one kind)."""
    return "|".join(re.escape(name) for name in names) or NEVER_MATCHES


DEFAULT_SPLITS = ("train", "test")  # a benchmark that lists no `splits` has both


def benchmark_splits(bench: dict) -> list[str]:
    """The splits a benchmark's config entry holds (``splits``; both when it names none)."""
    return list(bench.get("splits", DEFAULT_SPLITS))


def fetched_benchmark(config: dict, benchmark: str) -> str:
    """The benchmark whose fetch writes ``benchmark``'s files: its ``files_from``, else itself."""
    return config["benchmarks"][benchmark].get("files_from") or benchmark


def self_evaluated_train_sets(config: dict) -> list[str]:
    """Benchmarks that runs train on and that hold their own test split: a run on one of these is
    evaluated on that split by its training job, once its model is saved (``workflow/rules/train.smk``:
    one process, the imports and the model load paid once), not by a separate evaluate job. Every other
    evaluation (transfer, a train set without a test split such as VG paragraphs) stays one job each."""
    trained = {bench.get("train_set") for bench in config["benchmarks"].values()}
    return [name for name, bench in config["benchmarks"].items()
            if name in trained and "test" in benchmark_splits(bench)]


def epoch_eval_benchmarks(config: dict, train_set: str) -> list[str]:
    """The benchmarks evaluated after every epoch of a run on ``train_set``: every benchmark with a test
    split whose runs train on it (DOCCI's runs: DOCCI and Long-DCI; VG's: Urban-1K), in config order, so
    the per-epoch claims, which speak of all four benchmarks, have every benchmark's curve."""
    return [name for name, bench in config["benchmarks"].items()
            if bench.get("train_set") == train_set and "test" in benchmark_splits(bench)]
