"""Where a run's wall time goes: the probe's excess and the per-epoch evaluations, taken out of the training
time the cost table compares (the paper's speed-ups are about training, not about our diagnostics)."""

from __future__ import annotations

import pytest
from test_train_support import make_dataset, run_training, small_config

from hnclip.training.checkpoint import TrainState
from hnclip.training.timing import step_timing


def test_step_timing_takes_the_probes_excess_and_the_evaluations_out_of_the_wall_time():
    # 9 timed plain steps of 1 s, 2 timed probed steps of 3 s (+2 s each), 3 probed steps in all (one in a
    # session's untimed first step): excess 3 x 2 = 6 s; 5 s of evaluations; 40 s of wall time -> 29 s
    state = TrainState(wall_time_s=40.0, probed_steps=3, probed_step_s=6.0, probed_timed=2, plain_step_s=9.0,
                       plain_timed=9, epoch_eval_s=5.0)
    timing = step_timing(state)
    assert timing["probe_excess_s"] == pytest.approx(6.0)
    assert timing["train_time_s"] == pytest.approx(29.0)
    # a run that never probed, or whose probed steps were never timed: nothing to take out
    assert step_timing(TrainState(wall_time_s=10.0, plain_step_s=5.0, plain_timed=5))["train_time_s"] == 10.0
    assert step_timing(TrainState(wall_time_s=10.0, probed_steps=1, plain_step_s=5.0, plain_timed=5))[
        "probe_excess_s"] == 0.0


def test_a_run_records_its_timing_in_its_summary(tmp_path):
    paths = make_dataset(tmp_path / "data", n=16)
    summary = run_training(paths, tmp_path, small_config(epochs=2, dynamics_every=2),
                           eval_manifest=paths["train_manifest"], eval_store_dir=paths["store_dir"])
    timing = summary["timing"]
    # 16 samples / (4 x 2) = 2 steps per epoch, 4 steps: probed after steps 0 and 2 (steps 1 and 3)
    assert timing["probed_steps"] == 2 and timing["probed_timed"] + timing["plain_timed"] == 3
    assert timing["epoch_eval_s"] > 0
    assert timing["train_time_s"] == pytest.approx(summary["wall_time_s"] - timing["probe_excess_s"]
                                                   - timing["epoch_eval_s"])
