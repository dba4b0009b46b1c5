"""The protocol table's plan: which models are scored on which split variant, and where each record lives."""

from __future__ import annotations

import re
from pathlib import Path

from hnclip import plan, protocols
from hnclip.workflow_config import load_config

REPO = Path(__file__).resolve().parents[1]


def test_paper_grid_scores_every_main_model_on_each_published_split_variant():
    config = load_config(REPO / "config/paper.yaml")
    spec = protocols.protocol_spec(config)
    by_bench = {}
    for c in spec["cells"]:
        by_bench.setdefault(c["eval_benchmark"], set()).add(c["split"])
    assert by_bench == {"docci": {"test", "test_goal"}, "dci": {"test", "test_all"},
                        "long_dci": {"test", "test_keep_empty"}, "urban1k": {"test"}}
    rows = {c["row"] for c in spec["cells"]}
    assert plan.ZEROSHOT_ROW in rows and "HN-CLIP" in rows and len(rows) == 1 + 7  # backbone + 7 main methods
    hn_goal = next(c for c in spec["cells"] if c["row"] == "HN-CLIP" and c["split"] == "test_goal")
    assert hn_goal["eval_path"] == "results/protocols/docci/hnclip/g0.5/f1/s0/docci/test_goal.json"
    assert hn_goal["model_dir"] == "results/runs/docci/hnclip/g0.5/f1/s0/model"
    zs = next(c for c in spec["cells"] if c["zeroshot"] and c["split"] == "test_all")
    assert zs["eval_path"] == "results/protocols/zeroshot/dci/test_all.json"
    assert zs["model_dir"] == "results/backbone/model"
    # the paper's split reuses the main evaluation: no second job for it
    hn_test = next(c for c in spec["cells"] if c["row"] == "HN-CLIP" and c["eval_benchmark"] == "dci"
                   and c["split"] == "test")
    assert hn_test["eval_path"] == "results/evals/dci/hnclip/g0.5/f1/s0/dci.json"
    assert set(protocols.variant_pattern(config).split("|")) == {"test_goal", "test_all", "test_keep_empty"}


def test_toy_grid_covers_the_evaluation_only_transfer_target_with_the_transfer_rows():
    config = load_config(REPO / "config/config.yaml")
    spec = protocols.protocol_spec(config)
    benches = {(c["eval_benchmark"], c["row"]) for c in spec["cells"]}
    assert ("synthetic_shift", plan.ZEROSHOT_ROW) in benches and ("synthetic_shift", "HN-CLIP") in benches
    assert {c["split"] for c in spec["cells"]} == {"test"}  # synthetic data has no other protocol
    assert re.fullmatch(protocols.variant_pattern(config), "test_goal") is None  # matches no path
