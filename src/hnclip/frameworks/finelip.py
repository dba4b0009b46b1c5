"""FineLIP: token aggregation on both sides, a cross-modal token similarity and a VSE hinge, as its
public code trains it (ffa-ti-ma/FineLIP at 9389127), written anew.

**The objective is the hinge alone.** In FineLIP mode ``model/model_finelip.py`` ``CLIP.forward`` sets
``loss_1 = 0.0`` (the global contrastive term ``inference_lvl1`` runs only with ``--run_baseline``) and
returns the hinge as ``loss_3``; ``train/train.py`` ``train_epoch`` backpropagates ``loss_1 + loss_3``.
So plain FineLIP trains no global InfoNCE term, and the logit scale receives no gradient.

- **Aggregators** (``model/cross_net.py`` ``TokenAggregation``): one per side, LayerNorm ->
  Linear(D, 0.2 D) -> GELU -> Linear(0.2 D, K) gives each token K logits; times a learned scalar
  (init 1), a softmax over the tokens turns them into K weightings, and the weighted sums are K
  aggregated tokens. ``K = finelip.slots``; 0 picks FineLIP's ``int(num_patches * aggr_ratio *
  sparse_ratio)`` = ``int(0.2 * patches)`` (51 for ViT-L/14 at 224 px), the same K on the text side.
- **Which tokens** (``CrossSparseAggrNet_v2.forward_dual_aggr``): the *raw* projected tokens, as
  ``CLIP.forward`` hands over ``encode_image_full`` (``ln_post`` then ``proj`` on every token) and
  ``encode_text_full(text) @ text_projection``, unnormalised. Image: the patch tokens (no CLS) are
  aggregated and the CLS token, the global feature, is prepended: K + 1 tokens. Text: the tokens from
  SOT up to, not including, EOT (``cap_embs[i, :n_word]`` with ``n_word = length - 1``) are aggregated
  and the EOT token, the global text feature, is appended: K + 1 tokens. Each token is L2-normalised
  only after aggregation (``F.normalize(select_tokens)``). One difference: FineLIP counts a caption's
  length as its non-zero token ids, we locate EOT (the token "!" has id 0 too).
- **Cross similarity** (``model/xttn.py`` ``mask_xattn_one_text``): ``c = LeakyReLU_0.1(cos)`` between
  every image and caption token; text->image: mean over caption tokens of the max over image tokens;
  image->text: mean over image tokens of the max over caption tokens; the score is their **sum**
  (range [-0.2, 2]), not their average.
- **Hinge** (``train/loss.py`` ``ContrastiveLoss``): VSE hinge on the [B, B] cross-similarity matrix with
  margin 0.2 in both directions, summed over every violating negative (``finelip.hinge = sum``,
  ``max_violation`` off by default) or the hardest only (``max``), summed over the batch, times
  ``finelip.weight`` (1).
- **Ramp** (``train/train.py`` ``warmup_alpha = i / num_batches_per_epoch`` in epoch
  ``embedding_warmup_epochs = 0``, applied in ``inference_lvl3``): the hinge's weight rises linearly
  from 0 over the first epoch's micro-batches (``Batch.epoch_progress``), then stays 1
  (``finelip.ramp``). Our epoch counts only the micro-batches of complete optimizer steps.
- **"+HN"**: FineLIP has no global term to replace, so a run with gamma > 0 *adds* the HN global term
  (with the run's label smoothing; FineLIP's own global term, ``inference_lvl1``, smooths by 0.1)
  beside the unchanged, still ramped hinge (``finelip.hn = global``). The other reading, the margin
  inside the hinge's negatives (``finelip.hn = hinge``: ``scores + gamma * G`` with G the detached
  caption-caption cosine, zero on the diagonal, and no global term), is an option.
- **Learning rates**: the aggregators train at ``module_lr`` (FineLIP ``train/arguments.py``:
  ``cross_net_lr`` 2e-4 vs ``lr`` 1e-6 for the encoders).
- **Evaluation score**: ``(1 - w) * global cosine + w * cross similarity`` with ``w =
  finelip.score_weight = 0.2`` (FineLIP's alpha 0.8 on the global logits).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hnclip.losses import caption_similarity
from hnclip.models.dual_encoder import normalize_tokens

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
    """FineLIP's aggregators and its cross-modal hinge (``"finelip"``); a global term only with "+HN"."""

    name = "finelip"
    has_score = True

    def __init__(self, cfg, model):
        super().__init__(cfg, model)
        if model is None:
            raise ValueError("the finelip framework needs the model to size its aggregators")
        self.slots = self.settings.slots or default_slots(model)
        self.image_aggregator = TokenAggregator(model.embed_dim, self.slots)
        self.text_aggregator = TokenAggregator(model.embed_dim, self.slots)

    @property
    def needs_tokens(self) -> bool:
        return True

    @property
    def hn_in_hinge(self) -> bool:
        return self.cfg.gamma > 0 and self.settings.hn == "hinge"

    @property
    def trains_global_term(self) -> bool:
        return self.cfg.gamma > 0 and not self.hn_in_hinge

    @property
    def hn_meaning(self) -> str:
        if self.settings.hn == "hinge":
            return "gamma * G is added to the negatives of FineLIP's hinge (no global term)"
        return self.hn_plugin

    def wrap_model(self, model):
        """Without a global or token term nothing reads the logit scale: freeze it.

        FineLIP keeps it in its optimizer, where it never receives a gradient and so never moves; frozen,
        it stays out of the optimizer, and DistributedDataParallel (which expects every trainable
        parameter to receive a gradient) can wrap the run.
        """
        if not self.trains_global_term and self.cfg.token_weight == 0:
            model.logit_scale.requires_grad_(False)
        return model

    def image_slots(self, image_features: torch.Tensor, image_tokens: torch.Tensor) -> torch.Tensor:
        """[B, 1 + K, D]: the global feature, then K aggregates of the raw patch tokens; normalised."""
        aggregated = self.image_aggregator(image_tokens)
        return F.normalize(torch.cat([image_features[:, None], aggregated], dim=1), dim=-1)

    def text_slots(self, text_features: torch.Tensor, text_tokens: torch.Tensor,
                   text_mask: torch.Tensor) -> torch.Tensor:
        """[B, K + 1, D]: K aggregates of the raw tokens before EOT, then the EOT (global) feature; normalised."""
        mask = text_mask.to(torch.bool)
        eot = mask.sum(dim=1) - 1  # the mask is True up to and including EOT
        before_eot = mask & (torch.arange(mask.shape[1], device=mask.device)[None, :] < eot[:, None])
        aggregated = self.text_aggregator(text_tokens, before_eot)
        return F.normalize(torch.cat([aggregated, text_features[:, None]], dim=1), dim=-1)

    def encode(self, model, batch):
        out = model(batch.pixels, batch.tokens, with_tokens=True, normalize_tokens=False)
        out["image_tokens_raw"], out["text_tokens_raw"] = out["image_tokens"], out["text_tokens"]
        # the FILIP token term (token_weight > 0) reads normalised tokens, as for every framework
        out["image_tokens"] = normalize_tokens(out["image_tokens_raw"])
        out["text_tokens"] = normalize_tokens(out["text_tokens_raw"])
        return out

    def ramp(self, batch) -> float:
        """The hinge's weight factor: the first epoch's progress during epoch 0 (FineLIP's warmup_alpha), then 1."""
        return batch.epoch_progress if self.settings.ramp and batch.epoch == 0 else 1.0

    def hinge_term(self, out, batch, margin: torch.Tensor | None = None) -> torch.Tensor:
        """``finelip.weight`` x ramp x the VSE hinge on the cross similarity (plus ``margin`` on its entries)."""
        images = self.image_slots(out["image_features"].float(), out["image_tokens_raw"].float())
        texts = self.text_slots(out["text_features"].float(), out["text_tokens_raw"].float(), out["text_mask"])
        scores = cross_similarity(images, texts)
        if margin is not None:  # zero on the diagonal: the positives keep their score
            scores = scores + self.cfg.gamma * margin
        loss = vse_hinge_loss(scores, self.settings.margin, self.settings.hinge == "max")
        return (self.settings.weight * self.ramp(batch)) * loss

    def loss_terms(self, out, batch, margin_features=None):
        """``"global"`` (only with "+HN", :attr:`trains_global_term`), ``"token"``, then ``"finelip"``.

        Overridden because the ``finelip.hn = hinge`` option lets gamma reach the hinge's negatives,
        which :meth:`extra_terms` never sees; in the default reading the hinge is gamma-free.
        """
        terms = super().loss_terms(out, batch, margin_features)
        margin = None
        if self.hn_in_hinge:
            source = out["text_features"] if margin_features is None else margin_features
            margin = caption_similarity(source.float())
        terms["finelip"] = self.hinge_term(out, batch, margin)
        return terms

    # evaluation: global features plus the token sets, scored by the blend
    def encode_images(self, model, pixels):
        out = model(pixels, None, with_tokens=True, normalize_tokens=False)
        return {"features": out["image_features"],
                "slots": self.image_slots(out["image_features"].float(), out["image_tokens"].float())}

    def encode_texts(self, model, tokens):
        out = model(None, tokens, with_tokens=True, normalize_tokens=False)
        return {"features": out["text_features"],
                "slots": self.text_slots(out["text_features"].float(), out["text_tokens"].float(),
                                         out["text_mask"])}

    def score(self, images, texts):
        weight = self.settings.score_weight
        cosine = images["features"] @ texts["features"].T
        return (1 - weight) * cosine + weight * cross_similarity(images["slots"], texts["slots"])


FRAMEWORK = FineLIP
