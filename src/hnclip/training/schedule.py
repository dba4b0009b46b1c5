"""AdamW over a framework's parameter groups (:mod:`hnclip.frameworks.weight_decay` splits them by decay), the
warmup + cosine (or constant) learning-rate schedule per optimizer step, and the run's effective recipe as it is
recorded in ``summary.json``."""

from __future__ import annotations

import math

import torch

__all__ = ["build_optimizer", "build_scheduler", "describe_recipe", "lr_multiplier"]

# devices on which build_optimizer takes torch's fused AdamW
FUSED_DEVICES = ("cpu", "cuda", "mps")


def build_optimizer(groups: list[dict], cfg) -> torch.optim.AdamW:
    """AdamW over a framework's parameter groups (:meth:`hnclip.frameworks.base.Framework.param_groups`),
    each with its own ``lr``, with the run's betas and epsilon.

    torch's fused update (one kernel per tensor) where every parameter sits on a device it has one for
    (CPU, CUDA, MPS): on the CPU the default per-tensor loop costs ~8x and the multi-tensor (``foreach``)
    one ~6x as much per step on the toy's 62 tensors, most of it the token table's 3.2M entries
    (``benchmarks/optimizer_step.py``): ~3 s of a ~45 s toy training job. It is the same update within float32
    rounding (tests/test_train_schedule.py: the per-tensor loop and a float64 transcription of AdamW).
    Elsewhere the multi-tensor update.
    """
    groups = list(groups)
    if not groups or any("lr" not in g for g in groups):
        raise ValueError("build_optimizer needs a non-empty list of parameter groups, each with its own 'lr'")
    params = [p for g in groups for p in g["params"]]
    fused = all(p.is_floating_point() and p.device.type in FUSED_DEVICES for p in params)
    return torch.optim.AdamW(groups, lr=groups[0]["lr"], betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
                             **({"fused": True} if fused else {"foreach": True}))


def lr_multiplier(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float,
                  schedule: str = "cosine") -> float:
    """Factor on the peak lr for optimizer step ``step`` (0-based).

    Warmup: (step + 1) / warmup_steps, so the first step already moves. Then a half cosine from 1 to
    ``min_lr_ratio`` over the remaining steps (``cosine``), or 1 (``constant``). Without warmup the
    cosine starts at 1 on the first step, as GOAL's and StructXLIP's per-step cosines do.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    if schedule != "cosine":
        raise ValueError(f"unknown schedule {schedule!r}; known: cosine, constant")
    decay_steps = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay_steps)
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(optimizer: torch.optim.Optimizer, cfg, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    # a named function, not a lambda: only the scheduler's counters go into the checkpoint either way
    def factor(step: int) -> float:
        return lr_multiplier(step, cfg.warmup_steps, total_steps, cfg.min_lr_ratio, cfg.schedule)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def describe_recipe(cfg, optimizer: torch.optim.Optimizer, total_steps: int) -> dict:
    """The run's effective optimisation recipe: the settings behind it and each AdamW group as built.

    ``groups`` reads the optimizer itself (peak lr from the scheduler's ``initial_lr``, decay, size),
    so a framework that sets its own rates cannot be misreported.
    """
    groups = []
    for group in optimizer.param_groups:
        groups.append({"name": group.get("name", ""), "lr": group.get("initial_lr", group["lr"]),
                       "weight_decay": group["weight_decay"], "tensors": len(group["params"]),
                       "parameters": sum(p.numel() for p in group["params"])})
    return {"lr": cfg.lr, "module_lr": cfg.module_lr, "weight_decay": cfg.weight_decay,
            "warmup_steps": cfg.warmup_steps, "schedule": cfg.schedule, "min_lr_ratio": cfg.min_lr_ratio,
            "total_steps": total_steps, "label_smoothing": cfg.label_smoothing, "grad_clip": cfg.grad_clip,
            "betas": [cfg.beta1, cfg.beta2], "eps": cfg.eps, "effective_batch": cfg.effective_batch,
            "groups": groups}
