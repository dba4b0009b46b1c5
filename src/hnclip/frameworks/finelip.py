"""FineLIP: token aggregation on both sides, a cross-modal token similarity and a VSE hinge loss.

Our reading of FineLIP (Asokan et al., CVPR 2025; public code ``model/cross_net.py``
``forward_dual_aggr``, ``model/xttn.py`` ``mask_xattn_one_text``, ``train/loss.py``), written anew:

- **Aggregators.** One per side: LayerNorm -> Linear(D, 0.2 D) -> GELU -> Linear(0.2 D, K) gives each
  token K logits; times a learned scalar (init 1), a softmax over the tokens turns them into K
  weightings, and the weighted sums are K aggregated tokens. ``K = finelip_slots``; 0 picks FineLIP's
  own ``int(0.2 * patches)`` (its aggr_ratio 0.4 x sparse_ratio 0.5 of the patch count: 51 for ViT-L/14
  at 224 px, the same K on the text side).
- **Which tokens.** Image: the projected patch tokens (no CLS) are aggregated and the global (CLS)
  feature is prepended: K + 1 tokens. Text: the projected tokens from SOT up to, not including, EOT are
  aggregated (padding masked out of the softmax) and the EOT token, i.e. the global text feature, is
  appended: K + 1 tokens. All are L2-normalised before matching. One difference: our encoder hands out
  normalised token features, so the aggregators weight normalised tokens where FineLIP's weight the
  raw projected ones.
- **Cross similarity.** ``c = LeakyReLU_0.1(cos)`` between every image and caption token;
  text->image: mean over caption tokens of the max over image tokens; image->text: mean over image
  tokens of the max over caption tokens; the score is their **sum** (as FineLIP's code; range
  [-0.2, 2]), not their average.
- **Loss.** VSE hinge on the [B, B] cross-similarity matrix with margin 0.2 in both directions, summed
  over every violating negative (``finelip_hinge = sum``, FineLIP's default) or only the hardest one per
  query (``max``, VSE++'s max-violation), and summed over the batch (not averaged), times
  ``finelip_weight`` (1, as FineLIP adds it to its global loss unweighted). The hinge never sees gamma:
  the HN variant replaces only the global InfoNCE term. FineLIP ramps the hinge in over its first epoch;
  we keep the weight constant.
- **Learning rates.** The aggregators train at ``module_lr`` (FineLIP: 2e-4 vs 1e-6 for the encoders).
- **Evaluation score.** ``(1 - w) * global cosine + w * cross similarity`` with ``w =
  finelip_score_weight = 0.2`` (FineLIP's alpha 0.8 on the global logits).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import Framework

__all__ = ["FineLIP", "TokenAggregator", "cross_similarity", "default_slots", "vse_hinge_loss"]

LEAKY_SLOPE = 0.1
HIDDEN_RATIO = 0.2  # aggregator MLP width as a fraction of the feature dim
SLOT_RATIO = 0.2  # FineLIP's K as a fraction of the patch count


class TokenAggregator(nn.Module):
    """K learned weightings (softmax over tokens) of a token sequence -> K aggregated tokens."""

    def __init__(self, dim: int, slots: int, hidden_ratio: float = HIDDEN_RATIO):
        super().__init__()
        hidden = max(1, int(dim * hidden_ratio))
        self.weight = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, slots))
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``tokens`` [B, N, D], ``mask`` [B, N] (True = real; each row needs one) -> [B, K, D]."""
        logits = self.weight(tokens).transpose(1, 2) * self.scale  # [B, K, N]
        if mask is not None:
            logits = logits.masked_fill(~mask[:, None, :], float("-inf"))
        return torch.softmax(logits, dim=2) @ tokens


def default_slots(model) -> int:
    """FineLIP's K: 20 % of the image's patch count (at least 1)."""
    grid = model.clip.visual.grid_size
    return max(1, int(SLOT_RATIO * grid[0] * grid[1]))


def cross_similarity(image_tokens: torch.Tensor, text_tokens: torch.Tensor, chunk_size: int = 32) -> torch.Tensor:
    """[Bi, Bt] FineLIP scores of normalised token sets [Bi, Ni, D] x [Bt, Nt, D] (captions chunked).

    Memory per chunk is Bi x chunk x Ni x Nt floats (52 x 52 tokens at ViT-L: 11 kB per pair).
    """
    chunks = []
    for start in range(0, text_tokens.shape[0], chunk_size):
        cos = torch.einsum("ipd,jld->ijpl", image_tokens, text_tokens[start:start + chunk_size])
        sim = F.leaky_relu(cos, negative_slope=LEAKY_SLOPE)
        text_to_image = sim.max(dim=2).values.mean(dim=2)  # each caption token's best image token
        image_to_text = sim.max(dim=3).values.mean(dim=2)  # each image token's best caption token
        chunks.append(text_to_image + image_to_text)
    return torch.cat(chunks, dim=1)


def vse_hinge_loss(scores: torch.Tensor, margin: float = 0.2, max_violation: bool = False) -> torch.Tensor:
    """Bidirectional hinge on a square score matrix whose diagonal holds the positive pairs.

    Image->text: ``[margin + s(i, j) - s(i, i)]_+`` over captions j != i; text->image:
    ``[margin + s(i, j) - s(j, j)]_+`` over images i != j. Summed over negatives, or the largest
    kept per query with ``max_violation``; summed over the batch.
    """
    positive = scores.diagonal()
    eye = torch.eye(scores.shape[0], dtype=torch.bool, device=scores.device)
    cost_caption = (margin + scores - positive[:, None]).clamp(min=0).masked_fill(eye, 0.0)
    cost_image = (margin + scores - positive[None, :]).clamp(min=0).masked_fill(eye, 0.0)
    if max_violation:
        return cost_caption.max(dim=1).values.sum() + cost_image.max(dim=0).values.sum()
    return cost_caption.sum() + cost_image.sum()


class FineLIP(Framework):
    """Long-CLIP fine-tuning plus FineLIP's aggregators and cross-modal hinge term (``"finelip"``)."""

    name = "finelip"
    has_score = True

    def __init__(self, cfg, model):
        super().__init__(cfg, model)
        if model is None:
            raise ValueError("the finelip framework needs the model to size its aggregators")
        self.slots = cfg.finelip_slots or default_slots(model)
        self.image_aggregator = TokenAggregator(model.embed_dim, self.slots)
        self.text_aggregator = TokenAggregator(model.embed_dim, self.slots)

    @property
    def needs_tokens(self) -> bool:
        return True

    def image_slots(self, image_features: torch.Tensor, image_tokens: torch.Tensor) -> torch.Tensor:
        """[B, 1 + K, D]: the global feature, then K aggregated patches; normalised."""
        aggregated = self.image_aggregator(image_tokens)
        return F.normalize(torch.cat([image_features[:, None], aggregated], dim=1), dim=-1)

    def text_slots(self, text_features: torch.Tensor, text_tokens: torch.Tensor,
                   text_mask: torch.Tensor) -> torch.Tensor:
        """[B, K + 1, D]: K aggregates of the tokens before EOT, then the EOT (global) feature; normalised."""
        mask = text_mask.to(torch.bool)
        eot = mask.sum(dim=1) - 1  # the mask is True up to and including EOT
        before_eot = mask & (torch.arange(mask.shape[1], device=mask.device)[None, :] < eot[:, None])
        aggregated = self.text_aggregator(text_tokens, before_eot)
        return F.normalize(torch.cat([aggregated, text_features[:, None]], dim=1), dim=-1)

    def extra_terms(self, out, batch):
        images = self.image_slots(out["image_features"].float(), out["image_tokens"].float())
        texts = self.text_slots(out["text_features"].float(), out["text_tokens"].float(), out["text_mask"])
        loss = vse_hinge_loss(cross_similarity(images, texts), self.cfg.finelip_margin,
                              self.cfg.finelip_hinge == "max")
        return {"finelip": self.cfg.finelip_weight * loss}

    # evaluation: global features plus the token sets, scored by the blend
    def encode_images(self, model, pixels):
        out = model(pixels, None, with_tokens=True)
        return {"features": out["image_features"],
                "slots": self.image_slots(out["image_features"].float(), out["image_tokens"].float())}

    def encode_texts(self, model, tokens):
        out = model(None, tokens, with_tokens=True)
        return {"features": out["text_features"],
                "slots": self.text_slots(out["text_features"].float(), out["text_tokens"].float(),
                                         out["text_mask"])}

    def score(self, images, texts):
        weight = self.cfg.finelip_score_weight
        cosine = images["features"] @ texts["features"].T
        return (1 - weight) * cosine + weight * cross_similarity(images["slots"], texts["slots"])


FRAMEWORK = FineLIP
