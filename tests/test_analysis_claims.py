"""Each claim's criterion pinned on hand-made result tables: the paper's sentence, not a proxy of it.

Tables are built by :func:`hnclip.analysis.tables.build_table` from hand-written evaluation records, so
the numbers each test asserts are computed here by hand (means of two directions, differences of rows).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from hnclip.analysis.claims import CLAIMS, PREMISE_KEYS, VERDICTS, check_premise, evaluate_claims
from hnclip.analysis.margins import measure_gradient_ratio
from hnclip.analysis.published import load_published
from hnclip.analysis.tables import build_epochs_table, build_table
from hnclip.plan import ZEROSHOT_ROW

METRICS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")
BENCH = {"DOCCI": "docci", "DCI": "dci", "Long-DCI": "long_dci", "Urban-1K": "urban1k", "Synthetic": "synthetic"}
TRAIN = {"docci": "docci", "dci": "dci", "long_dci": "docci", "urban1k": "vg", "synthetic": "synthetic"}
# display label -> method key, as hnclip.plan builds cells from config/config.yaml's methods: the claims
# find HN-CLIP, its frozen-G variant and GOAL by these keys, never by the label
METHOD_KEYS = {"HN-CLIP": "hnclip", "HN-CLIP (frozen G)": "hnclip_frozen", "Long-CLIP FT": "longclip",
               "GOAL": "goal", "FineLIP": "finelip", "StructXLIP": "structxlip", "LoRA": "lora", "DoRA": "dora"}
# ablation variant label -> (method key, gamma), as config/config.yaml's experiments.ablation.variants
ABLATION_VARIANTS = {"InfoNCE": ("longclip", 0.0), "HN only": ("longclip_hn", 0.5), "token only": ("hnclip", 0.0),
                     "HN + token": ("hnclip", 0.5), "HN + token (frozen G)": ("hnclip_frozen", 0.5)}


def _cell(row, group, i2t, t2i, *, method=None, gamma=0.0, fraction=1.0, seed=0, variant=None, x=None,
          train_set=None, bench=None, metrics=None):
    bench = bench or BENCH[group]
    run = {"train_set": train_set or TRAIN[bench], "method": method or METHOD_KEYS.get(row, row), "gamma": gamma,
           "fraction": fraction, "seed": seed}
    values = dict.fromkeys(METRICS, 50.0) | {"i2t_r1": i2t, "t2i_r1": t2i} | (metrics or {})
    cell = {"row": row, "group": group, "variant": variant, "x": x, "run": run, "eval_benchmark": bench}
    if row == ZEROSHOT_ROW:
        cell["zeroshot"] = True
    return cell, {"run": run, "eval_benchmark": bench, "metrics": values}


def _build(experiment, cells):
    """(table, spec, records) of hand-made cells."""
    spec = {"experiment": experiment, "scale": "toy", "cells": [c for c, _ in cells]}
    records = [r for _, r in cells]
    return build_table(spec, records), spec, records


def _verdicts(tables=None, specs=None, **kw):
    return {v["id"]: v for v in evaluate_claims(tables or {}, "toy", specs=specs, **kw)}


# ------------------------------------------------------------------------------------------------ A1
def test_a1_needs_best_or_tied_everywhere_and_strictly_best_r1_ignoring_the_zero_shot_row():
    tie = {"i2t_r10": 99.0, "t2i_r10": 99.0}
    main, _, _ = _build("main", [
        _cell(ZEROSHOT_ROW, "DOCCI", 90, 90, metrics=dict.fromkeys(METRICS, 90.0)),  # a reference, not a rival
        _cell("HN-CLIP", "DOCCI", 40, 31, gamma=0.5, metrics=tie | {"i2t_r5": 60.0, "t2i_r5": 60.0}),
        _cell("Long-CLIP FT", "DOCCI", 38, 30, metrics=tie),
        _cell("GOAL", "DOCCI", 36.5, 29, metrics=tie)])
    v = _verdicts({"main": main})["a1_columns"]
    assert v["verdict"] == "holds"
    # R@1: 40 - 38 = 2 (I→T), 31 - 30 = 1 (T→I); R@5 60 vs 50 twice; R@10 ties 99 = 99 twice
    assert v["measures"]["R@1 gain over the strongest competitor"] == {"DOCCI I→T": 2.0, "DOCCI T→I": 1.0}
    assert (v["measures"]["columns best"], v["measures"]["columns tied"], v["measures"]["columns"]) == (4, 2, 6)
    assert v["measures"]["R@1 directions led"] == 2
    # a tie in an R@1 column is not a lead
    main, _, _ = _build("main", [_cell("HN-CLIP", "DOCCI", 40, 30, gamma=0.5),
                                 _cell("Long-CLIP FT", "DOCCI", 38, 30)])
    v = _verdicts({"main": main})["a1_columns"]
    assert v["verdict"] == "does not hold" and v["measures"]["R@1 directions led"] == 1


def _epochs_table(tmp_path, finals: dict, per_epoch: dict, group="DOCCI"):
    """Main table (finals: row -> (i2t, t2i)) and epochs table (per_epoch: row -> [(i2t, t2i) per epoch])."""
    cells, epoch_cells = [], []
    for row, (i2t, t2i) in finals.items():
        cell, record = _cell(row, group, i2t, t2i, gamma=0.5 if METHOD_KEYS.get(row) == "hnclip" else 0.0)
        cells.append((cell, record))
        if row in per_epoch:
            run_dir = tmp_path / row.replace(" ", "_")
            run_dir.mkdir(parents=True, exist_ok=True)
            lines = ["epoch,step," + ",".join(METRICS)]
            for e, (a, b) in enumerate(per_epoch[row], start=1):
                lines.append(f"{e},{10 * e},{a},50,50,{b},50,50")
            (run_dir / "epochs.csv").write_text("\n".join(lines) + "\n")
            epoch_cells.append({**cell, "run_dir": str(run_dir)})
    main, _, _ = _build("main", cells)
    epochs = build_epochs_table({"experiment": "main", "scale": "toy", "cells": epoch_cells})
    return main, epochs


def test_a1_first_epoch_needs_most_baselines_final_average_r1(tmp_path):
    finals = {"HN-CLIP": (80, 80), "Long-CLIP FT": (50, 50), "FineLIP": (60, 60), "GOAL": (70, 70)}
    # epoch 1 average (66 + 64) / 2 = 65 >= 50 and 60, < 70: two of three baselines, more than half
    main, epochs = _epochs_table(tmp_path, finals, {"HN-CLIP": [(66, 64), (72, 72)]})
    v = _verdicts({"main": main, "epochs": epochs})["a1_first_epoch"]
    assert v["verdict"] == "holds"
    assert v["measures"]["first-epoch average R@1"] == {"DOCCI": 65.0}
    assert v["measures"]["baselines matched by the first epoch"] == {"DOCCI": 2}
    main, epochs = _epochs_table(tmp_path, finals, {"HN-CLIP": [(56, 54), (72, 72)]})  # 55: one of three
    assert _verdicts({"main": main, "epochs": epochs})["a1_first_epoch"]["verdict"] == "does not hold"


def test_a1_second_epoch_must_beat_every_baseline_on_docci_or_its_toy_stand_in(tmp_path):
    finals = {"HN-CLIP": (80, 80), "Long-CLIP FT": (50, 50), "GOAL": (70, 70)}
    main, epochs = _epochs_table(tmp_path, finals, {"HN-CLIP": [(60, 60), (71, 70)]}, group="Synthetic")
    v = _verdicts({"main": main, "epochs": epochs})["a1_second_epoch"]
    assert v["verdict"] == "holds" and "Synthetic (standing in for DOCCI" in v["criterion"]
    assert v["measures"]["second-epoch average R@1"] == {"Synthetic": 70.5}
    main, epochs = _epochs_table(tmp_path, finals, {"HN-CLIP": [(60, 60), (70, 69)]}, group="Synthetic")
    assert _verdicts({"main": main, "epochs": epochs})["a1_second_epoch"]["verdict"] == "does not hold"


def test_e3_hn_must_lead_both_directions_after_every_epoch_and_collapses_are_located(tmp_path):
    finals = {"HN-CLIP": (80, 80), "FineLIP": (50, 50)}
    per_epoch = {"HN-CLIP": [(60, 61), (70, 71), (75, 76)], "FineLIP": [(50, 50), (55, 56), (30, 58)]}
    main, epochs = _epochs_table(tmp_path, finals, per_epoch)
    v = _verdicts({"main": main, "epochs": epochs})["e3_directions"]
    assert v["verdict"] == "holds"
    assert v["measures"]["epoch of the largest I→T R@1 drop"] == {"FineLIP on DOCCI": 3}  # 55 -> 30
    per_epoch["HN-CLIP"][0] = (60, 49)  # T→I behind FineLIP's 50 after epoch 1
    main, epochs = _epochs_table(tmp_path, finals, per_epoch)
    assert _verdicts({"main": main, "epochs": epochs})["e3_directions"]["verdict"] == "does not hold"


# ------------------------------------------------------------------------------------------------ A2
def _plugin(gains: dict):
    """gains: (framework, group) -> (Δ I→T, Δ T→I) over a plain 40/40."""
    cells = []
    for (fw, group), (a, b) in gains.items():
        cells.append(_cell(fw, group, 40, 40, method=f"{fw}-plain", variant="plain"))
        cells.append(_cell(fw, group, 40 + a, 40 + b, method=f"{fw}-hn", gamma=0.5, variant="+HN"))
    return _build("plugin", cells)


def test_a2_average_r1_must_improve_every_framework_on_in_domain_benchmarks_only():
    gains = {("LoRA", "DOCCI"): (1.0, 0.5), ("LoRA", "Urban-1K"): (-3.0, -2.0),  # VG -> Urban-1K: transfer
             ("DoRA", "DOCCI"): (2.0, -1.0), ("DoRA", "Urban-1K"): (1.0, 1.0)}
    table, spec, _ = _plugin(gains)
    v = _verdicts({"plugin": table}, {"plugin": spec})["a2_frameworks"]
    assert v["verdict"] == "holds"
    assert v["evidence"]["DoRA on DOCCI: Δ average R@1"] == pytest.approx(0.5)
    assert "LoRA on Urban-1K: Δ average R@1" not in v["evidence"]
    assert (v["measures"]["in-domain combinations improved"], v["measures"]["in-domain combinations"]) == (2, 2)
    gains[("DoRA", "DOCCI")] = (1.0, -1.5)  # average -0.25
    table, spec, _ = _plugin(gains)
    assert _verdicts({"plugin": table}, {"plugin": spec})["a2_frameworks"]["verdict"] == "does not hold"


def test_a2_per_direction_allows_one_miss_in_36_cases_but_not_in_12():
    frameworks = ["Long-CLIP FT", "FineLIP", "GOAL", "StructXLIP", "LoRA", "DoRA"]
    gains = {(fw, g): (2.0, 2.0) for fw in frameworks for g in ("DOCCI", "DCI", "Long-DCI")}
    gains[("GOAL", "DCI")] = (2.0, -0.5)
    table, spec, _ = _plugin(gains)
    v = _verdicts({"plugin": table}, {"plugin": spec})["a2_directions"]
    assert v["verdict"] == "holds"
    assert (v["measures"]["per-direction cases improved"], v["measures"]["per-direction cases"]) == (35, 36)
    few = {k: g for k, g in gains.items() if k[1] == "DCI"}  # 12 cases, one miss
    table, spec, _ = _plugin(few)
    assert _verdicts({"plugin": table}, {"plugin": spec})["a2_directions"]["verdict"] == "does not hold"


def test_counting_claims_say_what_they_read_without_the_baselines_below_the_zero_shot_backbone():
    """a2_frameworks, a2_directions and a1_first_epoch count baselines; GOAL and StructXLIP ending below the
    zero-shot backbone (80 here) make their "+HN gains" repairs. The verdict stays the paper's count, and beside
    it the same criterion with those baselines left out."""
    main, _, _ = _build("main", [_cell(ZEROSHOT_ROW, "DOCCI", 80, 80), _cell("HN-CLIP", "DOCCI", 90, 90, gamma=0.5),
                                 _cell("LoRA", "DOCCI", 85, 85), _cell("GOAL", "DOCCI", 70, 72),
                                 _cell("StructXLIP", "DOCCI", 60, 61), _cell("DoRA", "DOCCI", 80.5, 79.5)])
    # DoRA (80.0 on average) is at the backbone: within it, left out too
    gains = {("LoRA", "DOCCI"): (-0.5, -0.5), ("GOAL", "DOCCI"): (8.0, 6.0), ("StructXLIP", "DOCCI"): (11.0, 11.0)}
    table, spec, _ = _plugin(gains)
    v = _verdicts({"plugin": table, "main": main}, {"plugin": spec})
    frameworks = v["a2_frameworks"]
    assert frameworks["verdict"] == "does not hold"  # LoRA -0.5
    assert frameworks["without_collapsed"] == {"left_out": ["GOAL", "StructXLIP"], "verdict": "does not hold",
                                               "conditions": 1}
    # the repairs alone: LoRA improves too, then every framework does, and without the collapsed ones LoRA decides
    gains[("LoRA", "DOCCI")] = (0.5, 0.5)
    table, spec, _ = _plugin(gains)
    v = _verdicts({"plugin": table, "main": main}, {"plugin": spec})
    assert v["a2_frameworks"]["verdict"] == "holds" and v["a2_frameworks"]["without_collapsed"]["verdict"] == "holds"
    gains[("LoRA", "DOCCI")] = (0.0, 0.0)  # only the repairs improve
    table, spec, _ = _plugin(gains)
    v = _verdicts({"plugin": table, "main": main}, {"plugin": spec})
    assert v["a2_directions"]["without_collapsed"]["verdict"] == "does not hold"
    assert "with GOAL, StructXLIP left out (at or below the zero-shot backbone)" in v["a2_directions"]["evidence"]
    # no baseline below the backbone: nothing left out
    healthy, _, _ = _build("main", [_cell(ZEROSHOT_ROW, "DOCCI", 50, 50), _cell("HN-CLIP", "DOCCI", 90, 90, gamma=0.5),
                                    _cell("GOAL", "DOCCI", 70, 72)])
    v = _verdicts({"plugin": table, "main": healthy}, {"plugin": spec})
    assert v["a2_frameworks"]["without_collapsed"]["left_out"] == []


def test_a1_first_epoch_without_the_collapsed_baselines(tmp_path):
    # epoch 1 at 75: above GOAL (70) and StructXLIP (60), below LoRA (85) and Long-CLIP FT (84); 2 of 4 is not
    # more than half; without the two collapsed baselines 0 of 2
    finals = {ZEROSHOT_ROW: (80, 80), "HN-CLIP": (90, 90), "LoRA": (85, 85), "Long-CLIP FT": (84, 84),
              "GOAL": (70, 70), "StructXLIP": (60, 60)}
    main, epochs = _epochs_table(tmp_path, finals, {"HN-CLIP": [(75, 75), (90, 90)]})
    v = _verdicts({"main": main, "epochs": epochs})["a1_first_epoch"]
    assert v["verdict"] == "does not hold"
    assert v["without_collapsed"]["left_out"] == ["GOAL", "StructXLIP"]
    assert v["without_collapsed"]["verdict"] == "does not hold"
    # epoch 1 at 84.5: 3 of 4 (holds); without the collapsed, 1 of 2 is not more than half
    main, epochs = _epochs_table(tmp_path, finals, {"HN-CLIP": [(84.5, 84.5), (90, 90)]})
    v = _verdicts({"main": main, "epochs": epochs})["a1_first_epoch"]
    assert v["verdict"] == "holds" and v["without_collapsed"]["verdict"] == "does not hold"


def test_a2_gain_must_grow_with_caption_length():
    table, spec, _ = _plugin({("LoRA", "DOCCI"): (1.0, 1.0), ("LoRA", "DCI"): (3.0, 3.0)})
    words = {"DOCCI": 120.0, "DCI": 130.0}
    assert _verdicts({"plugin": table}, {"plugin": spec}, caption_words=words)["a2_caption_length"]["verdict"] \
        == "holds"
    words = {"DOCCI": 140.0, "DCI": 130.0}
    assert _verdicts({"plugin": table}, {"plugin": spec}, caption_words=words)["a2_caption_length"]["verdict"] \
        == "does not hold"
    assert _verdicts({"plugin": table}, {"plugin": spec})["a2_caption_length"]["verdict"] == "no data"


# ------------------------------------------------------------------------------------------------ A3
def _transfer(rows: dict):
    """rows: row -> {pair: (i2t, t2i)}."""
    cells = []
    for row, pairs in rows.items():
        for pair, (a, b) in pairs.items():
            train, evaluated = pair.split(" -> ")
            cells.append(_cell(row, pair, a, b, train_set=BENCH.get(train, train.lower()), bench=BENCH[evaluated]))
    return _build("transfer", cells)


def test_a3_transfer_tests_the_papers_pairs_and_ignores_vg_to_urban1k_and_hn_variants():
    pairs = {"DCI -> DOCCI": (85, 83), "DOCCI -> DCI": (70, 71), "DOCCI -> Long-DCI": (60, 61),
             "VG -> Urban-1K": (50, 50)}
    rows = {"HN-CLIP": pairs, "Long-CLIP FT": {p: (a - 1, b - 1) for p, (a, b) in pairs.items()},
            "HN-CLIP (frozen G)": {p: (a + 5, b + 5) for p, (a, b) in pairs.items()}}
    rows["Long-CLIP FT"]["VG -> Urban-1K"] = (60, 60)  # not a pair the sentence names
    table, _, _ = _transfer(rows)
    v = _verdicts({"transfer": table})["a3_transfer"]
    assert v["verdict"] == "holds" and "VG -> Urban-1K I→T" not in v["measures"]["HN-CLIP transfer R@1"]
    rows["Long-CLIP FT"]["DOCCI -> Long-DCI"] = (59, 62)
    table, _, _ = _transfer(rows)
    assert _verdicts({"transfer": table})["a3_transfer"]["verdict"] == "does not hold"
    toy, _, _ = _transfer({"HN-CLIP": {"Synthetic -> Synthetic": (30, 30)},
                           "Long-CLIP FT": {"Synthetic -> Synthetic": (31, 29)}})
    v = _verdicts({"transfer": toy})["a3_transfer"]
    assert v["verdict"] == "does not hold" and "every configured transfer pair" in v["criterion"]


def test_a3_transfer_needs_every_main_table_baseline_in_the_transfer_table():
    # HN-CLIP leads the two transfer rows there are, but GOAL, a main-table baseline, was never transferred:
    # "leads every column" is not established (on today's code it held)
    pairs = {"DCI -> DOCCI": (85, 83), "DOCCI -> DCI": (70, 71)}
    transfer, _, _ = _transfer({"HN-CLIP": pairs, "Long-CLIP FT": {p: (a - 3, b - 3) for p, (a, b) in pairs.items()}})
    main, _, _ = _build("main", [_cell("HN-CLIP", "DOCCI", 90, 90, gamma=0.5), _cell("Long-CLIP FT", "DOCCI", 80, 80),
                                 _cell("GOAL", "DOCCI", 84, 83.5)])
    v = _verdicts({"transfer": transfer, "main": main})["a3_transfer"]
    assert v["verdict"] == "inconclusive" and "GOAL: no transfer evaluation" in str(v["evidence"])
    # with GOAL's transfer rows, behind HN-CLIP: holds
    transfer, _, _ = _transfer({"HN-CLIP": pairs, "Long-CLIP FT": {p: (a - 3, b - 3) for p, (a, b) in pairs.items()},
                                "GOAL": {p: (a - 2, b - 2) for p, (a, b) in pairs.items()}})
    assert _verdicts({"transfer": transfer, "main": main})["a3_transfer"]["verdict"] == "holds"


def test_a3_dci_to_docci_must_beat_every_in_domain_docci_baseline_per_direction():
    transfer, _, _ = _transfer({"HN-CLIP": {"DCI -> DOCCI": (85.0, 83.14)}})
    main, _, _ = _build("main", [_cell("HN-CLIP", "DOCCI", 90, 90, gamma=0.5), _cell("GOAL", "DOCCI", 84, 83.5)])
    v = _verdicts({"transfer": transfer, "main": main})["a3_dci_to_docci"]
    assert v["verdict"] == "does not hold"  # 83.14 < GOAL's 83.5 in T→I
    assert v["measures"]["DCI → DOCCI R@1"] == {"I→T": 85.0, "T→I": 83.14}
    assert _verdicts({"transfer": transfer})["a3_dci_to_docci"]["verdict"] == "no data"


def _fractions(rows: dict):
    """rows: method -> {fraction: average R@1} on DOCCI (both directions equal)."""
    cells = [_cell(m, "DOCCI", r, r, gamma=0.5 if METHOD_KEYS.get(m) == "hnclip" else 0.0, fraction=f, x=f)
             for m, per in rows.items() for f, r in per.items()]
    return _build("fractions", cells)


def _proxy_gain_widens(rows):
    """Today's proxy: (HN - baseline) at the smallest fraction > at the full data."""
    gains = {f: rows["HN-CLIP"][f] - rows["Long-CLIP FT"][f] for f in rows["HN-CLIP"]}
    return gains[min(gains)] > gains[max(gains)]


def test_fractions_claims_fail_where_hn_loses_everywhere_although_the_old_proxy_said_holds():
    # the embedded default's numbers: HN-CLIP behind Long-CLIP FT at every fraction, -0.98 at 5 %, -2.34 at 100 %
    rows = {"HN-CLIP": {0.05: 40.02, 0.2: 50.0, 0.5: 55.0, 1.0: 57.66},
            "Long-CLIP FT": {0.05: 41.0, 0.2: 51.0, 0.5: 56.5, 1.0: 60.0}}
    assert _proxy_gain_widens(rows)  # the proxy would say "holds"
    table, _, _ = _fractions(rows)
    v = _verdicts({"fractions": table})
    assert v["a3_every_fraction"]["verdict"] == "does not hold"
    assert v["a3_fraction_20"]["verdict"] == "does not hold"  # 50.0 < 60.0 at full data
    assert v["a3_margin_widens"]["verdict"] == "does not hold"  # a deficit that shrinks is no widening lead
    assert v["a3_margin_widens"]["measures"]["margin at the smallest fraction"] == {"DOCCI": -0.98}


def _roles(competitor=None):
    """Specs that declare the roles (the config's competitor, chosen on val) and nothing else."""
    return {"main": {"roles": {"reference": "hnclip", "baseline": "longclip", "frozen": "hnclip_frozen",
                               "competitor": competitor}, "cells": []}}


def test_fractions_claims_hold_for_a_lead_that_widens_as_data_shrinks_and_use_the_val_chosen_competitor():
    rows = {"HN-CLIP": {0.05: 50.3, 0.2: 62.0, 0.5: 66.0, 1.0: 70.0},
            "GOAL": {0.05: 43.0, 0.2: 57.0, 0.5: 62.0, 1.0: 67.0},
            "Long-CLIP FT": {0.05: 40.0, 0.2: 55.0, 0.5: 60.0, 1.0: 66.0}}
    table, _, _ = _fractions(rows)
    # StructXLIP scores 69 on test but the competitor chosen on val is GOAL: "strongest" is never chosen on test
    main, _, _ = _build("main", [_cell("HN-CLIP", "DOCCI", 70, 70, gamma=0.5), _cell("GOAL", "DOCCI", 67, 67),
                                 _cell("StructXLIP", "DOCCI", 69, 69)])
    v = _verdicts({"fractions": table, "main": main}, _roles("goal"))
    assert v["a3_every_fraction"]["verdict"] == "holds"
    # 62.0 at 20 % vs the competitor's 67.0 at 100 %: does not hold
    assert v["a3_fraction_20"]["verdict"] == "does not hold"
    assert v["a3_fraction_20"]["measures"]["strongest full-data baseline"] == {"DOCCI": 67.0}
    assert v["a3_fraction_20_goal"]["verdict"] == "does not hold"  # the second sentence: 62 < GOAL's 67
    # margins over GOAL: 7.3, 5, 4, 3 -> widening
    assert v["a3_margin_widens"]["verdict"] == "holds"
    assert v["a3_margin_widens"]["measures"]["margin at the smallest fraction"] == {"DOCCI": pytest.approx(7.3)}
    rows["HN-CLIP"][0.2] = 68.0  # now 68.0 > 67.0 (GOAL, the competitor), though < StructXLIP's 69 on test
    table, _, _ = _fractions(rows)
    v = _verdicts({"fractions": table, "main": main}, _roles("goal"))
    assert v["a3_fraction_20"]["verdict"] == "holds" and v["a3_fraction_20_goal"]["verdict"] == "holds"
    assert v["a3_fraction_20_goal"]["measures"] == {"benchmarks where the 20 % row exceeds GOAL at 100 %": 1}
    # with StructXLIP chosen on val, the first sentence compares with it, the second still with GOAL
    v = _verdicts({"fractions": table, "main": main}, _roles("structxlip"))
    assert v["a3_fraction_20"]["verdict"] == "does not hold" and v["a3_fraction_20_goal"]["verdict"] == "holds"
    # no competitor chosen on val: plain fine-tuning (Long-CLIP FT at 100 %: the fractions table's 66)
    assert _verdicts({"fractions": table})["a3_fraction_20"]["measures"]["strongest full-data baseline"] == {"DOCCI": 66.0}


def test_fraction_claims_against_a_row_below_the_zero_shot_backbone_read_collapsed():
    """E.3's margin over GOAL and the 20 % sentence, where GOAL ends below the zero-shot backbone (75 here):
    the inequalities hold, but they measure GOAL's collapse, so the verdict says so rather than "holds"."""
    rows = {ZEROSHOT_ROW: {0.05: 75.0, 0.2: 75.0, 0.5: 75.0, 1.0: 75.0},
            "HN-CLIP": {0.05: 78.0, 0.2: 80.0, 0.5: 82.0, 1.0: 83.0},
            "GOAL": {0.05: 40.0, 0.2: 60.0, 0.5: 70.0, 1.0: 72.0}}
    cells = [_cell(m, "DOCCI", r, r, gamma=0.5 if m == "HN-CLIP" else 0.0, fraction=f, x=f)
             for m, per in rows.items() for f, r in per.items() if m != ZEROSHOT_ROW]
    cells.append(_cell(ZEROSHOT_ROW, "DOCCI", 75.0, 75.0))
    table, _, _ = _build("fractions", cells)
    v = _verdicts({"fractions": table}, _roles("goal"))
    assert v["a3_fraction_20_goal"]["verdict"] == "against a collapsed row"  # 80 > 72, but 72 < 75 (zero-shot)
    assert v["a3_fraction_20"]["verdict"] == "against a collapsed row"
    assert v["a3_margin_widens"]["verdict"] == "against a collapsed row"  # 38 at 5 %: the collapse
    assert "GOAL at 0.05 on DOCCI" in v["a3_margin_widens"]["evidence"]["compared with rows at or below the zero-shot backbone"]
    assert v["a3_margin_widens"]["holds"] is None
    # GOAL healthy (above the backbone at every fraction): the same inequalities hold
    rows["GOAL"] = {0.05: 76.0, 0.2: 78.5, 0.5: 81.0, 1.0: 82.5}  # margins 2, 1.5, 1, 0.5
    cells = [_cell(m, "DOCCI", r, r, gamma=0.5 if m == "HN-CLIP" else 0.0, fraction=f, x=f)
             for m, per in rows.items() for f, r in per.items() if m != ZEROSHOT_ROW]
    table, _, _ = _build("fractions", [*cells, _cell(ZEROSHOT_ROW, "DOCCI", 75.0, 75.0)])
    v = _verdicts({"fractions": table}, _roles("goal"))
    assert v["a3_margin_widens"]["verdict"] == "holds" and v["a3_fraction_20_goal"]["verdict"] == "does not hold"


# ------------------------------------------------------------------------------------------------ A4
def _ablation(scores: dict, group="DOCCI"):
    cells = [_cell(label, group, r, r, method=ABLATION_VARIANTS[label][0], gamma=ABLATION_VARIANTS[label][1])
             for label, r in scores.items()]
    return _build("ablation", cells)


def test_a4_hn_alone_gives_more_than_half_of_the_full_gain():
    table, spec, _ = _ablation({"InfoNCE": 50, "HN only": 53, "token only": 49, "HN + token": 55})
    v = _verdicts({"ablation": table}, {"ablation": spec})
    assert v["a4_hn_bulk"]["verdict"] == "holds"  # 3 > 5 / 2
    assert v["a4_hn_bulk"]["measures"]["share of the gain from HN alone"] == {"DOCCI": 0.6}
    assert v["a4_token_after_hn"]["verdict"] == "holds"  # token alone -1, with HN +2
    table, spec, _ = _ablation({"InfoNCE": 50, "HN only": 52, "token only": 51, "HN + token": 55})
    v = _verdicts({"ablation": table}, {"ablation": spec})
    assert v["a4_hn_bulk"]["verdict"] == "does not hold"  # 2 < 5 / 2
    assert v["a4_token_after_hn"]["verdict"] == "does not hold"  # the token branch helps alone (+1)


def test_a4_every_gamma_from_quarter_to_one_must_beat_zero():
    def table(scores):
        cells = [_cell(f"gamma={g:g}", "DOCCI", s, s, method="hnclip", gamma=g, x=g) for g, s in scores.items()]
        return _build("gamma_sweep", cells)

    t, spec, _ = table({0.0: 50, 0.25: 51, 0.5: 53, 1.0: 50.5, 1.5: 40})  # 1.5 is outside the sentence
    v = _verdicts({"gamma_sweep": t}, {"gamma_sweep": spec})["a4_gamma"]
    assert v["verdict"] == "holds" and "DOCCI at 1.5" not in v["measures"]["gain over gamma = 0"]
    t, spec, _ = table({0.0: 50, 0.25: 49.5, 0.5: 53})
    assert _verdicts({"gamma_sweep": t}, {"gamma_sweep": spec})["a4_gamma"]["verdict"] == "does not hold"
    t, spec, _ = table({0.25: 49.5, 0.5: 53})
    assert _verdicts({"gamma_sweep": t}, {"gamma_sweep": spec})["a4_gamma"]["verdict"] == "no data"


def test_a3_transfer_against_rows_below_the_zero_shot_backbone_reads_collapsed():
    # the toy's shift target: every fine-tune below the backbone's 82 / 83; HN-CLIP leads the collapsed rows
    pair = "Synthetic -> Synthetic"
    rows = {"HN-CLIP": {pair: (64.8, 64.1)}, "Long-CLIP FT": {pair: (73.1, 69.5)}, ZEROSHOT_ROW: {pair: (82.2, 83.0)}}
    table, _, _ = _transfer(rows)
    assert _verdicts({"transfer": table})["a3_transfer"]["verdict"] == "does not hold"  # behind Long-CLIP FT
    rows["Long-CLIP FT"] = {pair: (60.0, 60.0)}
    table, _, _ = _transfer(rows)
    v = _verdicts({"transfer": table})["a3_transfer"]
    assert v["verdict"] == "against a collapsed row"
    assert v["evidence"]["compared with rows at or below the zero-shot backbone"] == f"Long-CLIP FT on {pair}"
    rows[ZEROSHOT_ROW] = {pair: (50.0, 50.0)}  # the same rows above a weaker backbone: it holds
    table, _, _ = _transfer(rows)
    assert _verdicts({"transfer": table})["a3_transfer"]["verdict"] == "holds"


def test_b2_is_the_default_minus_the_frozen_variant_on_each_transfer_column():
    """B.2's evidence: 3.80 / 6.80 R@1 separate the default from the frozen variant on the transfer benchmark.
    Another baseline that transfers worse than the frozen variant does not refute it."""
    pair = "Synthetic -> Synthetic"
    table, _, _ = _transfer({"HN-CLIP": {pair: (40, 42)}, "Long-CLIP FT": {pair: (38, 39)},
                             "HN-CLIP (frozen G)": {pair: (35, 36)}, ZEROSHOT_ROW: {pair: (10, 10)}})
    v = _verdicts({"transfer": table})["b2_frozen"]
    assert v["verdict"] == "holds"  # 40 - 35 and 42 - 36; the frozen row is above the backbone's 10
    assert v["measures"]["default minus frozen G"] == {f"{pair} I→T": 5.0, f"{pair} T→I": 6.0}
    # a baseline that collapses on the transfer target (StructXLIP's 17.5 / 24.5) transfers worse than the
    # frozen variant: B.2's sentence still holds, it is about default minus frozen
    table, _, _ = _transfer({"HN-CLIP": {pair: (40, 42)}, "StructXLIP": {pair: (17.5, 24.5)},
                             "HN-CLIP (frozen G)": {pair: (35, 36)}})
    assert _verdicts({"transfer": table})["b2_frozen"]["verdict"] == "holds"
    # the default below the frozen variant in one direction: does not hold
    table, _, _ = _transfer({"HN-CLIP": {pair: (40, 35)}, "HN-CLIP (frozen G)": {pair: (35, 36)}})
    assert _verdicts({"transfer": table})["b2_frozen"]["verdict"] == "does not hold"
    # both below the zero-shot backbone (82 here): the difference is between two collapsed rows
    table, _, _ = _transfer({"HN-CLIP": {pair: (40, 42)}, "HN-CLIP (frozen G)": {pair: (35, 36)},
                             ZEROSHOT_ROW: {pair: (82, 83)}})
    v = _verdicts({"transfer": table})["b2_frozen"]
    assert v["verdict"] == "against a collapsed row" and "HN-CLIP (frozen G)" in \
        v["evidence"]["compared with rows at or below the zero-shot backbone"]
    table, _, _ = _transfer({"HN-CLIP": {pair: (40, 42)}, "Long-CLIP FT": {pair: (34, 39)}})
    assert _verdicts({"transfer": table})["b2_frozen"]["verdict"] == "no data"


# ------------------------------------------------------------------------------------------------ seeds
def _seeds(per_method: dict, six=None):
    """per_method: method -> [(i2t, t2i) per seed] on DOCCI."""
    cells = []
    for m, seeds in per_method.items():
        for s, (a, b) in enumerate(seeds):
            extra = (six or {}).get((m, s))
            cells.append(_cell(m, "DOCCI", a, b, seed=s, metrics=extra))
    return _build("seeds", cells)


def test_seed_replication_averages_the_absolute_r1_change_and_finds_the_largest_six_metric_change():
    six = {("HN-CLIP", 1): {"t2i_r10": 51.44}}  # 50 -> 51.44: larger than any R@1 change
    table, spec, records = _seeds({"HN-CLIP": [(60, 60), (60.2, 59.6)], "Long-CLIP FT": [(50, 50), (50.4, 50.2)]}, six)
    v = _verdicts({"seeds": table}, {"seeds": spec}, records=records)["seeds_average"]
    # |changes| 0.2, 0.4, 0.4, 0.2 -> mean 0.3 <= 0.4
    assert v["verdict"] == "holds" and v["measures"]["mean R@1 change"] == pytest.approx(0.3)
    assert v["measures"]["largest R@1 change"] == pytest.approx(0.4)
    assert v["measures"]["largest HN-CLIP change over six metrics"] == pytest.approx(1.44)
    table, spec, records = _seeds({"HN-CLIP": [(60, 60), (61, 60)]})
    assert _verdicts({"seeds": table}, {"seeds": spec})["seeds_average"]["verdict"] == "does not hold"  # 0.5


def test_seeds_average_compares_pairs_of_seeds_not_the_range_of_three():
    """E.3: "All R@1 results reproduce within ±0.4 on average under a second seed, while the largest R@1
    deviation is 1.28." A change is between two seeds; with three there are three pairs."""
    table, spec, _ = _seeds({"HN-CLIP": [(80.0, 70.0), (80.6, 70.0), (79.8, 70.3)]})
    v = _verdicts({"seeds": table}, {"seeds": spec})["seeds_average"]
    # I→T pairs: |80.6 - 80.0| = 0.6, |79.8 - 80.0| = 0.2, |79.8 - 80.6| = 0.8; T→I: 0.0, 0.3, 0.3
    # mean (0.6 + 0.2 + 0.8 + 0 + 0.3 + 0.3) / 6 = 0.3667 <= 0.4; max - min per direction would give
    # (0.8 + 0.3) / 2 = 0.55 and refute it
    assert v["measures"]["mean R@1 change"] == pytest.approx(0.37)
    assert v["measures"]["largest R@1 change"] == pytest.approx(0.8)
    assert v["verdict"] == "holds"
    assert "seeds 1 and 2" in next(k for k in v["evidence"] if k.startswith("largest R@1 change"))
    # one pair of seeds is one change: 0.5 > 0.4
    table, spec, _ = _seeds({"HN-CLIP": [(60.0, 60.0), (60.5, 59.5)]})
    v = _verdicts({"seeds": table}, {"seeds": spec})["seeds_average"]
    assert v["measures"]["mean R@1 change"] == pytest.approx(0.5) and v["verdict"] == "does not hold"


def test_seed_ranking_must_be_the_same_under_each_seed():
    table, _, _ = _seeds({"HN-CLIP": [(60, 60), (59, 59)], "Long-CLIP FT": [(50, 50), (58, 58)]})
    assert _verdicts({"seeds": table})["seeds_ranking"]["verdict"] == "holds"
    table, _, _ = _seeds({"HN-CLIP": [(60, 60), (57, 57)], "Long-CLIP FT": [(50, 50), (58, 58)]})
    v = _verdicts({"seeds": table})["seeds_ranking"]
    assert v["verdict"] == "does not hold" and v["evidence"]["DOCCI: order under seed 1"] == "Long-CLIP FT > HN-CLIP"


# ------------------------------------------------------------------------------------------------ cost
def _costs(times: dict, probed: dict | None = None) -> list[dict]:
    """Main-table runs' training times (seconds) per method key, seeds 0, 1, ...; ``probed``: (method, seed)
    pairs that ran the gradient probe."""
    return [{"method": m, "seed": s, "train_set": "docci", "gamma": 0.5 if m == "hnclip" else 0.0, "fraction": 1.0,
             "run_dir": f"runs/docci/{m}/s{s}", "train_time_s": t, "probed_steps": 5 if (m, s) in (probed or {}) else 0}
            for m, values in times.items() for s, t in enumerate(values)]


T_975_DF2 = 4.302653  # Student's t, 97.5 % quantile, 2 degrees of freedom (any printed t table)


def test_t_quantile_matches_the_printed_table():
    from hnclip.analysis.claims.cost import t_quantile

    for df, value in ((1, 12.7062), (2, T_975_DF2), (4, 2.7764), (10, 2.2281), (30, 2.0423)):
        assert t_quantile(0.975, df) == pytest.approx(value, abs=2e-4)
    assert t_quantile(0.95, 5) == pytest.approx(2.0150, abs=2e-4)


def test_cost_compares_unprobed_runs_with_an_interval_against_the_papers_speedups():
    """Abstract: "training 2.4x faster than GOAL and 5.4x faster than StructXLIP". HN-CLIP's seed 0 probed
    (left out); seeds 1 and 2 took 100 and 110 s, Long-CLIP FT's two seeds 90 and 99 s: the pooled spread
    of log time is s^2 = (ln 1.1)^2 / 2 over 2 degrees of freedom (each pair differs by ln 1.1)."""
    s = math.log(1.1) / math.sqrt(2)
    geo = math.sqrt(100.0 * 110.0)
    half = T_975_DF2 * s * math.sqrt(1 / 1 + 1 / 2)

    def judged(goal, structxlip):
        costs = _costs({"hnclip": [95.0, 100.0, 110.0], "longclip": [90.0, 99.0], "goal": [goal],
                        "structxlip": [structxlip]}, probed={("hnclip", 0)})
        return _verdicts(costs=costs)["cost_speed"]

    # GOAL 400 s: 400 / 104.88 = 3.81 [2.67, 5.44] >= 2.4; StructXLIP 900 s: 8.58 [6.01, 12.24] >= 5.4
    v = judged(400.0, 900.0)
    assert v["verdict"] == "holds"
    name = "GOAL training time / HN-CLIP's"
    assert v["measures"][name] == pytest.approx(round(400 / geo, 2))
    assert v["measure_intervals"][name] == pytest.approx(
        [round(400 / geo * math.exp(-half), 2), round(400 / geo * math.exp(half), 2)], abs=0.011)
    assert v["interval"]["kind"] == "Student t interval on log time"
    # GOAL 250 s: 2.38 [1.67, 3.40] straddles 2.4: inconclusive
    assert 250 / geo * math.exp(-half) < 2.4 < 250 / geo * math.exp(half)
    assert judged(250.0, 900.0)["verdict"] == "inconclusive"
    # GOAL 120 s: 1.14 [0.80, 1.63], wholly below 2.4: refuted, however fast StructXLIP is
    assert judged(120.0, 900.0)["verdict"] == "does not hold"
    # every method run once: no spread to pool, judged on the ratios' values
    v = _verdicts(costs=_costs({"hnclip": [100.0], "goal": [300.0], "structxlip": [600.0]}))["cost_speed"]
    assert v["verdict"] == "holds" and "no method was run twice" in str(v["evidence"])
    # only probed runs of HN-CLIP: nothing to compare
    v = _verdicts(costs=_costs({"hnclip": [100.0], "goal": [300.0]}, probed={("hnclip", 0)}))["cost_speed"]
    assert v["verdict"] == "no data"


def test_run_costs_reads_each_main_runs_summary_once(tmp_path):
    from hnclip.analysis.claims.files import run_costs

    cells = []
    for method, seed, timing in (("hnclip", 0, {"train_time_s": 80.0, "probed_steps": 12}),
                                 ("hnclip", 1, {"train_time_s": 70.0, "probed_steps": 0}), ("goal", 0, None)):
        run_dir = tmp_path / method / f"s{seed}"
        run_dir.mkdir(parents=True)
        summary = {"wall_time_s": 99.0} | ({"timing": timing} if timing else {})
        (run_dir / "summary.json").write_text(json.dumps(summary))
        run = {"train_set": "docci", "method": method, "gamma": 0.5, "fraction": 1.0, "seed": seed}
        cells += [{"run": run, "run_dir": str(run_dir), "group": g} for g in ("DOCCI", "DCI")]
    cells.append({"run": {}, "zeroshot": True, "group": "DOCCI"})
    costs = run_costs([{"cells": cells}, {"cells": cells[2:4]}, None])  # a run in two specs counts once
    assert [(c["method"], c["seed"], c["train_time_s"], c["probed_steps"]) for c in costs] == [
        ("hnclip", 0, 80.0, 12), ("hnclip", 1, 70.0, 0), ("goal", 0, 99.0, 0)]  # an older summary: wall time


# ------------------------------------------------------------------------------------------------ intervals
def _ranked(cell_record, i2t_hits, t2i_hits):
    """The record with per-query outcomes: rank 0 for a hit, 7 for a miss (one caption per image); its
    R@1 set from the hits by hand, so the table's point value is the one the outcomes give."""
    cell, record = cell_record
    i2t = [0 if h else 7 for h in i2t_hits]
    t2i = [0 if h else 7 for h in t2i_hits]
    record = dict(record, ranks={"i2t": i2t, "t2i": t2i, "text_image": list(range(len(t2i)))})
    record["metrics"] = dict(record["metrics"], i2t_r1=100.0 * sum(map(bool, i2t_hits)) / len(i2t),
                             t2i_r1=100.0 * sum(map(bool, t2i_hits)) / len(t2i))
    return cell, record


def _hits(n, rate, seed):
    rng = np.random.default_rng(seed)
    hits = np.zeros(n, dtype=bool)
    hits[rng.permutation(n)[: round(rate * n)]] = True
    return hits


def test_a1_verdict_comes_from_the_paired_interval():
    # the same 2,000 queries: HN-CLIP gets every query Long-CLIP FT gets plus 6 % more (a decided lead);
    # on 40 queries a lead of one query (2.5 points) is not decided
    def verdict(n, extra):
        base = _hits(n, 0.6, 1)
        better = base.copy()
        better[np.flatnonzero(~base)[:extra]] = True
        main, _, _ = _build("main", [_ranked(_cell("HN-CLIP", "DOCCI", 0, 0, gamma=0.5, metrics=dict.fromkeys(METRICS, 99.0)),
                                             better, better),
                                     _ranked(_cell("Long-CLIP FT", "DOCCI", 0, 0), base, base)])
        return _verdicts({"main": main})["a1_columns"]

    v = verdict(2000, 120)
    assert v["verdict"] == "holds" and v["interval"]["ci_low"] > 0
    assert v["interval"]["margin"] == pytest.approx(6.0)
    v = verdict(40, 1)
    assert v["verdict"] == "inconclusive" and v["interval"]["ci_low"] <= 0 < v["interval"]["ci_high"]
    assert v["interval"]["resolution"] > 2.5  # the split cannot resolve one query in 40
    worse = verdict(2000, 0)  # identical outcomes: the R@1 lead is 0, an interval at 0 refutes "strictly best"
    assert worse["verdict"] == "does not hold"


def test_old_records_without_outcomes_are_judged_on_their_values_and_say_so():
    main, _, _ = _build("main", [_cell("HN-CLIP", "DOCCI", 39, 35, gamma=0.5), _cell("Long-CLIP FT", "DOCCI", 38, 30)])
    v = _verdicts({"main": main})["a1_columns"]
    assert v["verdict"] == "holds" and v["interval"]["ci_low"] is None
    assert any("no per-query outcomes" in k for k in v["evidence"])


# ------------------------------------------------------------------------------------------------ premise
PREMISE = {"saturated_share_epoch1": 0.85, "exact_zero.loss.fp32": 0.2, "exact_zero.loss.bf16": 0.6,
           "exact_zero.positive_logit_grad.fp32": 0.3, "exact_zero.positive_logit_grad.bf16": 0.7,
           "exact_zero.feature_grad.fp32": 0.4, "exact_zero.feature_grad.bf16": 0.8,
           "exact_zero.param_grad.fp32": 0.5, "exact_zero.param_grad.bf16": 0.9, "hn_active_share_min_epoch": 0.3,
           "objective_active_min_epoch": 0.3,
           "ratio_median_per_epoch_min": 250.0, "ratio_median_per_epoch_max": 4.0e5, "grad_cosine_median": 0.58,
           "grad_cosine_positive_share": 0.99, "error_i2t_first": 22.9, "error_i2t_last": 17.1,
           "error_t2i_first": 20.5, "error_t2i_last": 15.1, "infonce_flat_epoch": 2}
PREMISE_IDS = ("premise_saturation", "premise_exact_zero", "premise_active", "premise_ratio", "premise_cosine",
               "premise_error")


def _flat(flat_epoch, status=None, epochs=3, train_set="docci"):
    """The premise's InfoNCE flattening on ``train_set`` (hnclip.analysis.premise.infonce_flattening's
    shape): flat after ``flat_epoch`` (None: nowhere), each epoch's status as given."""
    status = status or ["falling" if e < (flat_epoch or epochs) else "flat" for e in range(1, epochs)]
    falls = {"flat": (1.1, 0.9, 1.4), "falling": (5.0, 3.0, 8.0), "undecided": (2.0, 1.2, 3.5)}
    rows = [falls[st] for st in status]
    return {"infonce_flat": {train_set: {
        "epochs": list(range(1, epochs + 1)), "mean": [0.5 / 3 ** e for e in range(epochs)],
        "fall": [r[0] for r in rows], "fall_low": [r[1] for r in rows], "fall_high": [r[2] for r in rows],
        "status": status, "flat_epoch": flat_epoch, "factor": 2.0, "confidence": 0.95, "resamples": 2000}}}


def _error_curve(tmp_path, r1_per_epoch, n=1000, group="DOCCI"):
    """Main table, epochs table (with per-query outcomes) and main spec of HN-CLIP and Long-CLIP FT on one
    benchmark; ``r1_per_epoch``: HN-CLIP's (I->T, T->I) R@1 as fractions after each epoch, on nested query
    sets (a query right after epoch e stays right later), so a rise is a paired gain."""
    cells, records = [], []
    for row in ("HN-CLIP", "Long-CLIP FT"):
        cell, record = _cell(row, group, 50, 50, gamma=0.5 if row == "HN-CLIP" else 0.0)
        cells.append(cell)
        records.append(record)
    run_dir = tmp_path / "hnclip"
    run_dir.mkdir(parents=True, exist_ok=True)
    lines, ranks = ["epoch,step," + ",".join(METRICS)], ["epoch,i2t,t2i,text_image"]
    for e, (a, b) in enumerate(r1_per_epoch, start=1):
        i2t = [0 if q < round(a * n) else 7 for q in range(n)]
        t2i = [0 if q < round(b * n) else 7 for q in range(n)]
        lines.append(f"{e},{10 * e},{100 * a},50,50,{100 * b},50,50")
        ranks.append(f"{e},{' '.join(map(str, i2t))},{' '.join(map(str, t2i))},{' '.join(map(str, range(n)))}")
    (run_dir / "epochs.csv").write_text("\n".join(lines) + "\n")
    (run_dir / "epoch_ranks.csv").write_text("\n".join(ranks) + "\n")
    spec = {"experiment": "main", "scale": "toy", "cells": cells}
    main = build_table(spec, records)
    epochs = build_epochs_table({"experiment": "main", "scale": "toy", "cells": [{**cells[0], "run_dir": str(run_dir)}]})
    return main, epochs, spec


def test_premise_error_compares_the_error_after_infonce_flattens_with_the_last_epochs(tmp_path):
    main, epochs, spec = _error_curve(tmp_path, [(0.70, 0.72), (0.80, 0.82), (0.85, 0.86)])
    tables, specs = {"main": main, "epochs": epochs}, {"main": spec}
    # flat after epoch 1: error after epoch 1 (30, 28) vs after epoch 3 (15, 14), on 1,000 paired queries
    v = _verdicts(tables, specs=specs, premise=PREMISE | _flat(1))["premise_error"]
    assert v["verdict"] == "holds"
    assert v["measures"]["retrieval error after InfoNCE flattens"] == {"I→T": 30.0, "T→I": 28.0}
    assert v["measures"]["retrieval error after the last epoch"] == {"I→T": 15.0, "T→I": 14.0}
    # flat only after epoch 2: the error still falls from (20, 18) to (15, 14)
    assert _verdicts(tables, specs=specs, premise=PREMISE | _flat(2))["premise_error"]["verdict"] == "holds"
    # a plain loss that keeps falling by more than 2x after every epoch never flattens: refuted, although
    # the error falls from the first epoch to the last
    v = _verdicts(tables, specs=specs, premise=PREMISE | _flat(None, ["falling", "falling"]))["premise_error"]
    assert v["verdict"] == "does not hold" and "never before the last epoch" in v["evidence"]["InfoNCE flattens"]
    # where it flattens cannot be told: inconclusive
    v = _verdicts(tables, specs=specs, premise=PREMISE | _flat(None, ["falling", "undecided"]))["premise_error"]
    assert v["verdict"] == "inconclusive"
    # flat after epoch 2, but the error after epoch 3 is no lower than after epoch 2: not "continues falling"
    main, epochs, spec = _error_curve(tmp_path / "b", [(0.70, 0.72), (0.85, 0.86), (0.85, 0.86)])
    v = _verdicts({"main": main, "epochs": epochs}, specs={"main": spec}, premise=PREMISE | _flat(2))
    assert v["premise_error"]["verdict"] == "does not hold"


def _active(plain_saturated, hn_only, plain_only, n=400, objective=200, hn_standard=60):
    """One epoch's active micro-batches: the HN-only runs' boosted objective ``objective`` of n and their
    standard InfoNCE ``hn_standard`` of n, plain n - plain_saturated of n, and the discordant pairs on the
    same micro-batches."""
    return {"epoch": 1, "objective": [objective, n], "hn": [hn_standard, n], "plain": [n - plain_saturated, n],
            "hn_only": hn_only, "plain_only": plain_only, "paired": n}


def test_premise_active_tests_the_boosted_objectives_share_in_every_epoch_and_nothing_else():
    """§2.4: "26% of batches remain active in every epoch", of the objective that "keeps loss and gradients
    active" (§2.2): each epoch's share of the HN-only runs' micro-batches whose boosted objective is >= 1e-3,
    above 0.26 by its Wilson interval. The standard InfoNCE's share and the plain runs' are shown and decide
    nothing."""
    z = 1.959963984540054

    def wilson(k, n):  # the textbook score interval, float64
        p = k / n
        centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return centre - half, centre + half

    # 200 of 400 = 0.5, interval [0.451, 0.549] above 0.26: holds, though the standard InfoNCE keeps only
    # 60 of 400 (0.15) active, and whichever run alone keeps the discordant micro-batches active
    for hn_only, plain_only in ((110, 10), (10, 110)):
        v = _verdicts(premise=PREMISE | {"active_per_epoch": [_active(300, hn_only, plain_only)]})["premise_active"]
        assert v["verdict"] == "holds"
        assert v["evidence"]["not deciding: epoch 1: micro-batches active only under HN / only plain (of 400 "
                              "paired)"] == f"{hn_only} / {plain_only}"
        assert v["evidence"]["not deciding: epoch 1: HN-only runs, standard InfoNCE active share (60 of 400)"] == 0.15
        assert len(v["conditions"]) == 1 and v["interval"]["kind"] == "Wilson interval"
        assert v["measure_intervals"]["active share, smallest epoch"] == pytest.approx(list(wilson(200, 400)))
    # 90 of 400 = 0.225: [0.187, 0.269] straddles 0.26
    low, high = wilson(90, 400)
    assert low < 0.26 < high
    v = _verdicts(premise=PREMISE | {"active_per_epoch": [_active(300, 60, 5, objective=90)]})["premise_active"]
    assert v["verdict"] == "inconclusive"
    assert v["conditions"][0]["ci_low"] == pytest.approx(round(low - 0.26, 2))
    # 60 of 400 = 0.15: [0.119, 0.188] below 0.26 in one epoch of two refutes "in every epoch", even with the
    # standard InfoNCE's share high
    assert wilson(60, 400)[1] < 0.26
    two = [_active(300, 110, 10), {**_active(300, 5, 5, objective=60, hn_standard=400), "epoch": 2}]
    v = _verdicts(premise=PREMISE | {"active_per_epoch": two})["premise_active"]
    assert v["verdict"] == "does not hold" and v["measures"]["active share per epoch"] == {"1": 0.5, "2": 0.15}


def test_premise_shares_are_decided_by_their_wilson_interval():
    # 35 positive cosines of 36: 0.972, Wilson 95 % [0.858, 0.995] straddles 0.98
    counts = {"grad_cosine_positive_share": [35, 36]}
    v = _verdicts(premise=PREMISE | {"grad_cosine_positive_share": 35 / 36, "counts": counts})["premise_cosine"]
    assert v["verdict"] == "inconclusive"
    assert v["conditions"][0]["ci_low"] == pytest.approx(0.858 - 0.98, abs=0.01)
    # 990 of 1,000 saturated: above 0.98 with its interval; 801 of 1,000: 0.801 cannot tell 0.80
    v = _verdicts(premise=PREMISE | {"counts": {"saturated_share_epoch1": [990, 1000]}})["premise_saturation"]
    assert v["verdict"] == "holds"
    v = _verdicts(premise=PREMISE | {"saturated_share_epoch1": 0.801,
                                     "counts": {"saturated_share_epoch1": [801, 1000]}})["premise_saturation"]
    assert v["verdict"] == "inconclusive"
    v = _verdicts(premise=PREMISE | {"exact_zero.param_grad.fp32": 0.3,
                                     "counts": {"exact_zero.param_grad.fp32": [300, 1000]}})["premise_exact_zero"]
    assert v["verdict"] == "does not hold"
    # the per-epoch median ratios with their intervals: one median's interval reaching below 10^2 leaves it open
    medians = [{"run": "results/runs/synthetic/longclip_hn/g0.5/f1/s0", "epoch": 1, "median": 300.0, "low": 150.0,
                "high": 900.0, "n": 12},
               {"run": "results/runs/synthetic/longclip_hn/g0.5/f1/s0", "epoch": 2, "median": 150.0, "low": 60.0,
                "high": 400.0, "n": 12}]
    v = _verdicts(premise=PREMISE | {"ratio_medians": medians})["premise_ratio"]
    assert v["verdict"] == "inconclusive"
    assert _verdicts(premise=PREMISE | {"ratio_medians": medians[:1]})["premise_ratio"]["verdict"] == "holds"


def test_premise_claims_hold_on_measurements_like_the_papers(tmp_path):
    # the boosted objective's share sits beside the keys (premise_report writes it; older files lack it)
    assert set(PREMISE) - {"objective_active_min_epoch"} == set(PREMISE_KEYS)
    main, epochs, spec = _error_curve(tmp_path, [(0.70, 0.72), (0.80, 0.82), (0.85, 0.86)])
    v = _verdicts({"main": main, "epochs": epochs}, specs={"main": spec}, premise=PREMISE | _flat(1))
    assert {k: v[k]["verdict"] for k in PREMISE_IDS} == dict.fromkeys(PREMISE_IDS, "holds")
    assert v["premise_exact_zero"]["measures"] == {"exact-zero share, parameter gradient, fp32": 0.5}
    assert v["premise_saturation"]["noise"] is None  # one run's measurement: no seed floor


@pytest.mark.parametrize("key, value, claim", [
    ("saturated_share_epoch1", 0.79, "premise_saturation"),
    ("exact_zero.param_grad.fp32", 0.46, "premise_exact_zero"),
    ("objective_active_min_epoch", 0.25, "premise_active"),
    ("ratio_median_per_epoch_min", 99.0, "premise_ratio"),
    ("ratio_median_per_epoch_max", 1.1e6, "premise_ratio"),
    ("grad_cosine_positive_share", 0.97, "premise_cosine"),
    ("grad_cosine_median", -0.1, "premise_cosine"),
])
def test_each_premise_criterion_fails_just_past_the_papers_number(key, value, claim):
    # a premise file without counts (made before they were written): each figure judged on its value
    v = _verdicts(premise=PREMISE | {key: value})
    assert v[claim]["verdict"] == "does not hold"
    assert all(v[k]["verdict"] == "holds" for k in PREMISE_IDS if k not in (claim, "premise_error"))


def test_premise_measurements_are_checked_naming_the_key():
    with pytest.raises(ValueError, match=r"lack key\(s\) \['grad_cosine_median'\]"):
        check_premise({k: v for k, v in PREMISE.items() if k != "grad_cosine_median"})
    with pytest.raises(ValueError, match="'saturated_share_epoch1' = 80.0 is a share"):
        check_premise(PREMISE | {"saturated_share_epoch1": 80.0})
    with pytest.raises(ValueError, match="'error_i2t_first' = 0.229 is a retrieval error|expected percent"):
        check_premise(PREMISE | {"error_i2t_first": 229.0})


def test_every_claim_says_no_data_without_runs_and_quotes_the_paper():
    verdicts = evaluate_claims({}, "paper")
    assert [v["id"] for v in verdicts] == list(CLAIMS)
    assert all(v["verdict"] == "no data" and v["holds"] is None and v["scale"] == "paper" for v in verdicts)
    assert all(v["quote"] and v["section"] and v["criterion"] and v["missing"] for v in verdicts)
    assert set(VERDICTS) == {"holds", "does not hold", "inconclusive", "no data", "against a collapsed row"}


def test_measured_gradient_ratio_is_exp_s_gamma_delta_g():
    # B.2: exp(100 * 0.5 * 0.1) = e^5 ~ 148.4
    assert measure_gradient_ratio(100.0, 0.5, 0.1) == pytest.approx(math.exp(5.0), rel=1e-9)
    assert measure_gradient_ratio(100.0, 0.0, 0.1) == pytest.approx(1.0, rel=1e-12)
    assert measure_gradient_ratio(50.0, 1.0, 0.2) == pytest.approx(math.exp(10.0), rel=1e-9)


# ------------------------------------------------------------------------------------ published numbers
def _paper_grid(tmp_path, hn="HN-CLIP"):
    """Hand-made tables of every experiment at the paper's labels (HN-CLIP's row labelled ``hn``), so every
    claim has data."""
    benches = ("DOCCI", "DCI", "Long-DCI", "Urban-1K")
    methods = ("Long-CLIP FT", "FineLIP", "GOAL", "StructXLIP", "LoRA", "DoRA")
    finals = {hn: (80, 80), **{m: (60 + i, 60 + i) for i, m in enumerate(methods)}}
    per_epoch = {hn: [(70, 70), (75, 75)], "FineLIP": [(50, 50), (40, 55)]}
    epochs = pd.concat([_epochs_table(tmp_path / b, finals, per_epoch, group=b)[1] for b in ("DOCCI", "DCI")])
    main, main_spec, _ = _build("main", [_cell(r, b, a + 0.1 * j, t, gamma=0.5 if r == hn else 0.0)
                                         for j, b in enumerate(benches) for r, (a, t) in finals.items()])
    plugin, plugin_spec, _ = _plugin({(m, b): (1.0, 2.0) for m in methods for b in benches})
    pairs = {"DCI -> DOCCI": (85, 83), "DOCCI -> DCI": (70, 71), "DOCCI -> Long-DCI": (60, 61)}
    transfer, _, _ = _transfer({hn: pairs, **{m: {p: (a - 2 - i, b - 2) for p, (a, b) in pairs.items()}
                                             for i, m in enumerate(methods)},
                                "HN-CLIP (frozen G)": {p: (a - 5, b - 7) for p, (a, b) in pairs.items()}})
    fractions, _, _ = _fractions({hn: {0.05: 50, 0.2: 70, 0.5: 75, 1.0: 80},
                                  "GOAL": {0.05: 40, 0.2: 62, 0.5: 70, 1.0: 76}})
    ablation, ablation_spec, _ = _ablation({"InfoNCE": 50, "HN only": 53, "token only": 49, "HN + token": 55})
    gamma = _build("gamma_sweep", [_cell(f"gamma={g:g}", "DOCCI", 50 + g, 50 + g, method="hnclip", gamma=g, x=g)
                                   for g in (0.0, 0.25, 0.5, 1.0)])
    seeds, seeds_spec, records = _seeds({hn: [(60, 60), (60.2, 59.6)], "Long-CLIP FT": [(50, 50), (50.4, 50)]})
    tables = {"main": main, "epochs": epochs, "plugin": plugin, "transfer": transfer, "fractions": fractions,
              "ablation": ablation, "gamma_sweep": gamma[0], "seeds": seeds}
    specs = {"main": main_spec, "plugin": plugin_spec, "ablation": ablation_spec, "gamma_sweep": gamma[1],
             "seeds": seeds_spec}
    dynamics = {"docci/hnclip": pd.DataFrame({"grad_ratio": [10.0, 1e6, math.inf]})}
    return evaluate_claims(tables, "paper", specs=specs, records=records, premise=PREMISE | _flat(1), dynamics=dynamics,
                           caption_words={"DOCCI": 120.0, "DCI": 130.0, "Long-DCI": 110.0},
                           costs=_costs({"hnclip": [100.0, 110.0], "goal": [400.0], "structxlip": [900.0]}))


def test_every_claim_measure_the_published_numbers_name_exists(tmp_path):
    verdicts = {v["id"]: v for v in _paper_grid(tmp_path)}
    assert all(v["verdict"] != "no data" for v in verdicts.values()), \
        [k for k, v in verdicts.items() if v["verdict"] == "no data"]
    assert verdicts["premise_ratio"]["measures"]["peak gradient ratio per run"] == {"docci/hnclip": 1e6}
    for entry in load_published("report/published_numbers.yaml"):
        compare = entry.get("compare") or {}
        if compare.get("kind") != "claim" or compare["measure"] == "verdict":
            continue
        measures = verdicts[compare["claim"]]["measures"]
        assert compare["measure"] in measures, (entry["key"], sorted(measures))
        if "label" in compare:
            assert compare["label"] in measures[compare["measure"]], (entry["key"], measures[compare["measure"]])


def test_a_premise_figure_no_run_measured_makes_its_claim_no_data_naming_the_role():
    # a config without HN-only runs: the HN figures are None, the plain ones still judged
    hn_keys = ("hn_active_share_min_epoch", "objective_active_min_epoch", "ratio_median_per_epoch_min", "ratio_median_per_epoch_max",
               "grad_cosine_median", "grad_cosine_positive_share")
    v = _verdicts(premise=PREMISE | dict.fromkeys(hn_keys))
    for claim in ("premise_active", "premise_ratio", "premise_cosine"):
        assert v[claim]["verdict"] == "no data" and "HN-only fine-tuning" in v[claim]["missing"]
    assert v["premise_saturation"]["verdict"] == "holds"
    # no plain run: saturation and exact zeros unmeasured; the HN-CLIP errors alone cannot say InfoNCE flattened
    v = _verdicts(premise=PREMISE | {"saturated_share_epoch1": None, "exact_zero.param_grad.fp32": None})
    assert v["premise_saturation"]["verdict"] == v["premise_exact_zero"]["verdict"] == "no data"
    assert "plain InfoNCE" in v["premise_saturation"]["missing"]


def test_a_renamed_method_label_keeps_every_claims_data(tmp_path, monkeypatch):
    # methods.hnclip.label: "Ours" in the config: the same runs (method key hnclip) under another row label
    before = {v["id"]: v for v in _paper_grid(tmp_path / "before")}
    monkeypatch.setitem(METHOD_KEYS, "Ours", "hnclip")
    after = {v["id"]: v for v in _paper_grid(tmp_path / "after", hn="Ours")}
    assert list(after) == list(before)
    assert all(v["verdict"] != "no data" for v in after.values()), \
        [k for k, v in after.items() if v["verdict"] == "no data"]
    for claim, v in before.items():
        assert (after[claim]["verdict"], after[claim]["holds"]) == (v["verdict"], v["holds"]), claim
        assert after[claim]["measures"] == v["measures"], claim
        assert after[claim]["interval"] == v["interval"], claim
    # the frozen-G row stays a variant, not a competitor, although its label no longer starts with "Ours ("
    assert "HN-CLIP (frozen G)" not in str(after["a3_transfer"]["evidence"])
    assert "Ours" in after["a1_columns"]["criterion"]  # the label is what is shown


def test_claims_are_registered_functions_in_the_sections_order():
    from hnclip.analysis import claims
    from hnclip.analysis.claims.base import REGISTRY, claim, order_registry

    modules = [c.judge.__module__.rsplit(".", 1)[-1] for c in REGISTRY.values()]
    assert sorted(modules, key=claims.SECTIONS.index) == modules  # main first, premise last
    assert list(REGISTRY) == list(CLAIMS) and all(c.quote and c.section and c.title for c in REGISTRY.values())
    with pytest.raises(ValueError, match="claim 'a1_columns' is registered twice"):
        claim("a1_columns", "§3.2 A1", "again", "again")(lambda ctx: {})
    saved = dict(REGISTRY)
    try:  # a claim defined outside the known sections is an error naming its module
        claim("stray", "nowhere", "a sentence", "a stray claim")(lambda ctx: {})
        with pytest.raises(ValueError, match="registered outside the known sections"):
            order_registry([f"hnclip.analysis.claims.{s}" for s in claims.SECTIONS])
    finally:
        REGISTRY.clear()
        REGISTRY.update(saved)


def test_a_claims_id_is_written_once_in_its_registration():
    """The body reads its id from the context (``ctx.verdict``, ``ctx.no_data``): a renamed claim is one edit."""
    import inspect
    import sys

    from hnclip.analysis.claims.base import REGISTRY

    for claim_id, entry in REGISTRY.items():
        source = inspect.getsource(sys.modules[entry.judge.__module__])
        assert source.count(f'"{claim_id}"') == 1, claim_id  # the @claim(...) line
    verdicts = {v["id"]: v for v in evaluate_claims({}, "toy")}
    assert list(verdicts) == list(REGISTRY) and all(v["verdict"] == "no data" for v in verdicts.values())

# ------------------------------------------------------------------------------------ resampling seed
def _near_edge_main(n=2000, wins=220, losses=180):
    """HN-CLIP and Long-CLIP FT on the same n queries: HN-CLIP alone right on ``wins``, the baseline alone
    on ``losses``, both on the first 600 of the rest; every R@K is R@1 (rank 0 or 7)."""
    base = np.zeros(n, dtype=bool)
    hn = np.zeros(n, dtype=bool)
    hn[:wins] = True
    base[wins:wins + losses] = True
    both = slice(wins + losses, wins + losses + 600)
    hn[both] = base[both] = True
    main, _, _ = _build("main", [_ranked(_cell("HN-CLIP", "DOCCI", 0, 0, gamma=0.5), hn, hn),
                                 _ranked(_cell("Long-CLIP FT", "DOCCI", 0, 0), base, base)])
    return main


def _reference_lower_bound(n, wins, losses, confidence=0.95, draws=1_000_000):
    """The 2.5 % quantile of the paired bootstrap of (HN-CLIP - baseline) R@1 with a million replicates,
    drawn independently of hnclip: each resample's per-query differences (+1, -1, 0) are a multinomial draw
    of n from (wins, losses, rest) / n."""
    rng = np.random.default_rng(12345)
    counts = rng.multinomial(n, [wins / n, losses / n, 1 - (wins + losses) / n], size=draws)
    margins = 100.0 * (counts[:, 0] - counts[:, 1]) / n
    return float(np.quantile(margins, (1 - confidence) / 2))


def test_a_verdict_does_not_depend_on_the_resampling_seed():
    # The lead is 40 queries of 2,000 (2 points) and its 95 % lower bound ~0.04 points above 0: at 2,000
    # resamples the bound's Monte Carlo error (~0.06 points) puts it on either side of 0 with the seed.
    from dataclasses import replace

    reference = _reference_lower_bound(2000, 220, 180)
    assert 0 < reference < 0.2
    main = _near_edge_main()
    settings = main.attrs["statistics"]
    verdicts = []
    for seed in range(10):
        verdicts.append(_verdicts({"main": main}, settings=replace(settings, seed=seed))["a1_columns"])
    # the criterion's truth at infinite resamples: "holds" (the reference lower bound is above 0). Every
    # seed either says so or reports the condition on the edge; none says "inconclusive" without saying why
    for v in verdicts:
        r1 = [c for c in v["conditions"] if not c["ties_pass"]]
        assert all(c["edge"] or c["status"] == "met" for c in r1), (v["verdict"], r1)
        assert v["verdict"] == "holds" or (v["verdict"] == "inconclusive" and v["edge"] > 0)
    # and a bound far from 0 is decided alike under every seed, at the configured resamples
    decided = _near_edge_main(wins=300, losses=100)
    assert {_verdicts({"main": decided}, settings=replace(settings, seed=s))["a1_columns"]["verdict"]
            for s in range(5)} == {"holds"}
    v = _verdicts({"main": decided})["a1_columns"]
    assert v["edge"] == 0 and all(not c["edge"] for c in v["conditions"])


def test_per_epoch_claims_are_judged_on_every_benchmark_a_run_logs(tmp_path, monkeypatch):
    # one DOCCI-trained HN-CLIP run scores DOCCI and Long-DCI after each epoch (its epochs.csv names each
    # row's benchmark): the first-epoch claim is judged on both, not on DOCCI alone with Long-DCI untested
    monkeypatch.chdir(tmp_path)
    finals = {"HN-CLIP": (80, 80), "Long-CLIP FT": (50, 50), "GOAL": (70, 70)}
    cells, records = [], []
    for group in ("DOCCI", "Long-DCI"):
        for row, (a, b) in finals.items():
            cell, record = _cell(row, group, a, b, gamma=0.5 if row == "HN-CLIP" else 0.0)
            cells.append(cell)
            records.append(record)
    main = build_table({"experiment": "main", "scale": "paper", "cells": cells}, records)
    run_dir = tmp_path / "results/runs/docci/hnclip/g0.5/f1/s0"
    run_dir.mkdir(parents=True)
    # epoch 1: DOCCI 66/64 (average 65: above 50, below 70 -> 1 of 2), Long-DCI 72/72 (above both)
    lines = ["epoch,step," + ",".join(METRICS) + ",benchmark", "1,10,66,50,50,64,50,50,docci",
             "1,10,72,50,50,72,50,50,long_dci"]
    (run_dir / "epochs.csv").write_text("\n".join(lines) + "\n")
    hn_cells = [{**c, "run_dir": str(run_dir), "epochs_benchmark": c["eval_benchmark"]}
                for c in cells if c["row"] == "HN-CLIP"]
    epochs = build_epochs_table({"experiment": "main", "scale": "paper", "cells": hn_cells})
    v = _verdicts({"main": main, "epochs": epochs})["a1_first_epoch"]
    assert v["measures"]["first-epoch average R@1"] == {"DOCCI": 65.0, "Long-DCI": 72.0}
    assert v["measures"]["baselines matched by the first epoch"] == {"DOCCI": 1, "Long-DCI": 2}
    assert v["coverage"] is None and v["verdict"] == "does not hold"  # DOCCI: one of two is not more than half
