"""The plug-in table: each framework trained plain and with the HN term ("+HN"), and their difference."""

from __future__ import annotations

from hnclip.experiments.registry import TableLayout, register_experiment


def cells(grid, exp: dict) -> list[dict]:
    out = []
    for pair in exp["pairs"]:
        for b in exp["benchmarks"]:
            for variant, key in (("plain", "plain"), ("+HN", "hn")):
                run = grid.run(grid.in_domain(b), pair[key])
                out.append(grid.cell(run, b, pair["label"], grid.bench_label[b], variant=variant))
    return out


ENTRY = register_experiment(name="plugin", cells=cells, sections=("plugin",),
                            table=TableLayout("plugin", rows=("framework",)))
