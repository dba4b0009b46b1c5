"""What the analysis reads from a spec and its runs: the cells of the dynamics figure and the epochs table,
the run logs the claims declare, the main comparison and the plain runs behind the regime conditions."""

from __future__ import annotations

from hnclip.plan.grid import (
    Run,
    _cell_run,
    all_evaluations,
    experiment_spec,
    is_zeroshot,
    zeroshot_eval_benchmarks,
)
from hnclip.plan.roles import BASELINE_METHOD, REFERENCE_METHOD, spec_roles

__all__ = ["dynamics_figure_cells", "epoch_cells", "main_comparison", "plain_runs", "regime_benchmarks",
           "report_run_logs"]


def dynamics_figure_cells(spec: dict) -> dict[tuple[float, str], dict]:
    """The cells whose runs the gradient-dynamics figure draws (``hnclip figure dynamics``, a fractions
    spec): per (fraction, group), the first HN row's (gamma > 0) cell of the lowest seed."""
    hn_cells = [c for c in spec["cells"] if not is_zeroshot(c) and float(c["run"]["gamma"]) > 0]
    if not hn_cells:
        return {}
    row = hn_cells[0]["row"]
    chosen: dict[tuple[float, str], dict] = {}
    for cell in hn_cells:
        if cell["row"] != row:
            continue
        key = (float(cell["x"] if cell.get("x") is not None else cell["run"]["fraction"]), cell["group"])
        if key not in chosen or float(cell["run"]["seed"]) < float(chosen[key]["run"]["seed"]):
            chosen[key] = cell
    return chosen


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
    train set, evaluated on it, whose settings play role ``plain`` (:func:`hnclip.analysis.premise.run_role`:
    Long-CLIP framework, gamma 0, no token term, recomputed margins, full data), every seed configured."""
    from hnclip.analysis.premise import is_plain_run
    from hnclip.plan.settings import run_settings

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


def epoch_cells(spec: dict) -> list[dict]:
    """Cells with a run whose epochs.csv scores the cell's own benchmark (zero-shot cells have no run)."""
    cells = []
    for cell in spec["cells"]:
        if cell.get("zeroshot"):
            continue
        if not cell.get("run_dir"):
            raise ValueError(f"{spec['experiment']} spec: cell of run {_cell_run(cell).path} has no run_dir")
        if cell.get("epochs_benchmark", cell["eval_benchmark"]) != cell["eval_benchmark"]:
            continue
        cells.append(cell)
    return cells


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
