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
import math

import pytest
import torch
from safetensors.torch import load_file
from test_train_support import assert_same_run, make_dataset, read_csv_rows, run_training, small_config

import hnclip.training.objective as objective_module
import hnclip.training.runtime as runtime_module
from hnclip.config.train import TrainConfig
from hnclip.models import load_model
from hnclip.training.fp16_skips import SkippedStepsError


def _scaler(monkeypatch, **kwargs):
    """Every fp16 run in the test gets a GradScaler with these settings (the loop's own otherwise)."""
    monkeypatch.setattr(runtime_module, "grad_scaler", lambda cfg, device: (torch.amp.GradScaler(device.type, **kwargs)
                                                               if cfg.precision == "fp16" else None))


def test_fp16_autocasts_to_float16_and_is_allowed_on_the_cpu():
    device, dtype = runtime_module.resolve_runtime(TrainConfig(precision="fp16", device="cpu"))
    assert (device.type, dtype) == ("cpu", torch.float16)
    assert runtime_module.grad_scaler(TrainConfig(precision="fp16"), device) is not None
    assert runtime_module.grad_scaler(TrainConfig(precision="fp32"), device) is None


def test_steps_whose_scaled_gradients_overflow_are_skipped_and_halve_the_scale(tmp_path, monkeypatch):
    # 2 ** 100 times any gradient overflows float16 (largest finite 65504): both steps must be skipped, and a
    # run that skipped every step trained nothing, so it stops instead of saving the initial weights
    _scaler(monkeypatch, init_scale=2.0 ** 100)
    paths = make_dataset(tmp_path / "data", n=16)  # 2 steps
    with pytest.raises(SkippedStepsError, match="skipped all 2 optimizer steps of the run"):
        run_training(paths, tmp_path / "run", small_config(precision="fp16"))
    saved = torch.load(tmp_path / "run" / "ckpt" / "last.pt", weights_only=True)
    assert saved["state"]["step"] == 2 and saved["state"]["skipped_steps"] == 2
    assert saved["scaler"]["scale"] == 2.0 ** 98
    before = load_model(paths["init_model_dir"]).state_dict()
    for key, value in before.items():  # AdamW never ran: an optimizer stepped on inf gradients would leave NaN
        assert torch.equal(value, saved["model"][key]), key
    assert all(float(r["loss"]) == float(r["loss"]) for r in read_csv_rows(tmp_path / "run" / "out" / "dynamics.csv"))


def test_an_epoch_of_non_finite_gradients_stops_the_run_at_its_end(tmp_path, monkeypatch):
    # NaN gradients overflow at any scale: from 2.0, the epoch's two skips take it to 0.5 (< 1, no longer
    # a calibration) and the run stops after epoch 1 of 3
    _scaler(monkeypatch, init_scale=2.0)
    real_objective = objective_module.compute_objective

    def nan_objective(*args, **kwargs):  # a finite loss whose gradients are NaN, as the float16 padding's were
        loss, standard = real_objective(*args, **kwargs)
        loss.register_hook(lambda grad: grad * float("nan"))
        return loss, standard

    monkeypatch.setattr(objective_module, "compute_objective", nan_objective)
    paths = make_dataset(tmp_path / "data", n=16)
    with pytest.raises(SkippedStepsError, match=r"skipped all 2 optimizer steps of epoch 1 .*scale fell to 0\.5"):
        run_training(paths, tmp_path / "run", small_config(precision="fp16", epochs=3))


def test_fp16_with_the_token_term_trains_and_tracks_fp32(tmp_path, monkeypatch):
    # the FILIP token term (token_weight > 0) normalised zero-padded caption positions in float16, where
    # F.normalize's eps underflows: 0/0 = NaN in every step's gradients, every step skipped. Now the weights
    # move as far as fp32's and end within 15% of that move from fp32's weights (measured: 5.6%), each
    # step's loss within 1% (measured: 0.15%); the scale starts at 2**8, where no step overflows
    _scaler(monkeypatch, init_scale=2.0 ** 8)
    paths = make_dataset(tmp_path / "data", n=16)
    initial = load_file(str(paths["init_model_dir"] / "model.safetensors"))
    weights, losses = {}, {}
    for precision in ("fp32", "fp16"):
        summary = run_training(paths, tmp_path / precision,
                               small_config(precision=precision, token_weight=0.5, lr=1e-3, epochs=2))
        assert summary["precision"] == precision  # resolved and recorded for the report's provenance
        weights[precision] = load_file(str(tmp_path / precision / "out" / "model" / "model.safetensors"))
        losses[precision] = [float(r["loss"]) for r in read_csv_rows(tmp_path / precision / "out" / "dynamics.csv")]
    assert summary["skipped_steps"] == 0 and summary["grad_scale"] == 2.0 ** 8

    def distance(a, b):
        return sum(float(((a[k].double() - b[k].double()) ** 2).sum()) for k in initial) ** 0.5

    moved = distance(weights["fp32"], initial)
    assert moved > 0.1 and distance(weights["fp16"], initial) == pytest.approx(moved, rel=0.05)
    assert distance(weights["fp16"], weights["fp32"]) <= 0.15 * moved
    assert losses["fp16"] == pytest.approx(losses["fp32"], rel=1e-2)


def test_padded_caption_positions_are_zero_token_features_under_fp16_autocast():
    from hnclip.models import create_model

    model = create_model("micro", seed=0)
    tokens = model.tokenize(["a red cube", "the small green ball left of the tree"])
    with torch.autocast("cpu", dtype=torch.float16):
        out = model(torch.zeros(2, 3, 32, 32), tokens, with_tokens=True)
    text_tokens, mask = out["text_tokens"], out["text_mask"]
    assert torch.isfinite(text_tokens).all() and torch.isfinite(out["image_tokens"]).all()
    beyond = text_tokens[:, int(mask.sum(dim=1).max()):]  # after the batch's longest caption: never computed
    assert beyond.numel() and torch.equal(beyond, torch.zeros_like(beyond))
    norms = text_tokens[mask].double().norm(dim=-1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-6)  # real tokens: unit length


def test_fp16_resume_continues_the_scalers_state_bit_for_bit(tmp_path, monkeypatch):
    # the scale moves all run long: too high at first (overflows halve it), then doubled every 2 clean
    # steps; a resumed run with a fresh scaler would skip other steps than the uninterrupted one
    _scaler(monkeypatch, init_scale=2.0 ** 15, growth_interval=2)
    paths = make_dataset(tmp_path / "data", n=24)
    cfg = small_config(precision="fp16", epochs=3, checkpoint_every=2, gamma=0.5)
    reference = run_training(paths, tmp_path / "reference", cfg)
    # some of the 9 steps skipped (the scale halved), others clean (it doubled again)
    assert 0 < reference["skipped_steps"] < reference["steps"] == 9

    real_objective, calls = objective_module.compute_objective, [0]

    def dies_in_step_6(*args, **kwargs):  # the 11th micro-batch: inside step 6, checkpoint at step 4
        calls[0] += 1
        if calls[0] == 11:
            raise KeyboardInterrupt("killed")
        return real_objective(*args, **kwargs)

    monkeypatch.setattr(objective_module, "compute_objective", dies_in_step_6)
    with pytest.raises(KeyboardInterrupt):
        run_training(paths, tmp_path / "resumed", cfg)
    saved = torch.load(tmp_path / "resumed" / "ckpt" / "last.pt", weights_only=True)
    assert saved["state"]["step"] == 4 and set(saved["scaler"]) >= {"scale", "_growth_tracker"}
    # where the scaler stands at the kill is not where a fresh one starts (2**15, no clean step counted)
    assert (saved["scaler"]["scale"], saved["scaler"]["_growth_tracker"]) != (2.0 ** 15, 0)
    monkeypatch.setattr(objective_module, "compute_objective", real_objective)
    resumed = run_training(paths, tmp_path / "resumed", cfg)
    assert (resumed["grad_scale"], resumed["skipped_steps"]) == (reference["grad_scale"], reference["skipped_steps"])
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


def _cosine_lr(peak: float, taken: int, total: int) -> float:
    """The rate of an optimizer step after ``taken`` steps were taken: a half cosine from ``peak`` to 0 over
    ``total`` steps, no warmup (small_config's schedule, transcribed by hand in float64)."""
    return peak * 0.5 * (1.0 + math.cos(math.pi * taken / total))


def test_a_short_run_whose_scaler_is_still_calibrating_stops_without_blaming_the_gradients(tmp_path):
    # torch's own GradScaler (init 2**16): the micro model's gradients overflow float16 at 2**16 .. 2**13, so
    # all 3 steps of max_steps 3 are skipped and the scale halves to 2**13, still far above 1: the scaler had
    # not settled, nothing says the gradients are inf or NaN, and fp32 is not the advice
    paths = make_dataset(tmp_path / "data", n=32)
    with pytest.raises(SkippedStepsError) as error:
        run_training(paths, tmp_path / "run", small_config(precision="fp16", max_steps=3))
    text = str(error.value)
    assert "skipped all 3 optimizer steps of the run while still calibrating" in text
    assert "from its initial 2**16 to 2**13" in text and "no sign of inf or NaN gradients" in text and "i.e. they were inf or NaN" not in text and "fp32" not in text
    assert "max_steps" in text and "\n" not in text


@pytest.mark.parametrize("precision", ["fp16", "fp32"])
def test_skipped_steps_are_said_on_the_console_and_hold_the_learning_rate(tmp_path, capsys, precision):
    # the loop's own scaler: its first steps are skipped while the scale calibrates from 2**16 (measured: 4 of
    # the 8 steps for the micro model). Each skipped step leaves the rate where it was, so the k-th step taken
    # gets the cosine's k-th rate; an fp32 run (no scaler) follows the cosine step by step as before
    paths = make_dataset(tmp_path / "data", n=32)  # 4 steps per epoch
    summary = run_training(paths, tmp_path / "run", small_config(precision=precision, epochs=2))
    rates = [float(r["lr"]) for r in read_csv_rows(tmp_path / "run" / "out" / "dynamics.csv")]
    out = capsys.readouterr().out
    if precision == "fp32":
        assert "skipped" not in summary and "gradient scaler" not in out
        assert rates == [pytest.approx(_cosine_lr(1e-2, i, 8), rel=1e-12, abs=1e-15) for i in range(8)]
        return
    skipped = summary["skipped_steps"]
    assert 0 < skipped < 8 and summary["calibration_skips"] == skipped
    assert summary["grad_scale"] == 2.0 ** 16 / 2 ** skipped  # torch's rule: halved at each skipped step
    taken = [0] * (skipped + 1) + list(range(1, 8 - skipped))  # steps taken before each step
    assert rates == [pytest.approx(_cosine_lr(1e-2, k, 8), rel=1e-12, abs=1e-15) for k in taken]
    line = next(line for line in out.splitlines() if "gradient scaler" in line)
    assert line.startswith(f"hnclip train {tmp_path / 'run' / 'out'}: precision fp16: the gradient scaler skipped "
                           f"{skipped} of 8 optimizer steps")
    assert f"the first {skipped} while the scaler calibrated its scale" in line and "2**16" in line
