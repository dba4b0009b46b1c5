"""Kill -9 and resume of a FineLIP run: its aggregator modules and their optimizer moments come back.

Same protocol as test_train_resume.py (SIGKILL inside a step, restart, compare with an uninterrupted
run), plus the framework's module weights saved beside the model, and the per-epoch evaluation that
scores with FineLIP's blend (so epochs.csv also depends on the modules).
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file
from test_train_support import assert_same_run, interrupted_run, make_dataset, run_training, small_config


@pytest.mark.slow  # a trainer subprocess killed mid-step, then resumed (~15 s)
def test_finelip_killed_mid_step_matches_uninterrupted_modules_included(tmp_path):
    paths = make_dataset(tmp_path / "data", n=16)
    cfg = small_config(framework="finelip", gamma=0.5, token_weight=0.5, epochs=2, checkpoint_every=2,
                       module_lr=1e-2, weight_decay=0.1, dynamics_every=3)
    run_training(paths, tmp_path / "reference", cfg, eval_manifest=paths["train_manifest"],
                 eval_store_dir=paths["store_dir"])
    out, outputs = interrupted_run(tmp_path, cfg, paths, [{"objective_call": 6}])  # step 3, micro-batch 2
    assert outputs[0][-2:] == ["CHECKPOINT 2", "PAUSED"]
    assert_same_run(tmp_path / "reference" / "out", out)
    expected = load_file(str(tmp_path / "reference" / "out" / "model" / "framework.safetensors"))
    got = load_file(str(out / "model" / "framework.safetensors"))
    assert expected.keys() == got.keys() and len(expected) > 0
    for key in expected:
        assert torch.equal(expected[key], got[key]), key
