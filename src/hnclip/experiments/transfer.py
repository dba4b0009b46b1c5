"""Cross-dataset transfer: models trained on one benchmark scored on another, beside the zero-shot backbone."""

from __future__ import annotations

from hnclip.experiments.registry import TableLayout, record_list, register_experiment, string_key, string_list


def cells(grid, exp: dict) -> list[dict]:
    def group(pair):
        return f"{grid.bench_label[pair['train']]} -> {grid.bench_label[pair['eval']]}"

    out = [grid.zeroshot_cell(pair["eval"], group(pair)) for pair in exp["pairs"]]
    for m in exp["methods"]:
        for pair in exp["pairs"]:
            out.append(grid.cell(grid.run(pair["train"], m), pair["eval"], grid.method_label[m], group(pair)))
    return out


ENTRY = register_experiment(
    name="transfer", cells=cells, table=TableLayout("rows", group_level="transfer"),
    description="Train on one benchmark, evaluate on another.",
    settings={"methods": string_list("Methods compared: the transfer claims compare HN-CLIP with every baseline, so "
                                     "a main-table method left out leaves a3_transfer undecided."),
              "pairs": record_list("Transfer directions.", {"train": string_key("Training benchmark (its train split)."),
                                                            "eval": string_key("Evaluation benchmark (its test split).")})})
