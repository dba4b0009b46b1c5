"""AdamW parameter groups and the warmup + cosine learning-rate schedule (per optimizer step)."""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["build_optimizer", "build_scheduler", "is_no_decay", "lr_multiplier", "param_groups"]

# name segments whose parameters get no weight decay: shrinking a norm's gain, a bias, an embedding
# table or the temperature towards zero is not regularisation, it just fights the loss
_NO_DECAY_SEGMENTS = ("bias", "logit_scale", "lora_magnitude_vector")


def is_no_decay(name: str, param: torch.Tensor) -> bool:
    """True for biases, norms, embeddings, the logit scale and every tensor with fewer than 2 dims."""
    if param.ndim < 2:
        return True
    for segment in name.split("."):
        if segment in _NO_DECAY_SEGMENTS or "embedding" in segment or "norm" in segment:
            return True
        if segment.startswith("ln_") or segment.startswith("bn"):  # open_clip: ln_1, ln_final, ln_post
            return True
    return False


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups over the trainable parameters, in ``named_parameters`` order (stable)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (no_decay if is_no_decay(name, param) else decay).append(param)
    if not decay and not no_decay:
        raise ValueError("the model has no trainable parameters")
    groups = [{"params": decay, "weight_decay": weight_decay, "name": "decay"},
              {"params": no_decay, "weight_decay": 0.0, "name": "no_decay"}]
    return [g for g in groups if g["params"]]


def build_optimizer(model_or_groups, cfg) -> torch.optim.AdamW:
    """AdamW over ``model_or_groups``: a framework's parameter groups (each with its own ``lr``), or a
    model, whose groups then train at its framework's base lr (``adapter_lr`` for LoRA/DoRA, else ``lr``).
    """
    if isinstance(model_or_groups, nn.Module):
        from hnclip.frameworks import get_framework_class

        lr = get_framework_class(cfg.framework).base_lr(cfg)
        groups = [dict(g, lr=lr) for g in param_groups(model_or_groups, cfg.weight_decay)]
    else:
        groups = list(model_or_groups)
        if not groups or any("lr" not in g for g in groups):
            raise ValueError("build_optimizer needs a model or a non-empty list of parameter groups, each "
                             "with its own 'lr'")
    return torch.optim.AdamW(groups, lr=groups[0]["lr"], betas=(cfg.beta1, cfg.beta2), eps=cfg.eps)


def lr_multiplier(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float) -> float:
    """Factor on the peak lr for optimizer step ``step`` (0-based).

    Warmup: (step + 1) / warmup_steps, so the first step already moves. Then a half cosine from 1 to
    ``min_lr_ratio`` over the remaining steps.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    decay_steps = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay_steps)
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(optimizer: torch.optim.Optimizer, cfg, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    # a named function, not a lambda: only the scheduler's counters go into the checkpoint either way
    def factor(step: int) -> float:
        return lr_multiplier(step, cfg.warmup_steps, total_steps, cfg.min_lr_ratio)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
