"""Retention: what fine-tuning on dense captions costs on short ones. The main table's models (the same
runs, trained on their in-domain sets: no runs of its own) scored on short-caption benchmarks."""

from __future__ import annotations

from hnclip.config.errors import fail
from hnclip.experiments.registry import TableLayout, register_experiment, string_list


def cells(grid, exp: dict) -> list[dict]:
    main = grid.config["experiments"]["main"]
    train_sets = list(dict.fromkeys(grid.in_domain(b) for b in main["benchmarks"]))

    def group(train_set, bench):
        return f"{grid.bench_label[train_set]} -> {grid.bench_label[bench]}"

    out = [grid.zeroshot_cell(b, group(t, b)) for b in exp["benchmarks"] for t in train_sets]
    for m in main["methods"]:
        for b in exp["benchmarks"]:
            for t in train_sets:
                out.append(grid.cell(grid.run(t, m), b, grid.method_label[m], group(t, b)))
    return out


def check(config: dict, exp: dict) -> None:
    if "main" not in config.get("experiments", {}):
        fail("experiments.retention", "scores the main table's models (the zero-shot backbone and every method of "
                                       "experiments.main): configure experiments.main too")


# short-caption retrieval is reported at R@1/5/10 both ways, as the long-caption papers do
ENTRY = register_experiment(
    name="retention", cells=cells, check=check, trains=False,
    table=TableLayout("rows", group_level="retention", ks=(1, 5, 10)),
    description="What fine-tuning on dense captions costs on short ones: the zero-shot backbone and every main-table "
                "model (experiments.main's methods, the same runs, trained on their in-domain train sets: no runs of "
                "its own) scored on short-caption benchmarks, R@1/5/10 both ways (COCO 5k and Flickr30k 1k, five "
                "captions an image).",
    settings={"benchmarks": string_list("Short-caption benchmarks (their test splits; evaluation-only, no train_set "
                                        "needed).")})
