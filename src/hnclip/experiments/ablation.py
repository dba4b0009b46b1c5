"""The ablation: the variants of :data:`hnclip.plan.ABLATION_ROLES`, each a method at its gamma."""

from __future__ import annotations

from hnclip.config.errors import fail
from hnclip.experiments.registry import TableLayout, record_list, register_experiment, string_key, string_list


def cells(grid, exp: dict) -> list[dict]:
    out = []
    for v in exp["variants"]:
        for b in exp["benchmarks"]:
            run = grid.run(grid.in_domain(b), v["method"], gamma=v.get("gamma"))
            out.append(grid.cell(run, b, v["label"], grid.bench_label[b]))
    return out


def check(config: dict, exp: dict) -> None:
    for i, v in enumerate(exp.get("variants", [])):
        if v.get("gamma") and not config["methods"][v["method"]].get("hn"):
            fail(f"experiments.ablation.variants[{i}].gamma", f"method {v['method']!r} has hn: false")


ENTRY = register_experiment(
    name="ablation", cells=cells, check=check, table=TableLayout("rows", rows=("variant",), ks=(1, 5, 10)),
    description="HN term only, token branch only, both, frozen vs recomputed margins.",
    settings={"benchmarks": string_list("Evaluation benchmarks."),
              "variants": record_list("Rows of the ablation table.", {
                  "label": string_key("Row label."), "method": string_key("Method key."),
                  "gamma": {"type": "number", "minimum": 0,
                            "description": "Gamma override (default the top-level gamma for hn methods)."}},
                  optional=("gamma",))})
