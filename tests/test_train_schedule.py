"""Warmup + cosine (or constant) multipliers against hand values; which parameters get weight decay and
which learning rate; the recipe a run records."""

from __future__ import annotations

import math

import pytest
import torch

from hnclip.frameworks.base import Framework
from hnclip.train_config import TrainConfig
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
