"""HN-CLIP objectives: InfoNCE with adaptive text-similarity margins, and FILIP-style token matching.

The HN term raises each negative logit by ``gamma * G_ij``, where G is the caption-caption cosine matrix
of the batch. Negatives whose captions resemble the positive's caption get a larger logit and so a
larger share of the softmax: with cosines equal, two negatives whose caption similarities differ by dG
receive gradients in the ratio exp(s * gamma * dG). G is detached, so the margin shapes the loss
landscape without itself being optimised (the text encoder cannot shrink margins to cheat).

Layout follows open_clip's ``loss.py``: plain functions for gathering, logits and loss, and a thin
``nn.Module`` (:class:`HNClipLoss`) for other people's training loops.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

__all__ = [
    "caption_similarity",
    "contrastive_loss",
    "contrastive_logits",
    "gather_features",
    "symmetric_cross_entropy",
    "token_similarity",
    "token_loss",
    "HNClipLoss",
]


def caption_similarity(margin_text_features: torch.Tensor, column_features: torch.Tensor | None = None,
                       diagonal_offset: int = 0) -> torch.Tensor:
    """G: detached caption-caption cosine with the positive pairs' entries set to zero.

    ``column_features`` defaults to ``margin_text_features``; under data parallelism the rows are the
    local captions and the columns the global batch, so the positives sit on the diagonal shifted by
    ``diagonal_offset`` (rank * local batch).
    """
    rows = margin_text_features.detach()
    cols = rows if column_features is None else column_features.detach()
    with torch.no_grad():
        sim = rows @ cols.T
        idx = torch.arange(sim.shape[0], device=sim.device)
        sim[idx, idx + diagonal_offset] = 0.0
    return sim


def contrastive_logits(image_features: torch.Tensor, text_features: torch.Tensor, logit_scale,
                       gamma: float = 0.0, margin: torch.Tensor | None = None,
                       all_image_features: torch.Tensor | None = None,
                       all_text_features: torch.Tensor | None = None):
    """Both directions' logits: local rows against (possibly gathered) columns, margin added in cosine space.

    ``margin`` is the gamma-free G with the same shape as the logits. The scale multiplies the features
    before the product, as open_clip's ``ClipLoss`` does, so that ``gamma = 0`` reproduces its loss and
    gradients bit for bit (scaling the product instead differs in the last float32 bits).
    """
    cols_images = image_features if all_image_features is None else all_image_features
    cols_texts = text_features if all_text_features is None else all_text_features
    logits_i2t = logit_scale * image_features @ cols_texts.T
    logits_t2i = logit_scale * text_features @ cols_images.T
    if gamma and margin is not None:
        boost = (logit_scale * gamma) * margin
        logits_i2t = logits_i2t + boost
        logits_t2i = logits_t2i + boost
    return logits_i2t, logits_t2i


def contrastive_loss(image_features: torch.Tensor, text_features: torch.Tensor, logit_scale,
                     gamma: float = 0.0, margin_text_features: torch.Tensor | None = None,
                     label_smoothing: float = 0.0) -> torch.Tensor:
    """Symmetric InfoNCE with the HN margin; ``gamma = 0`` (and no smoothing) is exactly CLIP's loss.

    Inputs are L2-normalised [B, D] features and the multiplier ``s`` (already exponentiated).
    ``margin_text_features`` (normalised, [B, D]) are the captions' features used for G; pass the
    initial encoder's features for the paper's frozen-margin variant. The positive pair's logit never
    receives a margin (G's diagonal is zero), so only negatives are boosted. ``label_smoothing`` is
    ``F.cross_entropy``'s, in both directions (Long-CLIP trains its global term with 0.1); the margin
    acts on the logits, so the two compose.
    """
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    margin = None
    if gamma:
        source = text_features if margin_text_features is None else margin_text_features
        if source.shape[0] != text_features.shape[0]:
            raise ValueError(
                f"margin_text_features has {source.shape[0]} rows but the batch has {text_features.shape[0]}"
            )
        margin = caption_similarity(source)
    logits_i2t, logits_t2i = contrastive_logits(image_features, text_features, logit_scale, gamma, margin)
    labels = torch.arange(image_features.shape[0], device=image_features.device)
    return symmetric_cross_entropy(logits_i2t, logits_t2i, labels, label_smoothing)


def symmetric_cross_entropy(logits_i2t: torch.Tensor, logits_t2i: torch.Tensor, labels: torch.Tensor,
                            label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean of the two directions' cross-entropies, row i's target ``labels[i]``."""
    return (F.cross_entropy(logits_i2t, labels, label_smoothing=label_smoothing)
            + F.cross_entropy(logits_t2i, labels, label_smoothing=label_smoothing)) / 2


def _is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def gather_features(features: torch.Tensor, with_grad: bool = True) -> torch.Tensor:
    """Concatenate ``features`` from every rank in rank order.

    ``with_grad`` uses the autograd-aware all_gather, whose backward sums every rank's gradient into
    the local shard: after DDP averages parameter gradients, they equal the single-process gradients
    of the mean of the ranks' losses, i.e. of the loss on the concatenated batch.
    """
    if not _is_distributed():
        return features
    if with_grad:
        import torch.distributed.nn.functional as dist_nn

        return torch.cat(dist_nn.all_gather(features), dim=0)
    parts = [torch.empty_like(features) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, features.detach().contiguous())
    return torch.cat(parts, dim=0)


def token_similarity(image_tokens: torch.Tensor, text_tokens: torch.Tensor, text_mask: torch.Tensor,
                     chunk_size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """FILIP late interaction: [Bi, Bt] image->text and [Bt, Bi] text->image similarities.

    image->text: mean over the image's patches of the max over the caption's (unpadded) tokens;
    text->image: mean over the caption's tokens of the max over the image's patches. Token features
    must be normalised. Captions are processed in chunks because the full [Bi, Bt, P, L] cosine tensor
    is 4 GB at the paper's ViT-L sizes (B = 128, 256 patches, 248 tokens).
    """
    mask = text_mask.to(dtype=torch.bool)
    n_valid = mask.sum(dim=1).clamp(min=1).to(image_tokens.dtype)  # [Bt]
    i2t_chunks, t2i_chunks = [], []
    for start in range(0, text_tokens.shape[0], chunk_size):
        t = text_tokens[start:start + chunk_size]  # [c, L, D]
        m = mask[start:start + chunk_size]  # [c, L]
        cos = torch.einsum("ipd,jld->ijpl", image_tokens, t)  # [Bi, c, P, L]
        # The fill value follows cos's dtype, not the inputs': under autocast cos is fp16/bf16 and the
        # float32 minimum would overflow it.
        masked = cos.masked_fill(~m[None, :, None, :], torch.finfo(cos.dtype).min)
        i2t_chunks.append(masked.max(dim=3).values.mean(dim=2))  # [Bi, c]
        best_patch = cos.max(dim=2).values  # [Bi, c, L]
        best_patch = best_patch.masked_fill(~m[None], 0.0)
        t2i_chunks.append((best_patch.sum(dim=2) / n_valid[start:start + chunk_size][None]).T)  # [c, Bi]
    return torch.cat(i2t_chunks, dim=1), torch.cat(t2i_chunks, dim=0)


def token_loss(image_tokens: torch.Tensor, text_tokens: torch.Tensor, text_mask: torch.Tensor,
               logit_scale, chunk_size: int = 32) -> torch.Tensor:
    """Symmetric InfoNCE on FILIP token similarities (no margin: the HN term acts on global features)."""
    sim_i2t, sim_t2i = token_similarity(image_tokens, text_tokens, text_mask, chunk_size)
    labels = torch.arange(image_tokens.shape[0], device=image_tokens.device)
    return (F.cross_entropy(logit_scale * sim_i2t, labels) + F.cross_entropy(logit_scale * sim_t2i, labels)) / 2


class HNClipLoss(nn.Module):
    """Drop-in HN-CLIP loss, shaped like open_clip's ``ClipLoss``: the one place that composes the global
    HN term and the FILIP token term (the training loop's frameworks use it too).

    Under torch.distributed it gathers features from every rank so that negatives and the margin matrix
    G span the global batch, and computes the loss of the local rows against all columns (the mean over
    ranks is the global loss); on one process :meth:`global_loss` is exactly :func:`contrastive_loss`.
    ``token_weight`` > 0 adds the FILIP token term; its inputs are local only, since gathering
    [B, 248, D] token tensors across ranks would dominate communication. ``label_smoothing`` applies to
    the global term (Long-CLIP's 0.1), not to the token term.

    Only ``gather_with_grad=True`` gives the single-process gradients: with False, a rank's features
    get no gradient from the other ranks' rows (where they are negatives), which saves the backward
    all-to-all but changes the gradient (tests/test_losses_ddp.py pins the exact default).
    """

    def __init__(self, gamma: float = 0.0, token_weight: float = 0.0, gather_with_grad: bool = True,
                 token_chunk_size: int = 32, label_smoothing: float = 0.0):
        super().__init__()
        if gamma < 0:
            raise ValueError(f"gamma must be >= 0, got {gamma}")
        if token_weight < 0:
            raise ValueError(f"token_weight must be >= 0, got {token_weight}")
        if not 0 <= label_smoothing < 1:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        self.gamma = float(gamma)
        self.token_weight = float(token_weight)
        self.gather_with_grad = gather_with_grad
        self.token_chunk_size = token_chunk_size
        self.label_smoothing = float(label_smoothing)
        self._labels: dict[tuple[torch.device, int, int], torch.Tensor] = {}

    def get_ground_truth(self, device: torch.device, num_rows: int, offset: int) -> torch.Tensor:
        key = (device, num_rows, offset)
        if key not in self._labels:  # cached: building labels each step is a tiny host->device copy
            self._labels[key] = torch.arange(num_rows, device=device) + offset
        return self._labels[key]

    def global_loss(self, image_features, text_features, logit_scale, margin_text_features=None):
        """Global-feature HN loss over the (gathered) batch."""
        offset = dist.get_rank() * image_features.shape[0] if _is_distributed() else 0
        all_images = gather_features(image_features, self.gather_with_grad)
        all_texts = gather_features(text_features, self.gather_with_grad)
        margin = None
        if self.gamma:
            source = text_features if margin_text_features is None else margin_text_features
            if source.shape[0] != text_features.shape[0]:
                raise ValueError(f"margin_text_features has {source.shape[0]} rows but the local batch has "
                                 f"{text_features.shape[0]}")
            margin = caption_similarity(source, gather_features(source, with_grad=False), offset)
        logits_i2t, logits_t2i = contrastive_logits(image_features, text_features, logit_scale, self.gamma,
                                                    margin, all_images, all_texts)
        labels = self.get_ground_truth(image_features.device, image_features.shape[0], offset)
        return symmetric_cross_entropy(logits_i2t, logits_t2i, labels, self.label_smoothing)

    def token_term(self, image_tokens, text_tokens, text_mask, logit_scale):
        """``token_weight`` x the FILIP token loss of the local rows (no margin, no smoothing)."""
        if image_tokens is None or text_tokens is None or text_mask is None:
            raise ValueError("token_weight > 0 needs image_tokens, text_tokens and text_mask")
        return self.token_weight * token_loss(image_tokens, text_tokens, text_mask, logit_scale,
                                              self.token_chunk_size)

    def forward(self, image_features, text_features, logit_scale, margin_text_features=None,
                image_tokens=None, text_tokens=None, text_mask=None, output_dict: bool = False):
        losses = {"contrastive_loss": self.global_loss(image_features, text_features, logit_scale,
                                                       margin_text_features)}
        if self.token_weight:
            losses["token_loss"] = self.token_term(image_tokens, text_tokens, text_mask, logit_scale)
        if output_dict:
            return losses
        return sum(losses.values())
