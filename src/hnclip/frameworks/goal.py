"""GOAL (Choi et al., CVPR 2025): global CLIP plus segment-sentence alignment from SAM segments.

Per micro-batch, each image brings its best local pair from the segment product
(:mod:`hnclip.preprocess.segments`): a SAM segment crop and the caption sentence matched to it. The
loss is GOAL's (PerceptualAI-Lab/GOAL ``goal_loss_finetuning.py``, ``train``:
``loss = loss_org + 0.5 * loss_seg + loss_patch + loss_text``), re-written:

    global                       CLIP InfoNCE of images vs captions (the term +HN replaces; GOAL's
                                 ``clip_loss`` has no label smoothing)
    + 0.5 * segment              InfoNCE of crops vs their sentences, same learnable scale
    + 1.0 * patch                mean over the batch of (cos(box tokens, crop) - 1)^2
    + 1.0 * text                 mean over the batch of (cos(span tokens, sentence) - 1)^2

*Box tokens*: the image's last-layer patch states (before ``ln_post``) of every patch the segment's
box touches (GOAL's rule: floor of the start, ceiling of the end, in patch units), averaged, then
``ln_post`` and the projection, as GOAL pools HF CLIP's last hidden state and applies
``post_layernorm`` + ``visual_projection``. *Span tokens*: the caption's last-layer token states
(before ``ln_final``) of the sentence's token span, averaged, then ``ln_final`` and the text
projection. Both states are read with forward hooks on ``ln_post`` / ``ln_final`` during the forward
pass that also gives the global features, so nothing is encoded twice (GOAL runs the towers a second
time for them); the segment sentences have a text pass of their own (:meth:`GoalFramework.encode`).

Choices where GOAL's code is not the reference we follow:
- a pair whose box lies outside the image store's centre crop, or whose sentence was truncated away
  from a 248-token caption, leaves the patch or text term for that row (mean over the other rows);
  GOAL rescales boxes as if images were resized without cropping and clamps spans to the last tokens;
- the span is the sentence's own tokens. GOAL's ``get_text_tokens_from_segment`` (commit 2db3d4a)
  starts it at ``len(processor(text_before).input_ids)``, a count that includes SOT *and* EOT, so its
  span is one position late (drops the sentence's first token, takes the token after its last); kept
  as the sentence here: the text term is ~1 % of the auxiliary gradient at the toy scale;
- the four terms are computed in float32 outside autocast, like the global term.

Settings: :class:`~hnclip.frameworks.settings.GoalSettings` (``train.goal`` in the workflow config).
GOAL's optimiser (``init_lr`` 5e-6, ``weight_decay`` 0.05, a cosine from the first step to ``min_lr``
0 without warmup, batch 16) is the paper config's recipe for the GOAL methods.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .base import Batch, Framework
from .settings import GoalSettings

__all__ = ["FRAMEWORK", "GoalFramework", "GoalSettings", "alignment_loss", "box_patch_mask", "captured_inputs",
           "normalise_pixels", "paired_infonce", "pool_masked", "span_token_mask"]


# ------------------------------------------------------------------------------------------ pure parts
def paired_infonce(a: torch.Tensor, b: torch.Tensor, logit_scale) -> torch.Tensor:
    """Symmetric InfoNCE of normalised rows ``a`` [B, D] vs ``b`` [B, D]; row i's positive is row i."""
    logits = logit_scale * a @ b.T
    labels = torch.arange(a.shape[0], device=a.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


def alignment_loss(pooled: torch.Tensor, target: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over valid rows of ``(cos(pooled_i, target_i) - 1)^2`` (GOAL's MSE of the cosine to 1).

    Zero (with a graph) when no row is valid, so a micro-batch without usable boxes still backpropagates.
    """
    cos = (F.normalize(pooled, dim=-1) * F.normalize(target, dim=-1)).sum(dim=-1)
    squared = (cos - 1.0) ** 2
    if valid is None:
        return squared.mean()
    valid = valid.to(squared.dtype)
    return (squared * valid).sum() / valid.sum().clamp(min=1.0)


def box_patch_mask(boxes: torch.Tensor, grid: tuple[int, int], image_size: int) -> torch.Tensor:
    """bool [B, gh * gw]: the patches (row-major) each box touches; boxes are fractions of the image side.

    GOAL's rule in pixels: ``x1 = round(fx1 * S)`` (clamped), first patch ``x1 // p``, last patch
    ``ceil(x2 / p) - 1``; a box too thin to reach a patch boundary still covers the patch it lies in.
    Rows with a NaN box are all False.
    """
    grid_h, grid_w = grid
    patch_h, patch_w = image_size / grid_h, image_size / grid_w
    pixels = torch.round(torch.nan_to_num(boxes.double(), nan=0.0) * image_size)
    x1, y1, x2, y2 = pixels.clamp(0, image_size).unbind(dim=-1)
    cols0, rows0 = torch.floor(x1 / patch_w), torch.floor(y1 / patch_h)
    cols1 = torch.maximum(torch.ceil(x2 / patch_w), cols0 + 1).clamp(max=grid_w)
    rows1 = torch.maximum(torch.ceil(y2 / patch_h), rows0 + 1).clamp(max=grid_h)
    cols0, rows0 = cols0.clamp(max=grid_w - 1), rows0.clamp(max=grid_h - 1)
    cols = torch.arange(grid_w, device=boxes.device, dtype=torch.float64)
    rows = torch.arange(grid_h, device=boxes.device, dtype=torch.float64)
    in_cols = (cols >= cols0[:, None]) & (cols < cols1[:, None])
    in_rows = (rows >= rows0[:, None]) & (rows < rows1[:, None])
    mask = (in_rows[:, :, None] & in_cols[:, None, :]).reshape(boxes.shape[0], grid_h * grid_w)
    return mask & ~torch.isnan(boxes).any(dim=-1, keepdim=True)


def span_token_mask(spans: torch.Tensor, length: int, context_length: int) -> torch.Tensor:
    """bool [B, length]: positions ``[start, end)`` of each span, clipped to the caption's content tokens.

    With truncation the last of ``context_length`` positions holds EOT, so content ends at
    ``context_length - 1``; ``length`` (<= context_length) is how many positions the text tower ran.
    """
    positions = torch.arange(length, device=spans.device)
    end = spans[:, 1:2].clamp(max=context_length - 1)
    return (positions >= spans[:, 0:1]) & (positions < end)


def pool_masked(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``states`` [B, N, W] over the True positions of ``mask`` [B, N] (zeros for empty rows)."""
    weights = mask.to(states.dtype)
    return (weights[..., None] * states).sum(dim=1) / weights.sum(dim=1, keepdim=True).clamp(min=1.0)


def normalise_pixels(pixels: torch.Tensor, mean, std) -> torch.Tensor:
    """float32 [B, 3, H, W] of uint8 [B, H, W, 3] (or [B, H, W] edge maps, replicated to three channels).

    The same operations in the same order as :func:`hnclip.data.image_store.to_model_input`, so a crop
    is normalised bit-identically to the store's images.
    """
    if pixels.ndim == 3:
        pixels = pixels[..., None].expand(*pixels.shape, 3)
    x = pixels.permute(0, 3, 1, 2).to(torch.float32, memory_format=torch.contiguous_format).div_(255.0)
    mean = torch.as_tensor(mean, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    std = torch.as_tensor(std, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    return x.sub_(mean).div_(std)


@contextlib.contextmanager
def captured_inputs(**modules):
    """Within the block, ``captured[name]`` is the first input of ``modules[name]``'s last call (with grad)."""
    captured: dict[str, torch.Tensor] = {}
    handles = [module.register_forward_hook(lambda _m, args, _out, key=key: captured.__setitem__(key, args[0]))
               for key, module in modules.items()]
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


def _clip(model):
    clip = getattr(model, "clip", None)
    if clip is None:
        raise TypeError(f"GOAL and StructXLIP need a plain DualEncoder (they read its tower internals), got "
                        f"{type(model).__name__}")
    return clip


# ------------------------------------------------------------------------------------------ framework
class GoalFramework(Framework):
    """GOAL's objective on the one training loop; ``products = ("segments",)``."""

    name = "goal"

    def __init__(self, cfg, model=None):
        super().__init__(cfg, model)
        self._data: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------ data
    def prepare(self, data, products: Mapping, tokenize) -> None:
        from hnclip.preprocess.segments import SegmentIndex

        index = SegmentIndex(products["segments"])
        best = [self._best_pair(index, image_id, caption)
                for image_id, caption in zip(data.image_ids, data.captions, strict=True)]
        boxes = [p["box_store"] if p["box_store"] is not None else [float("nan")] * 4 for p in best]
        self._data = {
            "index": index,
            "crop_rows": np.asarray([p["crop"] for p in best], dtype=np.int64),
            "sentence_tokens": tokenize([p["sentence"] for p in best]),
            "boxes": torch.tensor(boxes, dtype=torch.float32),
            "token_spans": torch.tensor([p["token_span"] for p in best], dtype=torch.long),
        }

    @staticmethod
    def _best_pair(index, image_id: str, caption: str) -> dict:
        pair = index.record(image_id)["pairs"][0]  # stored best score first: GOAL trains on the top pair
        start, end = pair["char_span"]
        if caption[start:end] != pair["sentence"]:
            raise ValueError(f"segment product {index.root}: image_id {image_id!r} pairs the sentence "
                             f"{pair['sentence']!r}, but the training caption has {caption[start:end]!r} at "
                             f"[{start}, {end}); the product was built from other captions (caption_column?)")
        return pair

    def _require_prepared(self) -> dict:
        if not self._data:
            raise RuntimeError(f"framework {self.name!r}: prepare() must run before training")
        return self._data

    def batch_extras(self, positions: torch.Tensor, device: torch.device) -> dict[str, Any]:
        data = self._require_prepared()
        rows = positions.numpy()
        crops = torch.from_numpy(np.ascontiguousarray(data["index"].crops[data["crop_rows"][rows]]))
        return {"crops": crops.to(device, non_blocking=True),  # uint8: a quarter of the float transfer
                "sentence_tokens": data["sentence_tokens"][positions].to(device, non_blocking=True),
                "boxes": data["boxes"][positions].to(device, non_blocking=True),
                "token_spans": data["token_spans"][positions].to(device, non_blocking=True)}

    # ------------------------------------------------------------------------------------------ training
    def encode(self, model, batch: Batch) -> dict[str, torch.Tensor]:
        """GOAL's features: one pass over images + crops and captions, one over the segment sentences.

        The sentences get a text pass of their own because the text tower runs up to the longest caption
        of its batch (:meth:`DualEncoder._encode_text`): joined to the dense captions, each ~20-token
        sentence would be run at the captions' ~150 positions, doubling the text tower's work. Rows never
        interact (causal attention, pooling at each row's EOT), so the features are the same either way.
        """
        clip = _clip(model)
        extras = batch.extras
        size = batch.pixels.shape[0]
        crops = normalise_pixels(extras["crops"], model.image_mean, model.image_std)
        if crops.shape[1:] != batch.pixels.shape[1:]:
            raise ValueError(f"segment crops are {tuple(crops.shape[1:])} but the model's images are "
                             f"{tuple(batch.pixels.shape[1:])}: rebuild the segment product for this model")
        with captured_inputs(vision=clip.visual.ln_post, text=clip.ln_final) as states:
            out = model(torch.cat([batch.pixels, crops]), batch.tokens, with_tokens=self.needs_tokens)
        sentences = model(None, extras["sentence_tokens"])
        result = {"logit_scale": out["logit_scale"],
                  "image_features": out["image_features"][:size], "text_features": out["text_features"],
                  "crop_features": out["image_features"][size:], "sentence_features": sentences["text_features"]}
        if self.needs_tokens:
            for key in ("image_tokens", "text_tokens"):
                result[key] = out[key][:size]
            result["text_mask"] = out["text_mask"]

        visual = clip.visual
        patches = states["vision"][:size, 1:]  # drop CLS
        box_mask = box_patch_mask(extras["boxes"], tuple(visual.grid_size), int(model.image_size[0]))
        result["box_features"] = visual.ln_post(pool_masked(patches, box_mask)) @ visual.proj
        result["box_valid"] = box_mask.any(dim=1)
        text_states = states["text"]
        span_mask = span_token_mask(extras["token_spans"], text_states.shape[1], batch.tokens.shape[1])
        result["span_features"] = clip.ln_final(pool_masked(text_states, span_mask)) @ clip.text_projection
        result["span_valid"] = span_mask.any(dim=1)
        return result

    def extra_terms(self, out: Mapping[str, torch.Tensor], batch: Batch) -> dict[str, torch.Tensor]:
        scale = out["logit_scale"].float()
        s = self.settings
        return {
            "segment": s.segment_weight * paired_infonce(
                out["crop_features"].float(), out["sentence_features"].float(), scale),
            "patch": s.patch_weight * alignment_loss(
                out["box_features"].float(), out["crop_features"].float(), out["box_valid"]),
            "text": s.text_weight * alignment_loss(
                out["span_features"].float(), out["sentence_features"].float(), out["span_valid"]),
        }


FRAMEWORK = GoalFramework
