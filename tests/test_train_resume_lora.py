"""Kill -9 and resume of a LoRA run with adapter dropout: pins the RNG state restore.

Same protocol as test_train_resume.py: SIGKILL inside a step, restart, compare with an uninterrupted run.
"""

from __future__ import annotations

import pytest
from test_train_support import assert_same_run, interrupted_run, make_dataset, run_training, small_config


@pytest.mark.slow  # a trainer subprocess killed mid-step, then resumed (~15 s)
def test_lora_with_dropout_killed_mid_step_matches_uninterrupted(tmp_path):
    # adapter dropout draws from the global RNG: without the saved RNG state the masks after resume differ
    paths = make_dataset(tmp_path / "data", n=16)
    cfg = small_config(framework="lora", framework_settings={"dropout": 0.3, "r": 4}, gamma=0.5, epochs=2,
                       checkpoint_every=2)
    run_training(paths, tmp_path / "reference", cfg, eval_manifest=paths["train_manifest"],
                 eval_store_dir=paths["store_dir"])
    out, outputs = interrupted_run(tmp_path, cfg, paths, [{"objective_call": 6}])  # step 3, micro-batch 2
    assert outputs[0][-2:] == ["CHECKPOINT 2", "PAUSED"]
    assert_same_run(tmp_path / "reference" / "out", out)
