"""Claim verdicts from hand-made tables and dynamics logs, and §2.4's gradient ratio measured on the loss."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hnclip.analysis.claims import evaluate_claims
from hnclip.analysis.margins import measure_gradient_ratio
from hnclip.analysis.tables import build_table

METRICS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")


def _table(experiment, entries):
    """entries: (row, group, variant, x, method, gamma, fraction, i2t_r1, t2i_r1)."""
    cells, records = [], []
    for row, group, variant, x, method, gamma, fraction, i2t, t2i in entries:
        run = {"train_set": "docci", "method": method, "gamma": gamma, "fraction": fraction, "seed": 0}
        metrics = dict.fromkeys(METRICS, 50.0) | {"i2t_r1": i2t, "t2i_r1": t2i}
        records.append({"run": run, "eval_benchmark": group.lower(), "metrics": metrics})
        cells.append({"row": row, "group": group, "variant": variant, "x": x, "run": run,
                      "eval_benchmark": group.lower()})
    return build_table({"experiment": experiment, "scale": "toy", "cells": cells}, records)


def _verdicts(tables, dynamics=None, **kw):
    return {c["id"]: c for c in evaluate_claims(tables, "toy", dynamics=dynamics, **kw)}


def test_main_claim_needs_a_win_on_every_benchmark_in_mean_r1():
    # DOCCI: HN (40+30)/2 = 35 vs base (36+32)/2 = 34 -> win; DCI: 20 vs 21 -> loss
    main = _table("main", [("HN-CLIP", "DOCCI", None, None, "hn", 0.5, 1.0, 40, 30),
                           ("Long-CLIP FT", "DOCCI", None, None, "lc", 0.0, 1.0, 36, 32),
                           ("HN-CLIP", "DCI", None, None, "hn", 0.5, 1.0, 20, 20),
                           ("Long-CLIP FT", "DCI", None, None, "lc", 0.0, 1.0, 22, 20)])
    v = _verdicts({"main": main})["main"]
    assert v["holds"] is False and v["scale"] == "toy"
    assert v["evidence"]["DOCCI: difference"] == pytest.approx(1.0)
    assert v["evidence"]["DCI: difference"] == pytest.approx(-1.0)
    docci_only = _table("main", [("HN-CLIP", "DOCCI", None, None, "hn", 0.5, 1.0, 40, 30),
                                 ("Long-CLIP FT", "DOCCI", None, None, "lc", 0.0, 1.0, 36, 32)])
    assert _verdicts({"main": docci_only})["main"]["holds"] is True
    no_baseline = _table("main", [("HN-CLIP", "DOCCI", None, None, "hn", 0.5, 1.0, 40, 30)])
    assert _verdicts({"main": no_baseline})["main"]["holds"] is None


def test_plugin_claim_fails_when_one_framework_loses():
    plugin = _table("plugin", [("LoRA", "DOCCI", "plain", None, "lora", 0.0, 1.0, 10, 10),
                               ("LoRA", "DOCCI", "+HN", None, "lora_hn", 0.5, 1.0, 12, 11),
                               ("DoRA", "DOCCI", "plain", None, "dora", 0.0, 1.0, 10, 10),
                               ("DoRA", "DOCCI", "+HN", None, "dora_hn", 0.5, 1.0, 9, 10)])
    v = _verdicts({"plugin": plugin})["plugin"]
    assert v["evidence"]["LoRA on DOCCI: Δ R@1"] == pytest.approx(1.5)
    assert v["evidence"]["DoRA on DOCCI: Δ R@1"] == pytest.approx(-0.5)
    assert v["holds"] is False


def test_fractions_claim_compares_gain_at_smallest_and_full_data():
    def table(gain_small, gain_full):
        return _table("fractions", [("HN-CLIP", "DOCCI", None, 0.05, "hn", 0.5, 0.05, 10 + gain_small, 10 + gain_small),
                                    ("Long-CLIP FT", "DOCCI", None, 0.05, "lc", 0.0, 0.05, 10, 10),
                                    ("HN-CLIP", "DOCCI", None, 1.0, "hn", 0.5, 1.0, 30 + gain_full, 30 + gain_full),
                                    ("Long-CLIP FT", "DOCCI", None, 1.0, "lc", 0.0, 1.0, 30, 30)])
    v = _verdicts({"fractions": table(5, 1)})["fractions"]
    assert v["holds"] is True and v["evidence"]["gain at fraction 0.05"] == pytest.approx(5.0)
    assert _verdicts({"fractions": table(1, 5)})["fractions"]["holds"] is False


def test_gamma_claim_is_near_best_within_tolerance():
    def table(scores):
        return _table("gamma_sweep", [(f"gamma={g:g}", "DOCCI", None, g, "hn", g, 1.0, s, s) for g, s in scores])
    assert _verdicts({"gamma_sweep": table([(0.0, 20), (0.5, 24.5), (1.0, 25)])})["gamma_sweep"]["holds"] is True
    v = _verdicts({"gamma_sweep": table([(0.0, 20), (0.5, 23), (1.0, 25)])})["gamma_sweep"]
    assert v["holds"] is False and v["evidence"]["best gamma"] == 1.0
    assert _verdicts({"gamma_sweep": table([(0.0, 20), (1.0, 25)])})["gamma_sweep"]["holds"] is None


def _dynamics(saturated, ratio):
    steps = np.arange(1, 11)
    return pd.DataFrame({"step": steps, "saturated_fraction": saturated, "grad_ratio": ratio,
                         "loss": 1.0, "infonce": 1.0})


def test_dynamics_claim_needs_early_saturation_and_ratio_above_one():
    rising = [0.1, 0.3, 0.6, 0.7, 0.8, 0.9, 0.9, 0.95, 0.95, 0.97]  # reaches 0.5 at step 3 of 10
    v = _verdicts({}, {"run": _dynamics(rising, [1.0] * 2 + [3.0] * 8)})["dynamics"]
    assert v["holds"] is True and v["evidence"]["run: saturated at step"] == 3
    assert v["evidence"]["run: mean ratio after"] == pytest.approx(3.0)
    assert _verdicts({}, {"run": _dynamics(rising, [0.8] * 10)})["dynamics"]["holds"] is False
    late = [0.0] * 7 + [0.6] * 3  # saturates at step 8 of 10: not early
    assert _verdicts({}, {"run": _dynamics(late, [3.0] * 10)})["dynamics"]["holds"] is False
    unlogged = _dynamics([np.nan] * 10, [np.nan] * 10)
    assert _verdicts({}, {"run": unlogged})["dynamics"]["holds"] is None


def test_every_claim_is_unknown_without_data():
    verdicts = evaluate_claims({}, "paper")
    assert len(verdicts) == 6
    assert all(v["holds"] is None and v["scale"] == "paper" for v in verdicts)


def test_measured_gradient_ratio_is_exp_s_gamma_delta_g():
    # §2.4: exp(100 * 0.5 * 0.1) = e^5 ~ 148.4
    assert measure_gradient_ratio(100.0, 0.5, 0.1) == pytest.approx(math.exp(5.0), rel=1e-9)
    assert measure_gradient_ratio(100.0, 0.0, 0.1) == pytest.approx(1.0, rel=1e-12)
    assert measure_gradient_ratio(50.0, 1.0, 0.2) == pytest.approx(math.exp(10.0), rel=1e-9)


def _seeds_table(spread_i2t, spread_t2i):
    cells, records = [], []
    for seed, (i2t, t2i) in enumerate(((10.0, 10.0), (10.0 + spread_i2t, 10.0 + spread_t2i))):
        run = {"train_set": "docci", "method": "hn", "gamma": 0.5, "fraction": 1.0, "seed": seed}
        records.append({"run": run, "eval_benchmark": "docci",
                        "metrics": dict.fromkeys(METRICS, 50.0) | {"i2t_r1": i2t, "t2i_r1": t2i}})
        cells.append({"row": "HN-CLIP", "group": "DOCCI", "variant": None, "x": None, "run": run,
                      "eval_benchmark": "docci"})
    return build_table({"experiment": "seeds", "scale": "toy", "cells": cells}, records)


def test_a_win_smaller_than_the_seed_to_seed_change_is_marked_within_noise():
    # seeds change mean R@1 by (2 + 1) / 2 = 1.5 points; the main-table win is 1.0 point, then 3.0 points
    seeds = _seeds_table(2.0, 1.0)
    small = _table("main", [("HN-CLIP", "DOCCI", None, None, "hn", 0.5, 1.0, 40, 30),
                            ("Long-CLIP FT", "DOCCI", None, None, "lc", 0.0, 1.0, 38, 30)])
    v = _verdicts({"main": small, "seeds": seeds})["main"]
    assert v["holds"] is True and v["within_noise"] is True
    assert v["evidence"]["seed noise (largest R@1 change between seeds)"] == pytest.approx(1.5)
    large = _table("main", [("HN-CLIP", "DOCCI", None, None, "hn", 0.5, 1.0, 40, 30),
                            ("Long-CLIP FT", "DOCCI", None, None, "lc", 0.0, 1.0, 34, 30)])
    assert _verdicts({"main": large, "seeds": seeds})["main"]["within_noise"] is False
    assert _verdicts({"main": small})["main"]["within_noise"] is False  # no seeds table: no floor
