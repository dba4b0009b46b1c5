"""Replication: each method trained at every configured seed, shown per seed with their spread."""

from __future__ import annotations

from hnclip.experiments.registry import TableLayout, register_experiment, string_list


def cells(grid, exp: dict) -> list[dict]:
    out = []
    for m in exp["methods"]:
        for s in grid.config["seeds"]:
            for b in exp["benchmarks"]:
                run = grid.run(grid.in_domain(b), m, seed=s)
                out.append(grid.cell(run, b, grid.method_label[m], grid.bench_label[b]))
    return out


ENTRY = register_experiment(
    name="seeds", cells=cells, table=TableLayout("seeds"),
    description="Seed replication with every seed in `seeds`.",
    settings={"benchmarks": string_list("Evaluation benchmarks."), "methods": string_list("Methods replicated.")})
