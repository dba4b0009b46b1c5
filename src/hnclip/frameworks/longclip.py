"""Long-CLIP fine-tuning: every weight trained with the global InfoNCE on the long captions.

This is the paper's "Long-CLIP FT" baseline ("global InfoNCE on long captions"): with the default
``longclip.short_weight = 0`` the framework adds nothing to the base class, whose global term carries
the run's ``label_smoothing``. Long-CLIP trains its long-caption term with label smoothing 0.1
(beichenzbc/Long-CLIP ``model/model_longclip.py``, ``forward``: ``F.cross_entropy(sim_i2tl, targets,
label_smoothing=0.1)``), which the paper config sets for Long-CLIP FT, Long-CLIP FT + HN and HN-CLIP
alike (HN-CLIP "follows standard Long-CLIP fine-tuning"); "+HN" adds gamma * G to the logits of that
same smoothed term.

Long-CLIP's own recipe also adds a short-caption term, "primary component matching": the batch's
normalised image features are reduced to their top ``k`` principal components (centre on the batch
mean, SVD, project onto the first ``k`` right singular vectors, map back and add the mean again; the
result is not re-normalised) and matched to the short captions' features with symmetric InfoNCE. It is
available as an option (``longclip.short_weight > 0``, short captions read from
``longclip.short_caption_column``). Details kept from the reference: ``k = 32``, gradients flow through
the SVD, the logit scale is the model's, and both cross-entropies use label smoothing 0.1. When ``k`` is
at least the batch's rank (micro-batches of 16 or fewer samples with ``k = 32``), the reduction keeps
every component and the term matches the unreduced image features with the short captions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import Framework

__all__ = ["LABEL_SMOOTHING", "LongCLIP", "caption_cone_loss", "pca_reconstruct", "short_caption_loss"]

LABEL_SMOOTHING = 0.1  # Long-CLIP's cross-entropies


def pca_reconstruct(features: torch.Tensor, components: int) -> torch.Tensor:
    """``features`` [B, D] projected onto their top ``components`` principal directions, in the original space.

    SVD of the centred batch rather than an eigendecomposition of the covariance: same subspace,
    without squaring the condition number.
    """
    mean = features.mean(dim=0, keepdim=True)
    centred = features - mean
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    basis = vh[:components].T  # [D, k]
    return centred @ basis @ basis.T + mean


def short_caption_loss(image_features: torch.Tensor, short_text_features: torch.Tensor, logit_scale,
                       components: int = 32, label_smoothing: float = LABEL_SMOOTHING) -> torch.Tensor:
    """Long-CLIP's primary-component matching: PCA-reduced images vs short captions, symmetric InfoNCE."""
    reduced = pca_reconstruct(image_features, components)
    logits = logit_scale * reduced @ short_text_features.T
    labels = torch.arange(logits.shape[0], device=logits.device)
    return (F.cross_entropy(logits, labels, label_smoothing=label_smoothing)
            + F.cross_entropy(logits.T, labels, label_smoothing=label_smoothing)) / 2


def caption_cone_loss(text_features: torch.Tensor, cone_min: float) -> torch.Tensor:
    """The mean over the batch's caption pairs of relu(``cone_min`` - their cosine): a floor under every pair.

    Not part of Long-CLIP's objective. Long-CLIP-L's text tower puts every dense caption in a narrow cone
    (the paper's A.2: mean in-batch caption cosine 0.84-0.88, hardest pair 0.92-0.94), a property of a large
    pretrained tower; a 2-layer toy tower trained from scratch at s = 100 spreads its captions instead (mean
    0.4-0.5 on the toy's benchmark). The toy backbone's recipe adds this hinge to hold the cone. A floor on
    every pair, not on the batch's mean, because a mean can be met by a few crowded pairs while the rest
    spread (measured in research/backbone_design: a mean hinge at 0.75 left half the pairs below 0.8, the
    paper's share is 86-99 %). It acts only on pairs below ``cone_min``; fine-tuning never uses it."""
    cosines = text_features @ text_features.T
    n = cosines.shape[0]
    off_diagonal = ~torch.eye(n, dtype=torch.bool, device=cosines.device)
    return torch.relu(cone_min - cosines[off_diagonal]).mean()


class LongCLIP(Framework):
    """Full fine-tuning; optionally Long-CLIP's short-caption term (``"short"``) and the toy recipe's caption-cone
    term (``"cone"``)."""

    name = "longclip"

    def __init__(self, cfg, model=None):
        super().__init__(cfg, model)
        self.short_tokens: torch.Tensor | None = None

    @property
    def uses_short_captions(self) -> bool:
        return self.settings.short_weight > 0

    def required_columns(self) -> tuple[str, ...]:
        return (self.settings.short_caption_column,) if self.uses_short_captions else ()

    def prepare(self, data, products, tokenize) -> None:
        if not self.uses_short_captions:
            return
        column = self.settings.short_caption_column
        manifest = getattr(data, "manifest", None)
        if manifest is None or column not in manifest.columns:
            have = [] if manifest is None else list(manifest.columns)
            raise ValueError(f"longclip.short_weight > 0 needs the manifest column {column!r} "
                             f"(TrainConfig.longclip.short_caption_column); the training manifest has {have}")
        captions = [str(c) for c in manifest[column]]
        for image_id, caption in zip(data.image_ids, captions, strict=True):
            if not caption.strip():
                raise ValueError(f"training manifest: image_id {image_id!r} has an empty {column!r}")
        self.short_tokens = tokenize(captions)

    def batch_extras(self, positions, device):
        if not self.uses_short_captions:
            return {}
        return {"short_tokens": self.short_tokens[positions].to(device, non_blocking=True)}

    def encode(self, model, batch):
        out = super().encode(model, batch)
        if self.uses_short_captions:
            out["short_text_features"] = model(None, batch.extras["short_tokens"])["text_features"]
        return out

    def extra_terms(self, out, batch):
        terms = {}
        if self.uses_short_captions:
            loss = short_caption_loss(out["image_features"].float(), out["short_text_features"].float(),
                                      out["logit_scale"].float(), self.settings.pca_components)
            terms["short"] = self.settings.short_weight * loss
        if self.settings.cone_weight > 0:
            terms["cone"] = self.settings.cone_weight * caption_cone_loss(out["text_features"].float(),
                                                                          self.settings.cone_min)
        return terms


FRAMEWORK = LongCLIP
