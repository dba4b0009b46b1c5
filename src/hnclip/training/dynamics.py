"""Gradient dynamics: the standard InfoNCE gradient vs the trained (boosted) objective's, per step.

The paper's diagnostic: on dense captions InfoNCE saturates (loss -> 0 and its gradient underflows),
while the HN margin keeps hard negatives' logits up and the gradient alive. Both gradients are taken
with ``torch.autograd.grad`` on the real step's graph, so they see exactly the step's micro-batches
(and dropout masks) and never touch ``.grad``. Cost on a probed step: two extra backward passes per
micro-batch (one when the two objectives coincide) and two fp32 copies of the trainable parameters.
"""

from __future__ import annotations

import math

import torch

__all__ = ["DYNAMICS_COLUMNS", "SATURATION_LOSS", "GradientProbe"]

DYNAMICS_COLUMNS = ("step", "epoch", "lr", "logit_scale", "loss", "infonce", "grad_norm_standard",
                    "grad_norm_boosted", "grad_ratio", "grad_cosine", "standard_grad_zero", "saturated_fraction")
SATURATION_LOSS = 1e-3  # a micro-batch whose standard loss is below this counts as saturated


class GradientProbe:
    """Accumulates d(standard)/dθ and d(boosted)/dθ over a step's micro-batches, each scaled by ``scale``."""

    def __init__(self, params: list[torch.Tensor]):
        self.params = params
        self.standard = [torch.zeros_like(p, dtype=torch.float32) for p in params]
        self.boosted = [torch.zeros_like(p, dtype=torch.float32) for p in params]
        self.standard_losses: list[float] = []

    def _accumulate(self, buffers, grads, scale: float) -> None:
        for buffer, grad in zip(buffers, grads, strict=True):
            if grad is not None:  # None: the parameter does not reach this loss
                buffer.add_(grad.float(), alpha=scale)

    def add(self, standard_loss: torch.Tensor, boosted_loss: torch.Tensor, scale: float) -> None:
        """Add one micro-batch; the graph is retained for the real backward that follows."""
        self.standard_losses.append(float(standard_loss.detach()))
        standard = torch.autograd.grad(standard_loss, self.params, retain_graph=True, allow_unused=True)
        self._accumulate(self.standard, standard, scale)
        if boosted_loss is standard_loss:  # gamma = 0 and no token term: same objective, same gradient
            self._accumulate(self.boosted, standard, scale)
            return
        boosted = torch.autograd.grad(boosted_loss, self.params, retain_graph=True, allow_unused=True)
        self._accumulate(self.boosted, boosted, scale)

    def summary(self) -> dict[str, float | int]:
        """The dynamics columns of the step; norms and dot product in float64 (no underflow of squares)."""
        norm_standard_sq = sum(float(g.double().pow(2).sum()) for g in self.standard)
        norm_boosted_sq = sum(float(g.double().pow(2).sum()) for g in self.boosted)
        dot = sum(float((s.double() * b.double()).sum()) for s, b in zip(self.standard, self.boosted, strict=True))
        norm_standard, norm_boosted = math.sqrt(norm_standard_sq), math.sqrt(norm_boosted_sq)
        ratio = norm_boosted / norm_standard if norm_standard > 0 else (math.inf if norm_boosted > 0 else math.nan)
        denominator = norm_standard * norm_boosted
        saturated = sum(loss < SATURATION_LOSS for loss in self.standard_losses)
        return {
            "grad_norm_standard": norm_standard,
            "grad_norm_boosted": norm_boosted,
            "grad_ratio": ratio,
            "grad_cosine": dot / denominator if denominator > 0 else math.nan,
            "standard_grad_zero": int(norm_standard == 0.0),
            "saturated_fraction": saturated / max(1, len(self.standard_losses)),
        }
