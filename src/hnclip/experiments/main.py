"""The main comparison (paper Table 1): the zero-shot backbone and every method, each trained on the
benchmark's train set and scored on its test split, R@1/5/10 both ways."""

from __future__ import annotations

from hnclip.config.errors import fail
from hnclip.experiments.registry import TableLayout, register_experiment, string_list


def cells(grid, exp: dict) -> list[dict]:
    out = [grid.zeroshot_cell(b, grid.bench_label[b]) for b in exp["benchmarks"]]
    for m in exp["methods"]:
        for b in exp["benchmarks"]:
            cell = grid.cell(grid.run(grid.in_domain(b), m), b, grid.method_label[m], grid.bench_label[b])
            # which benchmark the run's epochs.csv scores for this cell: its own where the run evaluates
            # it after each epoch (DOCCI's runs log DOCCI and Long-DCI), else the run's first
            logged = grid.epoch_benchmarks(grid.in_domain(b))
            cell["epochs_benchmark"] = b if b in logged else (logged[0] if logged else None)
            out.append(cell)
    return out


def check(config: dict, exp: dict) -> None:
    methods = config["methods"]
    if config["gamma"] > 0 and all(methods[m].get("hn") for m in exp.get("methods", [])):
        # the main table, its claims and the gallery compare HN-CLIP with baselines; without one they
        # could only fail (or say nothing) after every run is trained
        fail("experiments.main.methods", f"{exp.get('methods')} has no baseline: add a method with hn: false "
                                          "(gamma 0), e.g. longclip")


ENTRY = register_experiment(
    name="main", cells=cells, check=check, table=TableLayout("rows", ks=(1, 5, 10)),
    description="The main comparison (paper Table 1).",
    settings={"benchmarks": string_list("Evaluation benchmarks (each trained on its train_set)."),
              "methods": string_list("Methods compared.")},
    # drawn from its runs' epochs.csv, their loss curves and their retrievals (analysis.smk, convergence.smk)
    log_figures=("epochs", "convergence", "gallery"))
