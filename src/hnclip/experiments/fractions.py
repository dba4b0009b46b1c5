"""Data efficiency: each method trained on fractions of its train set, from the zero-shot backbone (fraction 0)."""

from __future__ import annotations

from hnclip.experiments.registry import (
    FigureLayout,
    TableLayout,
    number_list,
    register_experiment,
    string_list,
)


def cells(grid, exp: dict) -> list[dict]:
    # the backbone every fraction starts from, at fraction 0: what a fraction's fine-tuning adds
    out = [grid.zeroshot_cell(b, grid.bench_label[b]) for b in exp["benchmarks"]]
    for m in exp["methods"]:
        for f in exp["fractions"]:
            for b in exp["benchmarks"]:
                run = grid.run(grid.in_domain(b), m, fraction=f)
                out.append(grid.cell(run, b, grid.method_label[m], grid.bench_label[b], x=float(f)))
    return out


ENTRY = register_experiment(
    name="fractions", cells=cells, table=TableLayout("swept", rows=("method", "fraction"), swept="fraction"),
    description="Sample efficiency on nested subsets of the training data.",
    settings={"benchmarks": string_list("Evaluation benchmarks."), "methods": string_list("Methods compared."),
              "fractions": number_list("Fractions in (0, 1] of the training set.", exclusiveMinimum=0, maximum=1)},
    figure=FigureLayout("sweep", title="R@1 vs data fraction", log_x=True),
    # the HN runs' gradient dynamics at each fraction, from their dynamics.csv (analysis.smk)
    log_figures=("dynamics",))
