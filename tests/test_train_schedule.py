"""Warmup + cosine multipliers against hand values; which parameters get weight decay."""

from __future__ import annotations

import math

import pytest
import torch

from hnclip.train_config import TrainConfig
from hnclip.training.schedule import build_optimizer, build_scheduler, lr_multiplier


def test_warmup_is_linear_from_the_first_step_then_cosine_to_the_floor():
    # warmup 4, total 14: steps 0..3 -> 1/4..4/4; then cos over 10 steps from 1 to 0.1
    assert [lr_multiplier(s, 4, 14, 0.1) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_multiplier(4, 4, 14, 0.1) == pytest.approx(1.0)
    assert lr_multiplier(9, 4, 14, 0.1) == pytest.approx(0.1 + 0.9 * 0.5)  # halfway: cos(pi/2) = 0
    assert lr_multiplier(13, 4, 14, 0.1) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.9)))
    assert lr_multiplier(100, 4, 14, 0.1) == pytest.approx(0.1)


def test_no_warmup_starts_at_the_peak():
    assert lr_multiplier(0, 0, 10, 0.0) == 1.0
    assert lr_multiplier(5, 0, 10, 0.0) == pytest.approx(0.5)


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
    optimizer = build_optimizer(model, TrainConfig(weight_decay=0.1, lr=1e-3))
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {g["name"]: (g["weight_decay"], sorted(names[id(p)] for p in g["params"]))
              for g in optimizer.param_groups}
    assert groups["decay"] == (0.1, ["proj.weight"])
    assert groups["no_decay"] == (0.0, sorted(["token_embedding.weight", "positional_embedding_trainable",
                                               "proj.bias", "ln_final.weight", "ln_final.bias", "logit_scale"]))
    assert all(g["lr"] == 1e-3 for g in optimizer.param_groups)


def test_adapter_frameworks_use_the_adapter_lr():
    optimizer = build_optimizer(Tiny(), TrainConfig(framework="lora", lr=1e-5, adapter_lr=3e-4))
    assert {g["lr"] for g in optimizer.param_groups} == {3e-4}
