"""StructXLIP (Ruan et al., CVPR 2026): CLIP's global term plus three structure terms on Canny edge maps.

As its public code trains it (intelligolabs/StructXLIP at bd63274, ``structxlip/train.py``
``run_training``: ``total_loss = lambda_global * loss_org + lam_structure_centric * loss_structure_centric
+ lam_rgb * loss_rgb_scribble_consistency + lam_local_structure_centric * loss_local_structure_centric``),
four terms and nothing else. Each image brings its edge map, the edge maps of its top-k segment crops
(:mod:`hnclip.preprocess.edges`), and its caption filtered of colour, material and texture words
(:mod:`hnclip.preprocess.lexicon`):

    global       CLIP InfoNCE of images vs captions at the learnable scale (``clip_loss``, no label
                 smoothing; the term +HN replaces)
    structure    InfoNCE of edge maps vs filtered captions, the logit scale *detached*
                 (``compute_structure_centric_loss`` called with ``logit_scale.detach()``)
    consistency  mean over the batch of ``1 - cos(image, its edge map)`` (``cosine_embedding_loss``, y=1)
    local        chunks of the filtered caption vs the batch's edge crops: for each caption, each chunk's
                 multi-positive InfoNCE over every valid edge crop of the batch, its own crops positive,
                 ``-(logsumexp_pos - logsumexp_all)``, averaged over chunks, then over captions; scale
                 ``min(s / tau, 100)``. A chunk's embedding is the softmax(token norm)-weighted sum
                 (weights without gradient) of the *final-LN* token states of its span, put through
                 ``ln_final`` again and the text projection: the released code's double layer norm.

The segments enter only through the edge crops: StructXLIP's local term uses the edge maps of each
image's ``chunk_top_k`` best-scoring segments (``structxlip/dataloader.py`` ranks ``segment`` by
``similarity_score``); it never trains on the segment crops or sentences themselves (its dataset loads
GOAL's ``seg_image``/``seg_text`` pair, ``train.py`` leaves it unused).

Term weights follow ``cosine_anneal_warm_decay(base, epoch, warm=1, decay_start=1, decay_end=8,
floor)`` per epoch (``structxlip/losses.py``): ``(epoch + 1) / warm`` during the warm epochs, then a
cosine from 1 at ``decay_start`` to the floor (structure 0.7, consistency 0.5, local 0.4) at
``decay_end``, then the floor; the epoch is ``Batch.epoch``. Base weights are ``train.py``'s defaults:
0.5, 0.05, 0.1, top-3 crops (its DOCCI launcher ``scripts/finetune.sh`` used 0.25 / 0.001 / 0.001 and
top-2). The logit scale is clamped to ``[0, 3.5]`` in log space (s <= 33.1) as StructXLIP does after
every step; the loop has no post-step hook, so the clamp is applied in place at the start of each
micro-batch, which differs from StructXLIP only on the first step. StructXLIP's optimiser (``init_lr``
5e-6, ``weight_decay`` 0.05, a per-step cosine to ``min_lr`` 0 without warmup, batch 16) is the paper
config's recipe for the StructXLIP methods.

Choices where the released code is not followed:
- chunk spans are located in the filtered caption's own tokens, which we encode for the structure term;
  the release computes them on the filtered text but reads the states of the unfiltered caption, so its
  spans drift after the first removed word.
- the caption filter removes all three word categories by default (the release's ``train.py`` removes
  none unless asked, its launcher colours).

Settings: :class:`~hnclip.frameworks.settings.StructXLIPSettings` (``train.structxlip``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from .base import Batch, Framework
from .goal import _clip, captured_inputs, normalise_pixels, paired_infonce
from .settings import StructXLIPSettings

__all__ = ["FRAMEWORK", "StructXLIPFramework", "StructXLIPSettings", "annealed_weight", "chunk_embeddings",
           "chunk_token_mask", "clamp_log_logit_scale", "local_edge_loss", "rgb_edge_consistency",
           "structure_loss"]

ANNEAL_FLOORS = {"structure": 0.7, "consistency": 0.5, "local": 0.4}


# ------------------------------------------------------------------------------------------ pure parts
def annealed_weight(base: float, epoch: int, floor: float, warm: int = 1, decay_start: int = 1,
                    decay_end: int = 8) -> float:
    """``base`` times StructXLIP's per-epoch factor: a linear warm-up over ``warm`` epochs, 1 until
    ``decay_start``, a cosine down to ``floor`` at ``decay_end``, then ``floor``."""
    if epoch < warm:
        return base * (epoch + 1) / warm
    if epoch < decay_start:
        return base
    span = max(decay_end - decay_start, 1e-6)
    t = min(epoch - decay_start, span) / span
    return base * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))


def structure_loss(edge_features: torch.Tensor, text_features: torch.Tensor, logit_scale) -> torch.Tensor:
    """InfoNCE of edge maps vs filtered captions at a detached scale (the scale learns from the global term)."""
    return paired_infonce(edge_features, text_features, logit_scale.detach())


def rgb_edge_consistency(image_features: torch.Tensor, edge_features: torch.Tensor) -> torch.Tensor:
    """Mean of ``1 - cos`` between each image and its edge map."""
    return (1 - (F.normalize(image_features, dim=-1) * F.normalize(edge_features, dim=-1)).sum(-1)).mean()


def chunk_token_mask(spans: torch.Tensor, length: int, context_length: int) -> torch.Tensor:
    """bool [B, C, length] of chunk spans [B, C, 2] (padding rows ``(0, 0)``), clipped to content tokens."""
    positions = torch.arange(length, device=spans.device)
    end = spans[..., 1:2].clamp(max=context_length - 1)
    return (positions >= spans[..., 0:1]) & (positions < end)


def chunk_embeddings(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, C, W]: per chunk, the softmax(token-norm)-weighted sum of ``states`` [B, L, W] over its tokens.

    The weights carry no gradient (StructXLIP computes them under ``no_grad``); empty chunks give zeros.
    """
    with torch.no_grad():
        norms = states.norm(dim=-1)[:, None, :].expand(mask.shape)  # [B, C, L]
        logits = norms.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(logits, dim=-1).nan_to_num(0.0)  # all -inf rows (empty chunks) -> 0
    return torch.einsum("bcl,blw->bcw", weights.to(states.dtype), states)


def local_edge_loss(chunk_features: torch.Tensor, chunk_valid: torch.Tensor, edge_features: torch.Tensor,
                    edge_valid: torch.Tensor, logit_scale, tau: float) -> torch.Tensor:
    """StructXLIP's local structure-centric loss.

    ``chunk_features`` [B, C, D] and ``edge_features`` [B, K, D] normalised; ``chunk_valid`` [B, C],
    ``edge_valid`` [B, K] bool. Captions without a valid chunk or without a valid edge crop of their own
    are left out of the mean; zero (with a graph) if none is left.
    """
    batch, top_k = edge_valid.shape
    scale = (logit_scale / tau).clamp(max=100.0)
    flat_edges = edge_features.reshape(batch * top_k, -1)
    flat_valid = edge_valid.reshape(-1)
    logits = scale * torch.einsum("bcd,nd->bcn", chunk_features, flat_edges)  # [B, C, B*K]
    very_negative = torch.finfo(logits.dtype).min
    log_all = torch.logsumexp(logits.masked_fill(~flat_valid, very_negative), dim=-1)
    own = torch.zeros(batch, batch * top_k, dtype=torch.bool, device=logits.device)
    own.view(batch, batch, top_k)[torch.arange(batch), torch.arange(batch)] = edge_valid
    log_pos = torch.logsumexp(logits.masked_fill(~own[:, None, :], very_negative), dim=-1)
    n_chunks = chunk_valid.sum(dim=1)
    used = (n_chunks > 0) & edge_valid.any(dim=1)
    # where, not a product: a caption without own crops has log_pos ~ float min, a huge finite gap
    per_chunk = torch.where(chunk_valid & used[:, None], log_all - log_pos, 0.0)
    per_caption = per_chunk.sum(dim=1) / n_chunks.clamp(min=1)
    return per_caption.sum() / used.sum().clamp(min=1)


@torch.no_grad()
def clamp_log_logit_scale(model, max_log: float) -> None:
    """StructXLIP's ``logit_scale.clamp_(0, max_log)`` on every parameter named ``logit_scale``."""
    for name, param in model.named_parameters():
        if name.split(".")[-1] == "logit_scale":
            param.clamp_(0.0, max_log)


# ------------------------------------------------------------------------------------------ framework
class StructXLIPFramework(Framework):
    """StructXLIP's four terms; ``products = ("segments", "edges")`` (the segments rank each image's crops)."""

    name = "structxlip"

    def __init__(self, cfg, model=None):
        super().__init__(cfg, model)
        self._data: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------ data
    def prepare(self, data, products: Mapping, tokenize) -> None:
        from hnclip.preprocess.edges import EdgeIndex
        from hnclip.preprocess.lexicon import chunk_spans, filter_caption
        from hnclip.preprocess.segments import SegmentIndex
        from hnclip.preprocess.sentences import char_span_to_tokens, token_offsets

        segments = SegmentIndex(products["segments"])
        edges = EdgeIndex(products["edges"])
        if edges.segments_sha256 != segments.content_sha256:
            raise ValueError(f"edge product {edges.root} was built from another segment product than "
                             f"{segments.root} (segments_sha256 differs): rebuild the edges")
        s = self.settings
        crop_rows = np.full((len(data.image_ids), s.top_k), -1, dtype=np.int64)
        for row, image_id in enumerate(data.image_ids):
            pairs = segments.record(image_id)["pairs"][:s.top_k]  # stored best score first
            crop_rows[row, :len(pairs)] = [p["crop"] for p in pairs]
        filtered = [filter_caption(c, s.categories) for c in data.captions]
        spans = np.zeros((len(filtered), s.max_chunks, 2), dtype=np.int64)  # (0, 0): no chunk
        for row, text in enumerate(tqdm(filtered, desc="caption chunks", unit="caption", leave=False)):
            offsets = token_offsets(text)
            for c, (start, end) in enumerate(chunk_spans(text, s.chunk_window, s.chunk_stride, s.max_chunks)):
                spans[row, c] = char_span_to_tokens(offsets, start, end)
        self._data = {"segments": segments, "edges": edges,
                      "edge_image_rows": np.asarray([edges.row(i) for i in data.image_ids]),
                      "edge_crop_rows": crop_rows, "filtered_captions": filtered,
                      "filtered_tokens": tokenize(filtered), "chunk_spans": torch.from_numpy(spans)}

    def batch_extras(self, positions: torch.Tensor, device: torch.device) -> dict[str, Any]:
        if not self._data:
            raise RuntimeError(f"framework {self.name!r}: prepare() must run before training")
        data = self._data
        rows = positions.numpy()
        crop_rows = data["edge_crop_rows"][rows]  # [B, K], -1 = no such segment
        edge_crops = np.asarray(data["edges"].crops[np.maximum(crop_rows, 0).reshape(-1)])
        return {  # uint8 edge maps: a quarter of the float transfer
            "edges": torch.from_numpy(np.asarray(data["edges"].images[data["edge_image_rows"][rows]])).to(device),
            "edge_crops": torch.from_numpy(edge_crops).to(device),
            "edge_valid": torch.from_numpy(crop_rows >= 0).to(device),
            "filtered_tokens": data["filtered_tokens"][positions].to(device, non_blocking=True),
            "chunk_spans": data["chunk_spans"][positions].to(device, non_blocking=True),
        }

    # ------------------------------------------------------------------------------------------ training
    def encode(self, model, batch: Batch) -> dict[str, torch.Tensor]:
        """One forward pass over images + edge maps + edge crops and captions + filtered captions."""
        clamp_log_logit_scale(model, self.settings.max_log_logit_scale)
        clip = _clip(model)
        extras = batch.extras
        size = batch.pixels.shape[0]
        edges = normalise_pixels(extras["edges"], model.image_mean, model.image_std)
        edge_crops = normalise_pixels(extras["edge_crops"], model.image_mean, model.image_std)
        if edges.shape[1:] != batch.pixels.shape[1:]:
            raise ValueError(f"edge maps are {tuple(edges.shape[1:])} but the model's images are "
                             f"{tuple(batch.pixels.shape[1:])}: rebuild the edge product for this model")
        images = torch.cat([batch.pixels, edges, edge_crops])
        texts = torch.cat([batch.tokens, extras["filtered_tokens"]])
        with captured_inputs(text=clip.ln_final) as states:
            out = model(images, texts, with_tokens=self.needs_tokens)
        features = out["image_features"]
        result = {"logit_scale": out["logit_scale"],
                  "image_features": features[:size], "text_features": out["text_features"][:size],
                  "edge_features": features[size:2 * size],
                  "edge_crop_features": features[2 * size:].reshape(size, -1, features.shape[-1]),
                  "edge_valid": extras["edge_valid"], "filtered_features": out["text_features"][size:]}
        if self.needs_tokens:
            for key in ("image_tokens", "text_tokens", "text_mask"):
                result[key] = out[key][:size]
        final_states = clip.ln_final(states["text"][size:])  # StructXLIP reads HF's last_hidden_state (post-LN)
        mask = chunk_token_mask(extras["chunk_spans"], final_states.shape[1], batch.tokens.shape[1])
        chunks = clip.ln_final(chunk_embeddings(final_states, mask)) @ clip.text_projection
        result["chunk_features"] = F.normalize(chunks, dim=-1)
        result["chunk_valid"] = mask.any(dim=-1)
        return result

    def term_weight(self, name: str, epoch: int) -> float:
        s = self.settings
        return annealed_weight(getattr(s, f"{name}_weight"), epoch, ANNEAL_FLOORS[name], s.anneal_warm_epochs,
                               s.anneal_decay_start, s.anneal_decay_end)

    def extra_terms(self, out: Mapping[str, torch.Tensor], batch: Batch) -> dict[str, torch.Tensor]:
        scale = out["logit_scale"].float()
        return {
            "structure": self.term_weight("structure", batch.epoch) * structure_loss(
                out["edge_features"].float(), out["filtered_features"].float(), scale),
            "consistency": self.term_weight("consistency", batch.epoch) * rgb_edge_consistency(
                out["image_features"].float(), out["edge_features"].float()),
            "local": self.term_weight("local", batch.epoch) * local_edge_loss(
                out["chunk_features"].float(), out["chunk_valid"], out["edge_crop_features"].float(),
                out["edge_valid"], scale, self.settings.chunk_tau),
        }


FRAMEWORK = StructXLIPFramework
