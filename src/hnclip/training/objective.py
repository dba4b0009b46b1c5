"""One micro-batch's objective: the framework's loss terms beside plain InfoNCE (the dynamics' reference),
the module DDP wraps around a micro-batch's forward, the frozen-margin caption features and the clamp of
the logit scale after each step."""

from __future__ import annotations

import math

import torch
from torch import nn
from tqdm import tqdm

from hnclip.config.train import TrainConfig
from hnclip.frameworks.base import Batch, Framework
from hnclip.losses import HNClipLoss
from hnclip.training.runtime import autocast

__all__ = ["MAX_LOG_LOGIT_SCALE", "STANDARD_INFONCE", "TrainStep", "clamp_logit_scale", "compute_objective",
           "encode_captions"]

MAX_LOG_LOGIT_SCALE = math.log(100.0)  # CLIP's cap on the temperature multiplier
# the dynamics' reference: plain InfoNCE on the global features (no margin, no smoothing), the quantity
# whose saturation the paper diagnoses; over the global micro-batch under torchrun
STANDARD_INFONCE = HNClipLoss(gamma=0.0)


@torch.no_grad()
def encode_captions(model, tokens: torch.Tensor, device, amp_dtype, batch_size: int = 64) -> torch.Tensor:
    """Normalised float32 text features [N, D] of ``tokens``: the frozen-margin source, computed once."""
    was_training = model.training
    model.eval()
    chunks = []
    for start in tqdm(range(0, len(tokens), batch_size), desc="frozen margin features", leave=False):
        with autocast(device, amp_dtype):
            chunks.append(model.encode_text(tokens[start:start + batch_size].to(device)).float())
    model.train(was_training)
    return torch.cat(chunks)


def compute_objective(out: dict, cfg: TrainConfig, margin_features=None, standard_with_grad: bool = False,
                      framework: Framework | None = None, batch: Batch | None = None):
    """(trained objective, standard InfoNCE) of one micro-batch from the framework's outputs ``out``.

    The trained objective is the sum of ``framework.loss_terms`` (default framework: the global term,
    HN when gamma > 0, plus the token term), computed in float32 outside autocast. The standard value
    is plain InfoNCE on the global features (no margin, no label smoothing): the trained objective
    itself when the two coincide (only a global term, gamma = 0, no smoothing), else computed
    alongside, with a graph only if asked for. Under data parallelism both span the global
    micro-batch (every rank must call this: it gathers).
    """
    framework = framework if framework is not None else Framework(cfg)
    terms = framework.loss_terms(out, batch, margin_features)
    loss = sum(terms.values())
    if list(terms) == ["global"] and cfg.gamma == 0 and cfg.label_smoothing == 0:
        return loss, loss
    images, texts, scale = out["image_features"].float(), out["text_features"].float(), out["logit_scale"].float()
    if standard_with_grad:
        return loss, STANDARD_INFONCE.global_loss(images, texts, scale)
    with torch.no_grad():
        return loss, STANDARD_INFONCE.global_loss(images.detach(), texts.detach(), scale.detach())


def clamp_logit_scale(model) -> None:
    """Hold every ``logit_scale`` at or below CLIP's cap (:data:`MAX_LOG_LOGIT_SCALE`), after each step."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.split(".")[-1] == "logit_scale":
                param.clamp_(max=MAX_LOG_LOGIT_SCALE)


class TrainStep(nn.Module):
    """One micro-batch's forward and objective, over the model and the framework's modules together.

    One module so that DistributedDataParallel covers every trainable parameter (the framework's own
    modules too) and a framework's several forward passes per micro-batch (short captions, crops,
    edge maps) run inside one DDP forward. On a single process it is called directly.
    """

    def __init__(self, model: nn.Module, framework: Framework, cfg: TrainConfig, device: torch.device,
                 amp_dtype: torch.dtype | None):
        super().__init__()
        self.model, self.framework = model, framework
        self.cfg, self.device, self.amp_dtype = cfg, device, amp_dtype

    def forward(self, batch: Batch, margin_features, standard_with_grad: bool):
        with autocast(self.device, self.amp_dtype):
            out = self.framework.encode(self.model, batch)
        loss, standard = compute_objective(out, self.cfg, margin_features, standard_with_grad=standard_with_grad,
                                           framework=self.framework, batch=batch)
        # detached features feed the probe's exact-zero measurements (hnclip.training.dynamics)
        features = (out["image_features"].detach(), out["text_features"].detach(), out["logit_scale"].detach())
        return loss, standard, out["logit_scale"].detach(), features
