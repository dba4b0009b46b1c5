"""The plug-in table: each framework trained plain and with the HN term ("+HN"), and their difference."""

from __future__ import annotations

from hnclip.experiments.registry import TableLayout, record_list, register_experiment, string_key, string_list


def cells(grid, exp: dict) -> list[dict]:
    out = []
    for pair in exp["pairs"]:
        for b in exp["benchmarks"]:
            for variant, key in (("plain", "plain"), ("+HN", "hn")):
                run = grid.run(grid.in_domain(b), pair[key])
                out.append(grid.cell(run, b, pair["label"], grid.bench_label[b], variant=variant))
    return out


ENTRY = register_experiment(
    name="plugin", cells=cells, table=TableLayout("plugin", rows=("framework",)),
    description="Each framework with and without the HN term.",
    settings={"benchmarks": string_list("Evaluation benchmarks."),
              "pairs": record_list("Framework rows.", {"label": string_key("Framework name shown."),
                                                       "plain": string_key("Method without HN."),
                                                       "hn": string_key("The same method with the HN objective.")})})
