"""Kill -9 and resume: a restarted run ends bit-identical to an uninterrupted one, logs included.

The interrupted run is a real subprocess killed with SIGKILL inside a step whose micro-batches are
partly accumulated, after log rows that no checkpoint covers were written; the uninterrupted reference
runs in this process with the same thread count. test_train_resume_lora.py keeps the stale outputs
in place instead (a manual restart).
"""

from __future__ import annotations

import pytest
from test_train_support import (
    assert_same_run,
    interrupted_run,
    make_dataset,
    read_csv_rows,
    run_training,
    small_config,
)


@pytest.mark.slow  # a trainer subprocess killed mid-step, then resumed (~15 s)
def test_full_finetuning_killed_mid_step_matches_uninterrupted(tmp_path):
    paths = make_dataset(tmp_path / "data", n=24)
    # 3 steps per epoch, 2 epochs; checkpoints at steps 2, 3 (epoch end), 4, 6 (epoch end)
    cfg = small_config(gamma=0.5, token_weight=0.5, margin="frozen", epochs=2, checkpoint_every=2,
                       dynamics_every=3, weight_decay=0.1, grad_clip=1.0, warmup_steps=2, lr=1e-2)
    run_training(paths, tmp_path / "reference", cfg, eval_manifest=paths["train_manifest"],
                 eval_store_dir=paths["store_dir"])
    # the first session dies inside step 6 (its 11th micro-batch loss): the last checkpoint is step 4,
    # step 5's log row is written but not covered by it, and step 6 has started accumulating. Before
    # the restart the outputs are deleted, as Snakemake does; the logs come back from the checkpoint.
    out, outputs = interrupted_run(tmp_path, cfg, paths, [{"objective_call": 11}], delete_outputs=True)
    assert outputs[0][-4:] == ["CHECKPOINT 2", "CHECKPOINT 3", "CHECKPOINT 4", "PAUSED"]
    assert outputs[1][:1] == ["CHECKPOINT 6"]  # the second session really resumed from step 4
    assert_same_run(tmp_path / "reference" / "out", out)
    assert len(read_csv_rows(out / "dynamics.csv")) == 6 and len(read_csv_rows(out / "epochs.csv")) == 2
