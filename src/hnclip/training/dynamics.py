"""Gradient dynamics: the standard InfoNCE gradient vs the trained (boosted) objective's, per step.

The paper's diagnostic: on dense captions InfoNCE saturates (loss -> 0 and its gradient underflows),
while the HN margin keeps hard negatives' logits up and the gradient alive. Both gradients are taken
with ``torch.autograd.grad`` on the real step's graph, so they see exactly the step's micro-batches
(and dropout masks) and never touch ``.grad``. Cost on a probed step: two extra backward passes per
micro-batch (one when the two objectives coincide) and two fp32 copies of the trainable parameters.

Two kinds of columns:

- every step, from the micro-batch losses the loop computes anyway (:func:`step_saturation`):
  ``saturated_share``, the share of the step's micro-batches whose standard InfoNCE is below
  :data:`SATURATION_LOSS`, and ``objective_active_share``, the share whose trained loss is not; and
  ``infonce_micro``, each micro-batch's standard InfoNCE (:mod:`hnclip.dynamics_log`), which says which
  of them saturated;
- probed steps (:class:`GradientProbe`): gradient norms, their ratio and cosine, and the exact-zero
  measurements (:func:`exact_zero_flags`, :func:`is_zero_norm`): for each micro-batch, whether the
  standard InfoNCE's loss, its positive-logit gradient, its feature gradient and its parameter
  gradient's norm are exactly 0.0 when computed in fp32 and in bf16. A column ``zero_<quantity>_<dtype>``
  is the share of the step's micro-batches where that quantity is exactly zero.

Why four quantities: with fp32 logits the loss rounds to 0.0 once every negative trails the positive
by about 17 + ln(B) logits (log(1 + x) == 0 for x below 2^-24), and so does the positive's gradient
p - 1; a negative's gradient exp(l_j - lse) is 0.0 only once it underflows (a gap of ~104 logits, a
cosine gap above 1 at s = 100), so the feature gradient almost never vanishes. Torch's fp32 norm of a
parameter gradient squares the elements without rescaling, so it is 0.0 as soon as every element is
below ~2.6e-23 (its square below the smallest fp32 subnormal, 2^-149): "the gradient reaches exact
zero in fp32" as a logged gradient norm shows it. bf16 has fp32's exponent range but 8 significant
bits, so the loss and the positive's gradient vanish at far smaller gaps there.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from hnclip.dynamics_log import (
    DYNAMICS_COLUMNS,
    EXACT_ZERO_COLUMNS,
    EXACT_ZERO_DTYPE_NAMES,
    EXACT_ZERO_QUANTITIES,
    SATURATION_LOSS,
)

__all__ = ["DYNAMICS_COLUMNS", "EXACT_ZERO_COLUMNS", "EXACT_ZERO_DTYPES", "EXACT_ZERO_QUANTITIES",
           "SATURATION_LOSS", "GradientProbe", "exact_zero_flags", "is_zero_norm", "step_saturation"]

EXACT_ZERO_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
assert tuple(EXACT_ZERO_DTYPES) == EXACT_ZERO_DTYPE_NAMES


def step_saturation(trained_losses: list[float], standard_losses: list[float]) -> dict[str, float]:
    """Every step's saturation columns, from its micro-batches' trained and standard losses.

    ``saturated_share``: share of micro-batches with standard InfoNCE < :data:`SATURATION_LOSS` (the
    paper's "loss below 1e-3 on 80 % of batches"). ``objective_active_share``: share whose *trained* loss is
    still >= :data:`SATURATION_LOSS` (for an HN run, the boosted objective still has signal there).
    """
    if len(trained_losses) != len(standard_losses) or not trained_losses:
        raise ValueError(f"need one trained and one standard loss per micro-batch, got {len(trained_losses)} "
                         f"and {len(standard_losses)}")
    n = len(standard_losses)
    return {"saturated_share": sum(v < SATURATION_LOSS for v in standard_losses) / n,
            "objective_active_share": sum(v >= SATURATION_LOSS for v in trained_losses) / n}


def exact_zero_flags(image_features: torch.Tensor, text_features: torch.Tensor, logit_scale,
                     dtype: torch.dtype) -> dict[str, bool]:
    """Whether the standard InfoNCE of one micro-batch, computed in ``dtype``, has exactly-zero parts.

    The features (L2-normalised [B, D]) and the scale s are rounded to ``dtype``; the logits
    (s * v) @ t^T and (s * t) @ v^T, the symmetric cross-entropy and its gradients are computed in
    ``dtype`` (on CPU, PyTorch's bf16 kernels). Returns ``loss`` (the loss == 0.0),
    ``positive_logit_grad`` (every diagonal entry of d loss / d logits, both directions, == 0.0) and
    ``feature_grad`` (every entry of d loss / d features, both towers, == 0.0). Nothing here
    touches the caller's graph.
    """
    with torch.enable_grad():
        images = image_features.detach().to(dtype).requires_grad_(True)
        texts = text_features.detach().to(dtype).requires_grad_(True)
        scale = torch.as_tensor(logit_scale).detach().to(dtype)
        logits_i2t = (scale * images) @ texts.T
        logits_t2i = (scale * texts) @ images.T
        labels = torch.arange(images.shape[0], device=images.device)
        loss = (F.cross_entropy(logits_i2t, labels) + F.cross_entropy(logits_t2i, labels)) / 2
        grad_i2t, grad_t2i, grad_images, grad_texts = torch.autograd.grad(
            loss, (logits_i2t, logits_t2i, images, texts))
    return {
        "loss": bool(loss == 0),
        "positive_logit_grad": bool((grad_i2t.diagonal() == 0).all() and (grad_t2i.diagonal() == 0).all()),
        "feature_grad": bool((grad_images == 0).all() and (grad_texts == 0).all()),
    }


def is_zero_norm(grads, dtype: torch.dtype) -> bool:
    """Whether the global L2 norm of ``grads``, as torch computes it in ``dtype``, is exactly 0.0.

    Each gradient is rounded to ``dtype`` and its norm taken with ``torch.linalg.vector_norm`` (what
    ``clip_grad_norm_`` logs): no rescaling, so the norm underflows to 0.0 once every element is below
    ~2.6e-23 even though the gradient itself is not zero. ``None`` entries (parameters the loss does
    not reach) count as zero.
    """
    norms = [torch.linalg.vector_norm(g.detach().to(dtype)) for g in grads if g is not None]
    return not norms or bool(torch.linalg.vector_norm(torch.stack(norms)) == 0)


class GradientProbe:
    """Accumulates d(standard)/dθ and d(boosted)/dθ over a step's micro-batches, each scaled by ``scale``."""

    def __init__(self, params: list[torch.Tensor]):
        self.params = params
        self.standard = [torch.zeros_like(p, dtype=torch.float32) for p in params]
        self.boosted = [torch.zeros_like(p, dtype=torch.float32) for p in params]
        self.standard_losses: list[float] = []
        self.zero_flags: list[dict[str, bool]] = []  # one per micro-batch with features given

    def _accumulate(self, buffers, grads, scale: float) -> None:
        for buffer, grad in zip(buffers, grads, strict=True):
            if grad is not None:  # None: the parameter does not reach this loss
                buffer.add_(grad.float(), alpha=scale)

    def add(self, standard_loss: torch.Tensor, boosted_loss: torch.Tensor, scale: float,
            features: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> None:
        """Add one micro-batch; the graph is retained for the real backward that follows.

        ``features``: (image features, text features, logit scale) of the micro-batch, for the
        exact-zero measurements. Under torchrun they are this rank's share and are gathered here
        (every rank calls this on a probed step); the parameter-gradient flag then describes this
        rank's share of the gradient (rank 0's is logged).
        """
        self.standard_losses.append(float(standard_loss.detach()))
        standard = torch.autograd.grad(standard_loss, self.params, retain_graph=True, allow_unused=True)
        self._accumulate(self.standard, standard, scale)
        if features is not None:
            from hnclip.losses import gather_features

            images, texts, logit_scale = features
            images = gather_features(images.detach(), with_grad=False)
            texts = gather_features(texts.detach(), with_grad=False)
            flags = {}
            for name, dtype in EXACT_ZERO_DTYPES.items():
                for quantity, value in exact_zero_flags(images, texts, logit_scale, dtype).items():
                    flags[f"zero_{quantity}_{name}"] = value
                flags[f"zero_param_grad_{name}"] = is_zero_norm(standard, dtype)
            self.zero_flags.append(flags)
        if boosted_loss is standard_loss:  # gamma = 0 and no token term: same objective, same gradient
            self._accumulate(self.boosted, standard, scale)
            return
        boosted = torch.autograd.grad(boosted_loss, self.params, retain_graph=True, allow_unused=True)
        self._accumulate(self.boosted, boosted, scale)

    def summary(self) -> dict[str, float | int]:
        """The probed step's columns; norms and dot product in float64 (no underflow of squares), plus
        the step's standard gradient norm as torch computes it in fp32 (0.0 once it underflows)."""
        norm_standard_sq = sum(float(g.double().pow(2).sum()) for g in self.standard)
        norm_boosted_sq = sum(float(g.double().pow(2).sum()) for g in self.boosted)
        dot = sum(float((s.double() * b.double()).sum()) for s, b in zip(self.standard, self.boosted, strict=True))
        norm_standard, norm_boosted = math.sqrt(norm_standard_sq), math.sqrt(norm_boosted_sq)
        ratio = norm_boosted / norm_standard if norm_standard > 0 else (math.inf if norm_boosted > 0 else math.nan)
        denominator = norm_standard * norm_boosted
        saturated = sum(loss < SATURATION_LOSS for loss in self.standard_losses)
        norm_fp32 = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in self.standard])))
        row = {
            "grad_norm_standard": norm_standard,
            "grad_norm_boosted": norm_boosted,
            "grad_ratio": ratio,
            "grad_cosine": dot / denominator if denominator > 0 else math.nan,
            "standard_grad_zero": int(norm_standard == 0.0),
            "saturated_fraction": saturated / max(1, len(self.standard_losses)),
            "grad_norm_standard_fp32": norm_fp32,
        }
        for column in EXACT_ZERO_COLUMNS:
            row[column] = (sum(f[column] for f in self.zero_flags) / len(self.zero_flags)
                           if self.zero_flags else math.nan)
        return row
