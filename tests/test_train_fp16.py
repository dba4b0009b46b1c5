"""``precision: fp16``: float16 autocast with a gradient scaler (open_clip's ``--precision amp``), on the CPU.

torch runs float16 autocast and ``torch.amp.GradScaler`` on the CPU, so the loop's fp16 path (scaled
backward, unscale before the probe and clipping, a skipped step on overflow, the scaler in the
checkpoint) is tested here for real. Not tested here: CUDA's float16 kernels and their speed (no GPU on the
test machine); the code path is the same, with ``GradScaler("cuda")``.

References: the initial weights (a skipped step changes none), torch's documented scaler rule (an overflow
halves the scale, ``growth_interval`` clean steps double it), an uninterrupted run (resume), and the fp32
run's probe (the probe reads true, not scaled, gradients).
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from test_train_support import assert_same_run, make_dataset, read_csv_rows, run_training, small_config

import hnclip.train as T
from hnclip.config.train import TrainConfig


def _scaler(monkeypatch, **kwargs):
    """Every fp16 run in the test gets a GradScaler with these settings (the loop's own otherwise)."""
    monkeypatch.setattr(T, "grad_scaler", lambda cfg, device: (torch.amp.GradScaler(device.type, **kwargs)
                                                               if cfg.precision == "fp16" else None))


def test_fp16_autocasts_to_float16_and_is_allowed_on_the_cpu():
    device, dtype = T.resolve_runtime(TrainConfig(precision="fp16", device="cpu"))
    assert (device.type, dtype) == ("cpu", torch.float16)
    assert T.grad_scaler(TrainConfig(precision="fp16"), device) is not None
    assert T.grad_scaler(TrainConfig(precision="fp32"), device) is None


def test_steps_whose_scaled_gradients_overflow_are_skipped_and_halve_the_scale(tmp_path, monkeypatch):
    # 2 ** 100 times any gradient overflows float16 (largest finite 65504): both steps must be skipped
    _scaler(monkeypatch, init_scale=2.0 ** 100)
    paths = make_dataset(tmp_path / "data", n=16)  # 2 steps
    summary = run_training(paths, tmp_path / "run", small_config(precision="fp16"))
    assert summary["steps"] == 2 and summary["grad_scale"] == 2.0 ** 98
    before = load_file(str(paths["init_model_dir"] / "model.safetensors"))
    after = load_file(str(tmp_path / "run" / "out" / "model" / "model.safetensors"))
    for key in before:  # AdamW never ran: an optimizer stepped on inf gradients would leave NaN
        assert torch.equal(before[key], after[key]), key
    assert all(float(r["loss"]) == float(r["loss"]) for r in read_csv_rows(tmp_path / "run" / "out" / "dynamics.csv"))


def test_fp16_resume_continues_the_scalers_state_bit_for_bit(tmp_path, monkeypatch):
    # the scale moves all run long: too high at first (overflows halve it), then doubled every 2 clean
    # steps; a resumed run with a fresh scaler would skip other steps than the uninterrupted one
    _scaler(monkeypatch, init_scale=2.0 ** 24, growth_interval=2)
    paths = make_dataset(tmp_path / "data", n=24)
    cfg = small_config(precision="fp16", epochs=3, checkpoint_every=2, gamma=0.5)
    reference = run_training(paths, tmp_path / "reference", cfg)
    assert reference["grad_scale"] not in (2.0 ** 24, 2.0 ** 16)

    real_objective, calls = T.compute_objective, [0]

    def dies_in_step_6(*args, **kwargs):  # the 11th micro-batch: inside step 6, checkpoint at step 4
        calls[0] += 1
        if calls[0] == 11:
            raise KeyboardInterrupt("killed")
        return real_objective(*args, **kwargs)

    monkeypatch.setattr(T, "compute_objective", dies_in_step_6)
    with pytest.raises(KeyboardInterrupt):
        run_training(paths, tmp_path / "resumed", cfg)
    saved = torch.load(tmp_path / "resumed" / "ckpt" / "last.pt", weights_only=True)
    assert saved["state"]["step"] == 4 and set(saved["scaler"]) >= {"scale", "_growth_tracker"}
    monkeypatch.setattr(T, "compute_objective", real_objective)
    resumed = run_training(paths, tmp_path / "resumed", cfg)
    assert resumed["grad_scale"] == reference["grad_scale"]
    assert_same_run(tmp_path / "reference" / "out", tmp_path / "resumed" / "out")


def test_the_probe_of_an_fp16_step_reads_the_true_gradients(tmp_path, monkeypatch):
    _scaler(monkeypatch, init_scale=2.0 ** 8)  # no overflow on the first step
    paths = make_dataset(tmp_path / "data", n=16)
    rows = {}
    for precision in ("fp32", "fp16"):
        cfg = small_config(precision=precision, dynamics_every=1, gamma=0.5, max_steps=1)
        run_training(paths, tmp_path / precision, cfg)
        rows[precision] = read_csv_rows(tmp_path / precision / "out" / "dynamics.csv")[0]
    for column in ("grad_norm_standard", "grad_norm_boosted", "loss", "infonce"):
        # the same step in float16: within float16's rounding of the fp32 run, not 256 times it
        assert float(rows["fp16"][column]) == pytest.approx(float(rows["fp32"][column]), rel=2e-2), column
    summary = json.loads((tmp_path / "fp16" / "out" / "summary.json").read_text())
    assert summary["config"]["precision"] == "fp16" and summary["grad_scale"] == 2.0 ** 8
