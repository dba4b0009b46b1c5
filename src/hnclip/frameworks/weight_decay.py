"""AdamW's two parameter groups of a module: weight decay on its matrices, none on biases, norms, embeddings,
the logit scale. Every framework's :meth:`~hnclip.frameworks.base.Framework.param_groups` builds on them (each
group with its rate from the run's settings), and the training loop only hands the groups to AdamW
(:func:`hnclip.training.schedule.build_optimizer`): the learning rate goes from the settings to the optimizer
downwards, without the frameworks reaching back into the training package."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["is_no_decay", "param_groups"]

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
