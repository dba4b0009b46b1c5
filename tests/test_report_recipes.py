"""The report shows each run's effective recipe (provenance) and what "+HN" trained for each framework
(the plug-in table's legend), both read from the runs' summary.json."""

from __future__ import annotations

from test_tables import cell, record, run

from hnclip.analysis.table_format import write_table
from hnclip.analysis.tables import build_table
from hnclip.report import render_report

LONGCLIP_RECIPE = {"lr": 1e-6, "module_lr": 1e-4, "weight_decay": 0.01, "warmup_steps": 200, "schedule": "cosine",
                   "label_smoothing": 0.1, "grad_clip": 0.0,
                   "groups": [{"name": "decay", "lr": 1e-6}, {"name": "no_decay", "lr": 1e-6}]}
FINELIP_RECIPE = dict(LONGCLIP_RECIPE, module_lr=2e-4,
                      groups=[{"name": "decay", "lr": 1e-6}, {"name": "module_decay", "lr": 2e-4}])


def summary(run: str, framework: str, recipe: dict, meaning: str) -> dict:
    return {"run_dir": f"results/runs/{run}", "framework": framework, "hn_plugin": meaning, "recipe": recipe,
            "config_hash": "h", "git_commit": "g", "seed": 0, "steps": 1, "wall_time_s": 1.0, "device": "cpu",
            "checkpoint_sha256": "c"}


def test_provenance_shows_each_recipe_and_the_plugin_table_what_hn_means(tmp_path):
    cells, records = [], []
    for method, variant, gamma in (("finelip", "plain", 0.0), ("finelip_hn", "+HN", 0.5)):
        records.append(record(run(method, 0, gamma), "docci", i2t_r1=10.0, t2i_r1=9.0))
        cells.append(cell("FineLIP", "DOCCI", run(method, 0, gamma), "docci", variant=variant))
    plugin = build_table({"experiment": "plugin", "scale": "toy", "cells": cells}, records)
    write_table(plugin, tmp_path / "plugin", caption="plugin")
    provenance = [summary("docci/longclip/g0/f1/s0", "longclip", LONGCLIP_RECIPE, "the global term becomes HN"),
                  summary("docci/finelip_hn/g0.5/f1/s0", "finelip", FINELIP_RECIPE, "FineLIP: HN term added"),
                  {"run_dir": "results/runs/old", "seed": 0}]  # a summary from before recipes: empty cell
    html = render_report(tmp_path / "report.html", {"plugin": tmp_path / "plugin"}, {}, [], provenance, None,
                         "toy", "t", published=None, measured={}).read_text()
    assert "lr 1e-06, wd 0.01, warmup 200, cosine, label smoothing 0.1</td>" in html
    assert "lr 1e-06, modules 0.0002, wd 0.01, warmup 200, cosine, label smoothing 0.1</td>" in html
    assert "<dt>finelip + HN</dt><dd>FineLIP: HN term added</dd>" in html
    assert "<dt>longclip + HN</dt><dd>the global term becomes HN</dd>" in html
    assert html.count('class="provenance-run"') == 3
