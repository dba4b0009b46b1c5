"""StructXLIP (Ruan et al., CVPR 2026): GOAL's objective plus structure terms on Canny edge maps.

Each image also brings its edge map, the edge maps of its top-k segment crops
(:mod:`hnclip.preprocess.edges`), and its caption filtered of colour, material and texture words
(:mod:`hnclip.preprocess.lexicon`). On top of GOAL's four terms (:mod:`.goal`):

    structure    InfoNCE of edge maps vs filtered captions, the logit scale *detached*
                 (StructXLIP's ``compute_structure_centric_loss`` called with ``logit_scale.detach()``)
    consistency  mean over the batch of ``1 - cos(image, its edge map)`` (``cosine_embedding_loss``, y=1)
    local        chunks of the filtered caption vs the batch's edge crops: for each caption, each chunk's
                 multi-positive InfoNCE over every valid edge crop of the batch, its own crops positive,
                 ``-(logsumexp_pos - logsumexp_all)``, averaged over chunks, then over captions; scale
                 ``min(s / tau, 100)``. A chunk's embedding is the softmax(token norm)-weighted sum
                 (weights without gradient) of the *final-LN* token states of its span, put through
                 ``ln_final`` again and the text projection: the released code's double layer norm.

Term weights follow StructXLIP's ``cosine_anneal_warm_decay`` (warm=1, decay 1 -> 8 of 10 epochs):
full weight for the first 10% of training, a cosine down to ``floor x base`` by 80%, then the floor
(structure 0.7, consistency 0.5, local 0.4), driven by the step fraction ``Batch.progress`` rather
than the epoch. Base weights are the code's defaults: 0.5, 0.05, 0.1 (its DOCCI launcher used
0.25 / 0.001 / 0.001 and top-2). The logit scale is clamped to ``[0, 3.5]`` in log space (s <= 33.1)
as StructXLIP does after every step; the loop has no post-step hook, so the clamp is applied in place
at the start of each micro-batch, which differs from StructXLIP only on the first step.

Choices where the released code is not followed:
- StructXLIP's ``train.py`` loads GOAL's segment pairs but only uses the structure terms; this module
  is GOAL plus structure, as the HN-CLIP paper describes the framework.
- chunk spans are located in the filtered caption's own tokens, which we encode for the structure term;
  the release computes them on the filtered text but reads the states of the unfiltered caption, so its
  spans drift after the first removed word.
- the caption filter removes all three word categories by default (the release's launcher: colours).

Settings: ``TrainConfig.structxlip_<name>`` for the fields of :class:`StructXLIPSettings` when present.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from .base import Batch
from .goal import GoalFramework, _clip, normalise_pixels, paired_infonce

__all__ = ["FRAMEWORK", "StructXLIPFramework", "StructXLIPSettings", "annealed_weight", "chunk_embeddings",
           "chunk_token_mask", "clamp_log_logit_scale", "local_edge_loss", "rgb_edge_consistency",
           "structure_loss"]

ANNEAL_FLOORS = {"structure": 0.7, "consistency": 0.5, "local": 0.4}


@dataclass(frozen=True)
class StructXLIPSettings:
    structure_weight: float = 0.5
    consistency_weight: float = 0.05
    local_weight: float = 0.1
    top_k: int = 3  # edge crops per image in the local term (chunk_top_k)
    chunk_tau: float = 0.07
    chunk_window: int = 3
    chunk_stride: int = 1
    max_chunks: int = 64
    max_log_logit_scale: float = 3.5
    lexicon: str = "colour,material,texture"
    anneal_start: float = 0.1
    anneal_end: float = 0.8

    @classmethod
    def from_config(cls, cfg, prefix: str = "structxlip_"):
        values = {f.name: getattr(cfg, prefix + f.name, f.default) for f in dataclasses.fields(cls)}
        settings = cls(**values)
        for name in ("structure_weight", "consistency_weight", "local_weight"):
            if getattr(settings, name) < 0:
                raise ValueError(f"TrainConfig.{prefix}{name}={getattr(settings, name)!r} must be >= 0")
        for name in ("top_k", "chunk_window", "chunk_stride", "max_chunks"):
            if getattr(settings, name) < 1:
                raise ValueError(f"TrainConfig.{prefix}{name}={getattr(settings, name)!r} must be >= 1")
        if settings.chunk_tau <= 0:
            raise ValueError(f"TrainConfig.{prefix}chunk_tau={settings.chunk_tau!r} must be > 0")
        if not 0 <= settings.anneal_start <= settings.anneal_end <= 1:
            raise ValueError(f"TrainConfig.{prefix}anneal_start/anneal_end must satisfy 0 <= start <= end <= 1, "
                             f"got {settings.anneal_start}, {settings.anneal_end}")
        return settings

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(c.strip() for c in self.lexicon.split(",") if c.strip())


# ------------------------------------------------------------------------------------------ pure parts
def annealed_weight(base: float, progress: float, floor: float, start: float = 0.1, end: float = 0.8) -> float:
    """``base`` until ``start``, cosine to ``floor * base`` at ``end``, then ``floor * base``."""
    if progress < start:
        return base
    if progress >= end or end <= start:
        return base * floor
    t = (progress - start) / (end - start)
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
class StructXLIPFramework(GoalFramework):
    """GOAL + StructXLIP's structure terms; ``products = ("segments", "edges")``."""

    name = "structxlip"
    products = ("segments", "edges")

    def __init__(self, cfg, model=None):
        super().__init__(cfg, model)
        self.struct = StructXLIPSettings.from_config(cfg)

    def prepare(self, data, products: Mapping, tokenize) -> None:
        from hnclip.preprocess.edges import EdgeIndex
        from hnclip.preprocess.lexicon import chunk_spans, filter_caption
        from hnclip.preprocess.sentences import char_span_to_tokens, token_offsets

        super().prepare(data, products, tokenize)
        segments = self._data["index"]
        edges = EdgeIndex(products["edges"])
        if edges.segments_sha256 != segments.content_sha256:
            raise ValueError(f"edge product {edges.root} was built from another segment product than "
                             f"{segments.root} (segments_sha256 differs): rebuild the edges")
        k = self.struct.top_k
        crop_rows = np.full((len(data.image_ids), k), -1, dtype=np.int64)
        for row, image_id in enumerate(data.image_ids):
            pairs = segments.record(image_id)["pairs"][:k]
            crop_rows[row, :len(pairs)] = [p["crop"] for p in pairs]
        filtered = [filter_caption(c, self.struct.categories) for c in data.captions]
        spans = np.zeros((len(filtered), self.struct.max_chunks, 2), dtype=np.int64)  # (0, 0): no chunk
        for row, text in enumerate(tqdm(filtered, desc="caption chunks", unit="caption", leave=False)):
            offsets = token_offsets(text)
            chunks = chunk_spans(text, self.struct.chunk_window, self.struct.chunk_stride, self.struct.max_chunks)
            for c, (start, end) in enumerate(chunks):
                spans[row, c] = char_span_to_tokens(offsets, start, end)
        spans = torch.from_numpy(spans)
        self._data.update({"edges": edges, "edge_image_rows": np.asarray([edges.row(i) for i in data.image_ids]),
                           "edge_crop_rows": crop_rows, "filtered_captions": filtered,
                           "filtered_tokens": tokenize(filtered), "chunk_spans": spans})

    def batch_extras(self, positions: torch.Tensor, device: torch.device) -> dict[str, Any]:
        extras = super().batch_extras(positions, device)
        data = self._data
        rows = positions.numpy()
        crop_rows = data["edge_crop_rows"][rows]  # [B, K], -1 = no such pair
        edge_crops = np.asarray(data["edges"].crops[np.maximum(crop_rows, 0).reshape(-1)])
        extras.update({
            "edges": torch.from_numpy(np.asarray(data["edges"].images[data["edge_image_rows"][rows]])).to(device),
            "edge_crops": torch.from_numpy(edge_crops).to(device),
            "edge_valid": torch.from_numpy(crop_rows >= 0).to(device),
            "filtered_tokens": data["filtered_tokens"][positions].to(device, non_blocking=True),
            "chunk_spans": data["chunk_spans"][positions].to(device, non_blocking=True),
        })
        return extras

    def encode(self, model, batch: Batch) -> dict[str, torch.Tensor]:
        clamp_log_logit_scale(model, self.struct.max_log_logit_scale)
        clip = _clip(model)
        extras = batch.extras
        size = batch.pixels.shape[0]
        edges = normalise_pixels(extras["edges"], model.image_mean, model.image_std)
        edge_crops = normalise_pixels(extras["edge_crops"], model.image_mean, model.image_std)
        out, more = self._encode(model, batch, more_images=(edges, edge_crops),
                                 more_texts=(extras["filtered_tokens"],))
        out["edge_features"] = more["images"][:size]
        out["edge_crop_features"] = more["images"][size:].reshape(size, -1, more["images"].shape[-1])
        out["edge_valid"] = extras["edge_valid"]
        out["filtered_features"] = more["texts"]
        final_states = clip.ln_final(more["text_states"])  # StructXLIP reads HF's last_hidden_state (post-LN)
        mask = chunk_token_mask(extras["chunk_spans"], final_states.shape[1], batch.tokens.shape[1])
        chunks = clip.ln_final(chunk_embeddings(final_states, mask)) @ clip.text_projection
        out["chunk_features"] = F.normalize(chunks, dim=-1)
        out["chunk_valid"] = mask.any(dim=-1)
        return out

    def extra_terms(self, out: Mapping[str, torch.Tensor], batch: Batch) -> dict[str, torch.Tensor]:
        terms = super().extra_terms(out, batch)
        scale = out["logit_scale"].float()
        s = self.struct

        def weight(name: str) -> float:
            return annealed_weight(getattr(s, f"{name}_weight"), batch.progress, ANNEAL_FLOORS[name],
                                   s.anneal_start, s.anneal_end)

        terms["structure"] = weight("structure") * structure_loss(
            out["edge_features"].float(), out["filtered_features"].float(), scale)
        terms["consistency"] = weight("consistency") * rgb_edge_consistency(
            out["image_features"].float(), out["edge_features"].float())
        terms["local"] = weight("local") * local_edge_loss(
            out["chunk_features"].float(), out["chunk_valid"], out["edge_crop_features"].float(),
            out["edge_valid"], scale, s.chunk_tau)
        return terms


FRAMEWORK = StructXLIPFramework
