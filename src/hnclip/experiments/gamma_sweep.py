"""The gamma sweep: one HN method trained at each gamma."""

from __future__ import annotations

from hnclip.config.errors import fail
from hnclip.experiments.registry import TableLayout, register_experiment
from hnclip.paths import format_number


def cells(grid, exp: dict) -> list[dict]:
    m = exp["method"]
    out = []
    for g in exp["gammas"]:
        for b in exp["benchmarks"]:
            run = grid.run(grid.in_domain(b), m, gamma=g)
            out.append(grid.cell(run, b, f"gamma={format_number(g)}", grid.bench_label[b], x=float(g)))
    return out


def check(config: dict, exp: dict) -> None:
    if not config["methods"][exp["method"]].get("hn"):
        fail("experiments.gamma_sweep.method", "must be a method with hn: true")


ENTRY = register_experiment(name="gamma_sweep", cells=cells, check=check, sections=("ablation",),
                            table=TableLayout("swept", rows=("gamma",), swept="gamma"))
