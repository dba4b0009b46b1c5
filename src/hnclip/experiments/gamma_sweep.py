"""The gamma sweep: one HN method trained at each gamma."""

from __future__ import annotations

from hnclip.config.errors import fail
from hnclip.experiments.registry import (
    FigureLayout,
    TableLayout,
    number_list,
    register_experiment,
    string_key,
    string_list,
)
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


ENTRY = register_experiment(
    name="gamma_sweep", cells=cells, check=check, table=TableLayout("swept", rows=("gamma",), swept="gamma"),
    description="Sensitivity to the margin weight gamma.",
    settings={"benchmarks": string_list("Evaluation benchmarks."), "method": string_key("An hn method swept over gammas."),
              "gammas": number_list("Values of gamma.", minimum=0)},
    # the config's gamma (the main runs'), which the spec carries, is marked
    figure=FigureLayout("sweep", title="R@1 vs γ", mark="gamma"))
