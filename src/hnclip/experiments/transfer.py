"""Cross-dataset transfer: models trained on one benchmark scored on another, beside the zero-shot backbone."""

from __future__ import annotations

from hnclip.experiments.registry import TableLayout, register_experiment


def cells(grid, exp: dict) -> list[dict]:
    def group(pair):
        return f"{grid.bench_label[pair['train']]} -> {grid.bench_label[pair['eval']]}"

    out = [grid.zeroshot_cell(pair["eval"], group(pair)) for pair in exp["pairs"]]
    for m in exp["methods"]:
        for pair in exp["pairs"]:
            out.append(grid.cell(grid.run(pair["train"], m), pair["eval"], grid.method_label[m], group(pair)))
    return out


ENTRY = register_experiment(name="transfer", cells=cells, sections=("transfer",),
                            table=TableLayout("rows", group_level="transfer"))
