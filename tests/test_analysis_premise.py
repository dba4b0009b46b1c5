"""The regime figures from hand-made run logs, each expected value computed by hand in the comments."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hnclip.analysis.premise import (
    PAPER,
    PREMISE_KEYS,
    active_per_epoch,
    classify_runs,
    infonce_flattening,
    objective_active_min_epoch,
    premise_counts,
    premise_figures,
    premise_sources,
    run_role,
)
from hnclip.dynamics_log import EXACT_ZERO_COLUMNS

NAN = math.nan


def write_run(root, name, config, dynamics, epochs=None, subset=None):
    run = root / name
    run.mkdir(parents=True)
    # two micro-batches per step unless said otherwise: a share of 0.5 is one of two
    summary = {"config": {"framework": "longclip", "margin": "recompute", "accum_steps": 2, **config},
               "run": {"subset_path": subset}}
    (run / "summary.json").write_text(json.dumps(summary))
    pd.DataFrame(dynamics).to_csv(run / "dynamics.csv", index=False)
    if epochs is not None:
        pd.DataFrame(epochs).to_csv(run / "epochs.csv", index=False)
    return run


def zero_columns(values):
    """Every exact-zero column with the same per-step values."""
    return {c: list(values) for c in EXACT_ZERO_COLUMNS}


@pytest.fixture
def runs(tmp_path):
    # plain run A: 2 epochs x 2 steps; epoch-1 saturated shares 0.5, 1.0; probed steps 1 and 3
    plain_a = write_run(tmp_path, "plain_a", {"gamma": 0.0, "token_weight": 0.0}, {
        "step": [1, 2, 3, 4], "epoch": [1, 1, 2, 2], "infonce": [2.0, 1.0, 0.2, 0.2],
        "saturated_share": [0.5, 1.0, 1.0, 1.0], "objective_active_share": [0.5, 0.0, 0.0, 0.0],
        "grad_cosine": [1.0, NAN, 1.0, NAN], "grad_ratio": [1.0, NAN, 1.0, NAN],
        "grad_norm_standard_fp32": [1.0, NAN, 0.0, NAN], **zero_columns([0.0, NAN, 1.0, NAN]),
    })
    # plain run B: 2 epochs x 1 step; epoch-1 share 0.0; one probed step with zero shares 0.5
    plain_b = write_run(tmp_path, "plain_b", {"gamma": 0.0, "token_weight": 0.0}, {
        "step": [1, 2], "epoch": [1, 2], "infonce": [1.0, 0.4], "saturated_share": [0.0, 1.0],
        "objective_active_share": [1.0, 0.0], "grad_cosine": [1.0, NAN], "grad_ratio": [1.0, NAN],
        "grad_norm_standard_fp32": [2.0, NAN], **zero_columns([0.5, NAN]),
    })
    # HN-only run: epoch 1 active 0.5, 0.25 (mean 0.375); epoch 2 active 1.0, 0.5 (mean 0.75)
    hn = write_run(tmp_path, "hn", {"gamma": 0.5, "token_weight": 0.0}, {
        "step": [1, 2, 3, 4], "epoch": [1, 1, 2, 2], "infonce": [1.0, 0.5, 0.1, 0.1],
        "saturated_share": [0.5, 0.75, 1.0, 1.0], "objective_active_share": [0.5, 0.25, 1.0, 0.5],
        "grad_cosine": [0.5, -0.25, 0.75, NAN], "grad_ratio": [100.0, 300.0, 1e6, 5.0],
        "grad_norm_standard_fp32": [1e-3, 2e-3, 0.0, 1.0], **zero_columns([0.0, 0.0, 0.0, 0.0]),
    })
    hnclip = write_run(tmp_path, "hnclip", {"gamma": 0.5, "token_weight": 0.5},
                       {"step": [1], "epoch": [1], "infonce": [1.0]},
                       epochs={"epoch": [2, 1], "i2t_r1": [90.0, 80.0], "t2i_r1": [85.0, 70.0]})
    hnclip_seed1 = write_run(tmp_path, "hnclip_s1", {"gamma": 0.5, "token_weight": 0.5},
                             {"step": [1], "epoch": [1], "infonce": [1.0]},
                             epochs={"epoch": [1, 2], "i2t_r1": [78.0, 86.0], "t2i_r1": [72.0, 75.0]})
    # runs without a role: a subset, a gamma-sweep point, frozen margins, another framework
    ignored = [
        write_run(tmp_path, "subset", {"gamma": 0.0, "token_weight": 0.0}, {"step": [1]}, subset="f0.5.txt"),
        write_run(tmp_path, "sweep", {"gamma": 0.25, "token_weight": 0.5}, {"step": [1]}),
        write_run(tmp_path, "frozen", {"gamma": 0.5, "token_weight": 0.5, "margin": "frozen"}, {"step": [1]}),
        write_run(tmp_path, "lora", {"gamma": 0.0, "token_weight": 0.0, "framework": "lora"}, {"step": [1]}),
    ]
    return [plain_a, plain_b, hn, hnclip, hnclip_seed1, *ignored]


def test_runs_get_their_roles_from_the_summary_config(runs):
    roles = classify_runs(runs, gamma=0.5)
    assert [r["run"] for r in roles["plain"]] == [str(runs[0]), str(runs[1])]
    assert [r["run"] for r in roles["hn"]] == [str(runs[2])]
    assert [r["run"] for r in roles["hnclip"]] == [str(runs[3]), str(runs[4])]
    assert run_role({"config": {"framework": "longclip", "gamma": 0.5, "token_weight": 0.0}}, gamma=0.25) is None


def test_premise_figures_match_the_hand_computed_values(runs):
    figures = premise_figures(classify_runs(runs, gamma=0.5))
    assert tuple(figures) == PREMISE_KEYS == tuple(PAPER)
    # epoch-1 steps of the plain runs: 0.5, 1.0 (A) and 0.0 (B) -> 1.5 / 3
    assert figures["saturated_share_epoch1"] == pytest.approx(0.5)
    # probed plain steps: A 0.0 and 1.0, B 0.5 -> 1.5 / 3, for every quantity and dtype
    for key in ("loss", "positive_logit_grad", "feature_grad", "param_grad"):
        for dtype in ("fp32", "bf16"):
            assert figures[f"exact_zero.{key}.{dtype}"] == pytest.approx(0.5)
    # HN run: standard InfoNCE active 0.375 in epoch 1, 0.0 in epoch 2 -> min 0.0; the objective's own 0.375
    assert figures["hn_active_share_min_epoch"] == pytest.approx(0.0)
    assert objective_active_min_epoch(classify_runs(runs, gamma=0.5)["hn"]) == pytest.approx(0.375)
    # ratios where the fp32 standard norm is > 0: epoch 1 {100, 300} median 200; epoch 2 {5} (1e6 had norm 0)
    assert figures["ratio_median_per_epoch_min"] == pytest.approx(5.0)
    assert figures["ratio_median_per_epoch_max"] == pytest.approx(200.0)
    # cosines 0.5, -0.25, 0.75 -> median 0.5, positive 2 of 3
    assert figures["grad_cosine_median"] == pytest.approx(0.5)
    assert figures["grad_cosine_positive_share"] == pytest.approx(2 / 3)
    # HN-CLIP runs, first and last epoch (sorted by epoch): i2t errors (20, 22) -> 21 and (10, 14) -> 12
    assert figures["error_i2t_first"] == pytest.approx(21.0) and figures["error_i2t_last"] == pytest.approx(12.0)
    assert figures["error_t2i_first"] == pytest.approx(29.0) and figures["error_t2i_last"] == pytest.approx(20.0)
    # plain per-epoch InfoNCE: A (1.5, 0.2), B (1.0, 0.4) -> means (1.25, 0.3); epoch 2 is the last, so
    # flatness is established nowhere before it
    assert figures["infonce_flat_epoch"] is None


def test_sources_name_the_runs_behind_each_figure(runs):
    sources = premise_sources(classify_runs(runs, gamma=0.5))
    assert tuple(sources) == PREMISE_KEYS
    assert sources["saturated_share_epoch1"] == [str(runs[0]), str(runs[1])]
    assert sources["exact_zero.param_grad.fp32"] == [str(runs[0]), str(runs[1])]
    assert sources["grad_cosine_median"] == [str(runs[2])]
    assert sources["error_t2i_last"] == [str(runs[3]), str(runs[4])]


def test_without_runs_every_figure_is_none():
    figures = premise_figures({})
    assert tuple(figures) == PREMISE_KEYS and all(v is None for v in figures.values())


def test_a_log_from_before_the_new_columns_is_refused_naming_the_run(tmp_path):
    old = write_run(tmp_path, "old", {"gamma": 0.0, "token_weight": 0.0},
                    {"step": [1], "epoch": [1], "infonce": [1.0], "saturated_fraction": [0.0]})
    with pytest.raises(ValueError, match="old.*saturated_share"):
        premise_figures(classify_runs([old], gamma=0.5))


def _plain_curve(tmp_path, name, per_epoch_steps, seed=0):
    """A plain run whose dynamics log holds these per-step InfoNCE values, epoch by epoch."""
    steps = [(e, v) for e, values in enumerate(per_epoch_steps, start=1) for v in values]
    return {"run": str(tmp_path / name), "summary": {"config": {"seed": seed}},
            "dynamics": pd.DataFrame({"step": range(1, len(steps) + 1), "epoch": [e for e, _ in steps],
                                      "infonce": [v for _, v in steps]})}


def test_infonce_flattens_where_the_interval_of_its_fall_lies_below_a_factor_2(tmp_path):
    # epoch means 1.0, 0.3, 0.29, 0.3: epoch 1 falls 1.0 / 0.29 = 3.4x (every step of epoch 1 is above
    # 2 x every later step: the interval lies above 2), epoch 2 falls 0.3 / 0.29 = 1.03x (below 2)
    steps = [[0.9, 1.1, 1.0, 0.95, 1.05, 1.0], [0.28, 0.32, 0.3, 0.29, 0.31, 0.3],
             [0.29, 0.29, 0.28, 0.30, 0.29, 0.29], [0.3, 0.3, 0.31, 0.29, 0.3, 0.3]]
    flat = infonce_flattening([_plain_curve(tmp_path, "a", steps)], resamples=500)
    assert flat["epochs"] == [1, 2, 3, 4] and flat["flat_epoch"] == 2
    assert flat["status"][:2] == ["falling", "flat"]
    assert flat["fall"][0] == pytest.approx(1.0 / np.mean(steps[2]))
    assert flat["fall_low"][0] > 2 and flat["fall_high"][1] < 2
    # a loss that halves after every epoch never flattens before the last: no flat epoch
    halving = [[1.0, 1.02, 0.98], [0.3, 0.31, 0.29], [0.1, 0.1, 0.11], [0.03, 0.031, 0.029]]
    flat = infonce_flattening([_plain_curve(tmp_path, "b", halving)], resamples=500)
    assert flat["flat_epoch"] is None and flat["status"] == ["falling"] * 3
    # one noisy epoch whose steps straddle a factor 2 cannot be called either way
    noisy = [[2.0, 0.1, 1.9, 0.15, 2.1, 0.05], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]]
    flat = infonce_flattening([_plain_curve(tmp_path, "c", noisy)], resamples=500)
    assert flat["status"] == ["undecided"] and flat["flat_epoch"] is None
    # two runs: each epoch's mean is the mean over runs of each run's mean
    two = infonce_flattening([_plain_curve(tmp_path, "a", steps), _plain_curve(tmp_path, "d", halving)], resamples=200)
    assert two["mean"][0] == pytest.approx((1.0 + 1.0) / 2)
    assert infonce_flattening([]) is None


def test_counts_behind_the_shares_are_micro_batches_and_probed_steps(runs):
    counts = premise_counts(classify_runs(runs, gamma=0.5))
    # epoch 1 of the plain runs: A shares 0.5, 1.0 of 2 micro-batches (1 + 2 of 4), B 0.0 of 2 -> 3 of 6
    assert counts["saturated_share_epoch1"] == [3, 6]
    # probed plain steps: A 0.0 and 1.0 of 2 (0 + 2), B 0.5 of 2 (1) -> 3 of 6
    assert counts["exact_zero.param_grad.fp32"] == [3, 6]
    # HN cosines 0.5, -0.25, 0.75: 2 positive of 3 probed steps
    assert counts["grad_cosine_positive_share"] == [2, 3]


def _micro_run(tmp_path, name, gamma, per_step_losses, seed=0):
    """A run whose steps log each micro-batch's standard InfoNCE (two per step), one epoch per two steps."""
    config = {"gamma": gamma, "token_weight": 0.0, "seed": seed, "micro_batch": 16, "accum_steps": 2}
    shares = [sum(v < 1e-3 for v in losses) / len(losses) for losses in per_step_losses]
    return write_run(tmp_path / "results/runs/synthetic", name, config, {
        "step": list(range(1, len(shares) + 1)), "epoch": [1 + i // 2 for i in range(len(shares))],
        "infonce": [float(np.mean(v)) for v in per_step_losses], "saturated_share": shares,
        "objective_active_share": [1.0] * len(shares),
        "infonce_micro": [" ".join(repr(x) for x in v) for v in per_step_losses]})


def test_active_batches_are_compared_on_the_same_micro_batches(tmp_path):
    # micro-batches (step, position). The seed-0 plain run saturates (1,0), (2,1) in epoch 1 and all four in
    # epoch 2; the HN run keeps (1,0) active in epoch 1 and (3,0), (4,1) in epoch 2, and saturates (2,0),
    # which the plain run keeps active
    plain = _micro_run(tmp_path, "longclip/g0/f1/s0", 0.0, [[1e-4, 0.1], [0.1, 1e-5], [1e-4, 1e-4], [1e-6, 1e-5]])
    hn = _micro_run(tmp_path, "longclip_hn/g0.5/f1/s0", 0.5, [[0.2, 0.1], [1e-4, 1e-4], [0.01, 1e-4], [1e-4, 0.3]])
    other_seed = _micro_run(tmp_path, "longclip/g0/f1/s1", 0.0, [[0.1, 0.1]] * 4, seed=1)
    roles = classify_runs([plain, hn, other_seed], gamma=0.5)
    rows = active_per_epoch(roles["hn"], roles["plain"])
    # epoch 1: HN active at (1,0) 0.2 and (1,1) 0.1, not at (2,0), (2,1) 1e-4 -> 2 of 4; plain (seeds 0 and
    # 1): s0 active at (1,1), (2,0) -> 2 of 4, s1 at all four -> 6 of 8
    assert rows[0]["epoch"] == 1 and rows[0]["hn"] == [2, 4] and rows[0]["plain"] == [6, 8]
    # paired with the seed-0 plain run only: HN alone active at (1,0); plain alone at (2,0)
    assert (rows[0]["hn_only"], rows[0]["plain_only"], rows[0]["paired"]) == (1, 1, 4)
    # epoch 2: HN active (3,0) 0.01 and (4,1) 0.3; plain s0 none -> HN alone 2, plain alone 0
    assert rows[1]["hn"] == [2, 4] and (rows[1]["hn_only"], rows[1]["plain_only"]) == (2, 0)
    # without the per-micro-batch losses there is no pairing
    rows = active_per_epoch(roles["hn"], [])
    assert rows[0]["plain"] is None and rows[0]["paired"] is None


def test_the_premise_verb_writes_every_figure_with_its_runs_and_reads_summary_paths(runs, tmp_path):
    import subprocess
    import sys

    out = tmp_path / "premise.json"
    summaries = [str(run / "summary.json") for run in runs]
    proc = subprocess.run([sys.executable, "-m", "hnclip", "premise", "--runs", *summaries, "--gamma", "0.5",
                           "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    written = json.loads(out.read_text())
    assert set(PREMISE_KEYS) <= set(written) and written["gamma"] == 0.5
    # the plain runs' epoch-1 saturated shares 0.5, 1.0 and 0.0 (fixture): mean 0.5
    assert written["saturated_share_epoch1"] == pytest.approx(0.5)
    assert sorted(Path(r).name for r in written["sources"]["saturated_share_epoch1"]) == ["plain_a", "plain_b"]
    assert [Path(r).name for r in written["sources"]["grad_cosine_median"]] == ["hn"]


def test_no_runs_give_no_figures_rather_than_an_error(tmp_path):
    from hnclip.analysis.premise import premise_report

    report = premise_report([], gamma=0.5)
    assert all(report[k] is None for k in PREMISE_KEYS) and report["sources"]["saturated_share_epoch1"] == []


def test_runs_with_long_clips_short_caption_term_play_no_role(tmp_path):
    assert run_role({"config": {"framework": "longclip", "gamma": 0.0, "token_weight": 0.0}}, gamma=0.5) == "plain"
    assert run_role({"config": {"framework": "longclip", "gamma": 0.0, "token_weight": 0.0,
                                "longclip": {"short_weight": 0.1}}}, gamma=0.5) is None


def test_a_run_that_did_not_probe_is_no_source_of_the_probe_figures(runs, tmp_path):
    # a third plain run whose dynamics log has only the columns every step logs (TrainConfig.dynamics_probe false)
    unprobed = write_run(tmp_path, "plain_c", {"gamma": 0.0, "token_weight": 0.0, "dynamics_probe": False}, {
        "step": [1, 2], "epoch": [1, 1], "infonce": [1.0, 1.0], "saturated_share": [1.0, 1.0],
        "objective_active_share": [0.0, 0.0], "grad_cosine": [NAN, NAN], "grad_ratio": [NAN, NAN],
        "grad_norm_standard_fp32": [NAN, NAN], **zero_columns([NAN, NAN]),
    })
    roles = classify_runs([*runs, unprobed], gamma=0.5)
    with_probe = classify_runs(runs, gamma=0.5)
    figures, sources = premise_figures(roles), premise_sources(roles)
    assert str(unprobed) in sources["saturated_share_epoch1"]  # read from a column every step logs
    assert str(unprobed) not in sources["exact_zero.param_grad.fp32"]
    assert sources["exact_zero.loss.bf16"] == premise_sources(with_probe)["exact_zero.loss.bf16"]
    assert figures["exact_zero.param_grad.fp32"] == premise_figures(with_probe)["exact_zero.param_grad.fp32"]


def test_the_premise_verb_prints_the_figures_beside_the_papers_without_out(tmp_path, capsys):
    """`hnclip premise --results DIR --gamma G` (once benchmarks/premise.py): every figure with the paper's."""
    from hnclip.analysis.premise import PAPER
    from hnclip.cli import main

    (tmp_path / "runs").mkdir()
    assert main(["premise", "--results", str(tmp_path), "--gamma", "0.5"]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path}: 0 runs" in out
    assert all(key in out for key in PAPER)
    with pytest.raises(SystemExit, match="--results needs --gamma"):
        main(["premise", "--results", str(tmp_path)])
    with pytest.raises(SystemExit, match="give --out"):
        main(["premise"])
