"""Warmup + cosine (or constant) multipliers against hand values; which parameters get weight decay and
which learning rate; the recipe a run records."""

from __future__ import annotations

import math

import pytest
import torch

from hnclip.config.train import TrainConfig
from hnclip.frameworks.base import Framework
from hnclip.training.schedule import build_optimizer, build_scheduler, describe_recipe, lr_multiplier


def test_warmup_is_linear_from_the_first_step_then_cosine_to_the_floor():
    # warmup 4, total 14: steps 0..3 -> 1/4..4/4; then cos over 10 steps from 1 to 0.1
    assert [lr_multiplier(s, 4, 14, 0.1) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_multiplier(4, 4, 14, 0.1) == pytest.approx(1.0)
    assert lr_multiplier(9, 4, 14, 0.1) == pytest.approx(0.1 + 0.9 * 0.5)  # halfway: cos(pi/2) = 0
    assert lr_multiplier(13, 4, 14, 0.1) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.9)))
    assert lr_multiplier(100, 4, 14, 0.1) == pytest.approx(0.1)


def test_no_warmup_starts_at_the_peak():
    # GOAL / StructXLIP: lr = init_lr * 0.5 * (1 + cos(pi * it / total)) from it = 0
    assert lr_multiplier(0, 0, 10, 0.0) == 1.0
    assert lr_multiplier(5, 0, 10, 0.0) == pytest.approx(0.5)
    assert lr_multiplier(3, 0, 10, 0.0) == pytest.approx(0.5 * (1 + math.cos(math.pi * 3 / 10)))


def test_constant_schedule_holds_the_peak_after_warmup():
    assert [lr_multiplier(s, 2, 10, 0.0, "constant") for s in range(5)] == [0.5, 1.0, 1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="unknown schedule 'step'"):
        lr_multiplier(3, 0, 10, 0.0, "step")


def test_scheduler_applies_the_multiplier_per_optimizer_step():
    param = torch.nn.Parameter(torch.zeros(2, 2))
    cfg = TrainConfig(lr=2.0, warmup_steps=2, min_lr_ratio=0.0)
    optimizer = torch.optim.AdamW([param], lr=cfg.lr)
    scheduler = build_scheduler(optimizer, cfg, total_steps=6)
    seen = []
    for _ in range(6):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    expected = [1.0, 2.0] + [2.0 * 0.5 * (1 + math.cos(math.pi * k / 4)) for k in range(4)]
    assert seen == pytest.approx(expected)


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embedding = torch.nn.Embedding(10, 4)
        self.positional_embedding_trainable = torch.nn.Parameter(torch.zeros(5, 4))
        self.proj = torch.nn.Linear(4, 4)
        self.ln_final = torch.nn.LayerNorm(4)
        self.logit_scale = torch.nn.Parameter(torch.tensor(2.0))
        self.frozen = torch.nn.Parameter(torch.zeros(4, 4), requires_grad=False)


def test_weight_decay_only_on_trainable_matrices_that_are_not_embeddings():
    model = Tiny()
    cfg = TrainConfig(weight_decay=0.1, lr=1e-3)
    optimizer = build_optimizer(Framework(cfg).param_groups(model), cfg)
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {g["name"]: (g["weight_decay"], sorted(names[id(p)] for p in g["params"]))
              for g in optimizer.param_groups}
    assert groups["decay"] == (0.1, ["proj.weight"])
    assert groups["no_decay"] == (0.0, sorted(["token_embedding.weight", "positional_embedding_trainable",
                                               "proj.bias", "ln_final.weight", "ln_final.bias", "logit_scale"]))
    assert all(g["lr"] == 1e-3 for g in optimizer.param_groups)
    assert optimizer.defaults["betas"] == (0.9, 0.98) and optimizer.defaults["eps"] == 1e-6


def test_the_recorded_recipe_reads_the_optimizer_as_built():
    model = Tiny()
    cfg = TrainConfig(lr=1e-6, weight_decay=0.01, warmup_steps=200, label_smoothing=0.1, beta2=0.999, eps=1e-8)
    optimizer = build_optimizer(Framework(cfg).param_groups(model), cfg)
    scheduler = build_scheduler(optimizer, cfg, total_steps=1000)
    optimizer.step()
    scheduler.step()  # the lr moved: the recipe keeps the peak
    recipe = describe_recipe(cfg, optimizer, 1000)
    assert {k: recipe[k] for k in ("lr", "weight_decay", "warmup_steps", "schedule", "label_smoothing", "eps")} == \
        {"lr": 1e-6, "weight_decay": 0.01, "warmup_steps": 200, "schedule": "cosine", "label_smoothing": 0.1, "eps": 1e-8}
    assert recipe["betas"] == [0.9, 0.999] and recipe["total_steps"] == 1000 and recipe["effective_batch"] == 128
    assert [(g["name"], g["lr"], g["weight_decay"], g["parameters"]) for g in recipe["groups"]] == \
        [("decay", 1e-6, 0.01, 16), ("no_decay", 1e-6, 0.0, 10 * 4 + 5 * 4 + 4 + 4 + 4 + 1)]


def _adamw_float64(params, grads_per_step, lrs, weight_decays, betas, eps):
    """AdamW transcribed from Loshchilov & Hutter (decoupled decay), in torch's bias-corrected form, float64."""
    beta1, beta2 = betas
    params = [p.double().clone() for p in params]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs, strict=True), start=1):
        for i, (p, g, wd) in enumerate(zip(params, grads, weight_decays, strict=True)):
            g = g.double()
            p.mul_(1 - lr * wd)
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            denom = v[i].sqrt() / math.sqrt(1 - beta2 ** t) + eps
            p.sub_(lr / (1 - beta1 ** t) * m[i] / denom)
    return params


def test_the_optimizer_is_adamw_and_its_fused_update_is_the_per_tensor_one():
    """build_optimizer takes torch's fused update on the CPU (benchmarks/optimizer_step.py times it) and it
    gives the per-tensor loop's weights within float32 rounding, and AdamW's float64 transcription to float32
    precision."""
    cfg = TrainConfig(lr=1e-2, weight_decay=0.1, warmup_steps=2, beta2=0.98, eps=1e-6)
    generator = torch.Generator().manual_seed(0)
    grads = [[torch.randn(p.shape, generator=generator) for p in Tiny().parameters() if p.requires_grad]
             for _ in range(6)]

    def run(make_optimizer):
        torch.manual_seed(3)
        model = Tiny()
        optimizer = make_optimizer(Framework(cfg).param_groups(model))
        scheduler = build_scheduler(optimizer, cfg, total_steps=6)
        params = [p for p in model.parameters() if p.requires_grad]
        start = [p.detach().clone() for p in params]
        lrs = []
        for step_grads in grads:
            for p, g in zip(params, step_grads, strict=True):
                p.grad = g.clone()
            lrs.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
        decay = {id(p) for g in optimizer.param_groups if g["weight_decay"] > 0 for p in g["params"]}
        return start, [p.detach() for p in params], lrs, [cfg.weight_decay if id(p) in decay else 0.0 for p in params]

    start, built, lrs, weight_decays = run(lambda groups: build_optimizer(groups, cfg))
    _, per_tensor, _, _ = run(lambda groups: torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                                                               eps=cfg.eps, foreach=False))
    for got, loop in zip(built, per_tensor, strict=True):
        torch.testing.assert_close(got, loop, rtol=1e-6, atol=1e-7)
    reference = _adamw_float64(start, grads, lrs, weight_decays, (cfg.beta1, cfg.beta2), cfg.eps)
    assert lrs[0] == pytest.approx(5e-3) and 0.1 in weight_decays and 0.0 in weight_decays
    for got, want, first in zip(built, reference, start, strict=True):
        assert not torch.equal(got, first)
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
