"""The published evaluation protocols side by side: which models are scored on which test-split variant.

Papers in this line disagree on protocol, which is why their numbers for one model differ: GOAL scores
DOCCI on 5,100 images (test + qual_test) where the publisher's test split has 5,000, tests DCI on its own
1,999-image list where LoTLIP uses all 7,805 images, and reports R@1/5/25/50 instead of R@1/5/10. The
paper's protocol stays the default everywhere else; this module plans the extra evaluations of the
report's protocol table:

- the split variants come from the adapters (:func:`hnclip.data.test_variants`: DOCCI ``test_goal``, DCI
  ``test_all``/``test_goal``, Long-DCI ``test_keep_empty``), each prepared like a test split;
- the K-sets need no extra evaluation: every evaluation records R@1/5/10/25/50 from one ranking
  (:data:`hnclip.evaluate.RECORDED_KS`), the table shows both sets' columns;
- the models are the main table's rows (the zero-shot backbone and every main method) on the main
  benchmarks, plus the transfer table's rows on evaluation-only benchmarks the main table lacks, so
  every benchmark the config evaluates has its protocol rows.

Plain functions of the validated config, shared by the rules (``workflow/rules/protocols.smk``) and the
tests; nothing here touches torch.
"""

from __future__ import annotations

import hashlib

from hnclip import paths, plan

__all__ = ["DEFAULT_SPLIT", "all_variants", "benchmark_variants", "protocol_eval_path", "protocol_spec",
           "protocol_spec_digest", "variant_pattern", "write_protocol_spec"]

DEFAULT_SPLIT = "test"


def benchmark_variants(config: dict, benchmark: str) -> dict[str, str]:
    """The test-split variants of one configured benchmark (split name -> what it is)."""
    from hnclip.data import test_variants

    return test_variants(config["benchmarks"][benchmark]["adapter"])


def all_variants(config: dict) -> list[str]:
    """Every split variant any configured benchmark has, each once."""
    names = {v for b in config["benchmarks"] for v in benchmark_variants(config, b)}
    return sorted(names)


def variant_pattern(config: dict) -> str:
    """The ``{variant}`` wildcard's constraint: the known variant names (none matches when there are none)."""
    return plan.wildcard_pattern(all_variants(config))


def protocol_eval_path(cell: dict, split: str) -> str:
    """Where a (model, benchmark) cell's evaluation on ``split`` lives: the main evaluation for the
    paper's split, ``results/protocols/...`` for a variant."""
    if split == DEFAULT_SPLIT:
        return cell["eval_path"]
    if plan.is_zeroshot(cell):
        return paths.zeroshot_protocol_path(cell["eval_benchmark"], split)
    run = cell["run"]
    model = paths.run_path(run["train_set"], run["method"], paths.format_number(run["gamma"]),
                           paths.format_number(run["fraction"]), run["seed"])
    return paths.protocol_path(model, cell["eval_benchmark"], split)


def _model_cells(config: dict) -> list[dict]:
    experiments = config.get("experiments", {})
    cells = []
    main_benchmarks = set()
    if "main" in experiments:
        main = plan.experiment_spec(config, "main")["cells"]
        main_benchmarks = {c["eval_benchmark"] for c in main}
        cells += main
    if "transfer" in experiments:
        cells += [c for c in plan.experiment_spec(config, "transfer")["cells"]
                  if c["eval_benchmark"] not in main_benchmarks]
    return cells


def protocol_spec(config: dict) -> dict:
    """Cells of the protocol table: per model cell, one per split (the paper's ``test`` first).

    Each cell: ``row`` (the model's row label), ``benchmark`` (label), ``eval_benchmark``, ``split``,
    ``split_description``, ``run`` and ``eval_path`` (the record to read), ``model_dir`` (what is scored),
    ``run_dir`` (the run's folder, whose summary.json gives the table's config hash; None for the zero-shot
    backbone).
    """
    labels = {b: config["benchmarks"][b].get("label") or b for b in config["benchmarks"]}
    cells, seen = [], set()
    for cell in _model_cells(config):
        bench = cell["eval_benchmark"]
        key = (cell["row"], bench, cell["eval_path"])
        if key in seen:  # the zero-shot row sits in main and transfer alike
            continue
        seen.add(key)
        model_dir = paths.BACKBONE_MODEL if plan.is_zeroshot(cell) else f"{cell['run_dir']}/model"
        splits = {DEFAULT_SPLIT: "the paper's protocol (the config's test split)", **benchmark_variants(config, bench)}
        for split, description in splits.items():
            cells.append({"row": cell["row"], "benchmark": labels[bench], "eval_benchmark": bench, "split": split,
                          "split_description": description, "run": cell["run"],
                          "eval_path": protocol_eval_path(cell, split), "model_dir": model_dir,
                          "run_dir": cell["run_dir"], "zeroshot": plan.is_zeroshot(cell)})
    return {"experiment": "protocols", "scale": config["scale"], "cells": cells,
            "statistics": dict(config.get("statistics") or {}), "gamma": float(config["gamma"]),
            "roles": plan.spec_roles()}


def protocol_spec_digest(config: dict) -> str:
    """SHA-256 of the file :func:`write_protocol_spec` would write (the spec rule's params trigger)."""
    return hashlib.sha256(plan.spec_text(protocol_spec(config)).encode()).hexdigest()


def write_protocol_spec(config: dict, path, log=None):
    """Write the protocol table's spec (``results/specs/protocols.json``), as :func:`hnclip.plan.write_spec`
    writes an experiment's."""
    return plan.write_spec_file(protocol_spec(config), path, log=log)
