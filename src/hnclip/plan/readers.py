"""What the analysis reads from a spec and its runs: the run logs the claims declare, the main comparison and
the plain runs behind the regime conditions (the cells of the dynamics figure and the epochs table are
:mod:`hnclip.plan.cells`)."""

from __future__ import annotations

from hnclip.dynamics_log import is_plain_run
from hnclip.plan.cells import epoch_cells
from hnclip.plan.grid import Run, all_evaluations, experiment_spec, is_zeroshot, zeroshot_eval_benchmarks
from hnclip.plan.roles import BASELINE_METHOD, REFERENCE_METHOD, spec_roles
from hnclip.plan.settings import run_settings

__all__ = ["main_comparison", "plain_runs", "regime_benchmarks", "report_run_logs"]


def main_comparison(config: dict, benchmark: str) -> tuple[str, list[dict]] | None:
    """The main comparison over seeds on ``benchmark`` (the headline and regime condition ``power``): the
    experiment and its cells of :data:`REFERENCE_METHOD`, :data:`BASELINE_METHOD` and the config's
    ``competitor`` (where configured and trained there) evaluated there, from the seeds experiment where it
    holds the reference and the baseline (the main table trains the first seed only), else from the main
    table; None where neither holds both."""
    wanted = {REFERENCE_METHOD, BASELINE_METHOD} | ({config["competitor"]} if config.get("competitor") else set())
    for experiment in ("seeds", "main"):
        if experiment not in config["experiments"]:
            continue
        cells = [c for c in experiment_spec(config, experiment)["cells"]
                 if c["eval_benchmark"] == benchmark and c["run"]["method"] in wanted and not is_zeroshot(c)]
        if {REFERENCE_METHOD, BASELINE_METHOD} <= {c["run"]["method"] for c in cells}:
            return experiment, cells
    return None


def plain_runs(config: dict, eval_benchmark: str) -> list[Run]:
    """The plain fine-tuning runs behind ``eval_benchmark``'s regime conditions: runs on the benchmark's
    train set, evaluated on it, whose settings play role ``plain`` (:func:`hnclip.dynamics_log.is_plain_run`:
    Long-CLIP framework, gamma 0, no token term, recomputed margins, full data), every seed configured."""
    train_set = config["benchmarks"][eval_benchmark].get("train_set")
    if not train_set:
        return []
    evaluated = {e.run for e in all_evaluations(config) if e.eval_benchmark == eval_benchmark}
    return sorted(r for r in evaluated if r.train_set == train_set and float(r.fraction) == 1.0
                  and is_plain_run({"config": run_settings(config, r), "run": {"subset_path": None}}))


def regime_benchmarks(config: dict) -> list[str]:
    """Benchmarks whose regime conditions the workflow measures (``results/regime/<benchmark>.json``): those
    with a zero-shot evaluation and plain fine-tuning runs (:func:`plain_runs`)."""
    return [b for b in zeroshot_eval_benchmarks(config) if plain_runs(config, b)]


def report_run_logs(specs: dict) -> dict[str, list[str]]:
    """The run logs the claims read beside the evaluation records, as the claims rule declares them:
    ``epochs``, the main runs' ``epochs.csv`` (the per-epoch claims), and ``dynamics``, the ``dynamics.csv`` of the
    reference method's runs (``roles.reference``) at the config's gamma (the gradient-ratio peak), found
    by method key, and ``summaries``, the ``summary.json`` of the main table's runs and of their other seeds
    (the seeds experiment): their training time. A spec without
    ``gamma`` (hand-made) takes every gamma > 0."""
    epochs = [f"{c['run_dir']}/epochs.csv" for c in epoch_cells(specs["main"])] if specs.get("main") else []
    dynamics = []
    for spec in specs.values():
        reference = spec.get("roles", spec_roles())["reference"]
        for cell in spec["cells"]:
            gamma = float(cell["run"]["gamma"])
            # the gamma sweep's other gammas are not the method's runs
            at_gamma = spec.get("gamma") is None or abs(gamma - float(spec["gamma"])) < 1e-12
            if cell["run"]["method"] == reference and gamma > 0 and at_gamma and cell.get("run_dir"):
                dynamics.append(f"{cell['run_dir']}/dynamics.csv")
    # the main table's runs' summary.json, over its seeds (the seeds experiment): their training time (the
    # speed-up claim, hnclip.analysis.claims.cost)
    summaries = [f"{c['run_dir']}/summary.json" for name in ("main", "seeds") for c in (specs.get(name) or {}).get("cells", [])
                 if not c.get("zeroshot") and c.get("run_dir")]
    return {"epochs": list(dict.fromkeys(epochs)), "dynamics": list(dict.fromkeys(dynamics)),
            "summaries": list(dict.fromkeys(summaries))}
