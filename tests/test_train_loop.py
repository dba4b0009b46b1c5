"""The objective the loop optimises, checked against hand-written float64 losses on the micro model.

References are written here from the paper's formulas (not with hnclip.losses): per micro-batch
logits s * (I T^T + gamma * G), G the detached caption cosine with a zero diagonal, symmetric
cross-entropy; the data order is the documented per-epoch permutation default_rng([seed, epoch]).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from test_train_support import make_dataset, read_csv_rows, run_training, small_config

from hnclip.data.image_store import to_model_input
from hnclip.data.manifest import read_manifest
from hnclip.losses import HNClipLoss
from hnclip.models import load_model

GAMMA = 0.5


def hand_loss(out: dict, gamma: float) -> torch.Tensor:
    images = out["image_features"].double()
    texts = out["text_features"].double()
    s = out["logit_scale"].double()
    with torch.no_grad():
        g = texts @ texts.T
        g = g * (1 - torch.eye(len(g), dtype=g.dtype))
    logits_i2t = s * (images @ texts.T + gamma * g)
    logits_t2i = s * (texts @ images.T + gamma * g)

    def cross_entropy(logits):
        return -(logits.diagonal() - torch.logsumexp(logits, dim=1)).mean()

    return (cross_entropy(logits_i2t) + cross_entropy(logits_t2i)) / 2


def load_inputs(paths):
    model = load_model(paths["init_model_dir"])
    pixels = to_model_input(np.load(paths["store_dir"] / "images.npy"), model.image_mean, model.image_std)
    captions = list(read_manifest(paths["train_manifest"])["caption"])
    return model, pixels, model.tokenize(captions)


def flat_norm(grads):
    return math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))


def test_first_step_equals_adamw_on_the_mean_of_two_micro_batch_losses(tmp_path):
    paths = make_dataset(tmp_path, n=8)
    lr, eps = 1e-2, 1.0  # eps ~ |g| makes the first AdamW update depend on the gradient's size, not its sign
    cfg = small_config(gamma=GAMMA, lr=lr, eps=eps, max_steps=1, dynamics_every=1)
    run_training(paths, tmp_path, cfg)

    model, pixels, tokens = load_inputs(paths)
    model.train()
    names = [n for n, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    order = np.random.default_rng([cfg.seed, 0]).permutation(8)
    boosted, standard = [], []
    for rows in (order[:4], order[4:]):
        out = model(pixels[rows], tokens[rows])
        boosted.append(hand_loss(out, GAMMA))
        standard.append(hand_loss(out, 0.0))
    grad_boosted = torch.autograd.grad((boosted[0] + boosted[1]) / 2, params, retain_graph=True)
    grad_standard = torch.autograd.grad((standard[0] + standard[1]) / 2, params)

    trained = dict(load_model(tmp_path / "out" / "model").named_parameters())
    moved = 0
    for name, p0, g in zip(names, params, grad_boosted, strict=True):
        expected = p0.detach().double() - lr * g.double() / (g.double().abs() + eps)
        if name == "logit_scale":
            expected = expected.clamp(max=math.log(100))
        got = trained[name].detach().double()
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=2e-7, msg=f"parameter {name}")
        moved += int((got != p0.detach().double()).sum())
    assert moved > 1000

    # sanity of the reference: one 8-sample loss (no accumulation) gives a clearly different gradient
    whole = torch.autograd.grad(hand_loss(model(pixels[order], tokens[order]), GAMMA), params)
    assert abs(flat_norm(whole) - flat_norm(grad_boosted)) > 1e-3 * flat_norm(grad_boosted)

    (row,) = read_csv_rows(tmp_path / "out" / "dynamics.csv")
    assert float(row["loss"]) == pytest.approx(float(sum(boosted).detach()) / 2, rel=1e-5)
    assert float(row["infonce"]) == pytest.approx(float(sum(standard).detach()) / 2, rel=1e-5)
    assert float(row["grad_norm_boosted"]) == pytest.approx(flat_norm(grad_boosted), rel=1e-4)
    assert float(row["grad_norm_standard"]) == pytest.approx(flat_norm(grad_standard), rel=1e-4)
    dot = sum(float((a.double() * b.double()).sum()) for a, b in zip(grad_standard, grad_boosted, strict=True))
    cosine = dot / (flat_norm(grad_standard) * flat_norm(grad_boosted))
    assert float(row["grad_cosine"]) == pytest.approx(cosine, abs=1e-5)
    assert float(row["grad_ratio"]) == pytest.approx(flat_norm(grad_boosted) / flat_norm(grad_standard), rel=1e-4)
    assert abs(float(row["grad_ratio"]) - 1) > 1e-3  # the margin changes the gradient
    assert row["standard_grad_zero"] == "0" and float(row["saturated_fraction"]) == 0.0
    assert (int(row["step"]), int(row["epoch"]), float(row["lr"])) == (1, 1, lr)
    assert float(row["logit_scale"]) == pytest.approx(math.exp(float(params[names.index("logit_scale")].detach())), rel=1e-6)


def test_gamma_zero_logs_identical_standard_and_boosted_gradients(tmp_path):
    paths = make_dataset(tmp_path, n=16)
    run_training(paths, tmp_path, small_config(gamma=0.0, epochs=2, dynamics_every=3))
    rows = read_csv_rows(tmp_path / "out" / "dynamics.csv")
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4]
    assert [int(r["epoch"]) for r in rows] == [1, 1, 2, 2]
    probed = [r for r in rows if r["grad_norm_standard"]]
    assert [int(r["step"]) for r in probed] == [1, 4]  # every 3rd step, counting from the first
    for r in probed:
        assert float(r["grad_ratio"]) == 1.0
        assert float(r["grad_cosine"]) == pytest.approx(1.0, abs=1e-12)
        assert float(r["grad_norm_standard"]) == float(r["grad_norm_boosted"]) > 0
    for r in rows:
        assert r["loss"] == r["infonce"]
        if r not in probed:
            assert all(r[c] == "" for c in ("grad_norm_standard", "grad_ratio", "grad_cosine", "saturated_fraction"))


def test_infonce_column_is_the_standard_loss_of_the_whole_batch(tmp_path):
    # one micro-batch holding the whole set: the logged InfoNCE does not depend on the data order
    paths = make_dataset(tmp_path, n=8, seed=7)
    run_training(paths, tmp_path, small_config(gamma=0.8, micro_batch=8, accum_steps=1, max_steps=1))
    model, pixels, tokens = load_inputs(paths)
    with torch.no_grad():
        out = model.train()(pixels, tokens)
        expected_infonce, expected_loss = float(hand_loss(out, 0.0)), float(hand_loss(out, 0.8))
    (row,) = read_csv_rows(tmp_path / "out" / "dynamics.csv")
    assert float(row["infonce"]) == pytest.approx(expected_infonce, rel=1e-5)
    assert float(row["loss"]) == pytest.approx(expected_loss, rel=1e-5)
    assert expected_loss > expected_infonce  # boosted negatives raise the loss


def test_frozen_margin_uses_the_initial_text_features_after_the_encoder_changed(tmp_path, monkeypatch):
    paths = make_dataset(tmp_path, n=16)
    calls = []
    real_loss = HNClipLoss.global_loss  # where every framework's global term is computed

    def recording_loss(self, image_features, text_features, logit_scale, margin_text_features=None):
        if self.gamma:
            calls.append((text_features.detach().clone(), margin_text_features.detach().clone()))
        return real_loss(self, image_features, text_features, logit_scale, margin_text_features)

    monkeypatch.setattr(HNClipLoss, "global_loss", recording_loss)
    cfg = small_config(gamma=GAMMA, margin="frozen", epochs=2, lr=5e-2)
    run_training(paths, tmp_path, cfg)

    model, _, tokens = load_inputs(paths)
    with torch.no_grad():
        initial = model.eval().encode_text(tokens)
    assert len(calls) == 8  # 2 epochs x 2 steps x 2 micro-batches
    for index, (_current, margin) in enumerate(calls):
        epoch, micro = divmod(index, 4)
        rows = np.random.default_rng([cfg.seed, epoch]).permutation(16)[micro * 4:(micro + 1) * 4]
        torch.testing.assert_close(margin, initial[rows], rtol=0, atol=1e-6, msg=f"call {index}")
    # the encoder did move: by the last micro-batch, current features are far from the frozen ones
    last_rows = np.random.default_rng([cfg.seed, 1]).permutation(16)[12:16]
    assert (calls[-1][0] - initial[last_rows]).abs().max() > 1e-2


def test_recompute_margin_passes_no_margin_features(tmp_path, monkeypatch):
    paths = make_dataset(tmp_path, n=8)
    seen = []
    real_loss = HNClipLoss.global_loss

    def recording_loss(self, image_features, text_features, logit_scale, margin_text_features=None):
        seen.append((self.gamma, margin_text_features))
        return real_loss(self, image_features, text_features, logit_scale, margin_text_features)

    monkeypatch.setattr(HNClipLoss, "global_loss", recording_loss)
    run_training(paths, tmp_path, small_config(gamma=GAMMA, max_steps=1))
    assert [g for g, _ in seen] == [GAMMA, 0.0, GAMMA, 0.0]  # objective and InfoNCE log, per micro-batch
    assert all(m is None for _, m in seen)
