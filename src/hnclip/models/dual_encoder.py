"""The dual encoder: an open_clip ``CLIP`` with Long-CLIP's split positional table and token outputs.

What a model reads besides its weights is in its spec: the image normalisation and the interpolation its
image stores must be resized with (``config["preprocess_cfg"]``, open_clip's names), and its tokenizer
(``tokenizer``, CLIP's lower-cased BPE, recorded by the converters of open_clip and transformers models once
they checked that the library's own tokenizer gives the same ids; :data:`TOKENIZERS`).

Why not call ``CLIP.encode_text``: Long-CLIP keeps positional rows ``[0, 20)`` fixed and trains the
rest, which needs the table in two pieces (a buffer, so no optimizer or weight decay can reach it, and
a Parameter). The text path is therefore rebuilt from the CLIP's own submodules; the image path is
open_clip's, only read at the patch tokens as well. Both towers run once per call whether or not the
token outputs are requested.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD
from open_clip.model import CLIP, CLIPTextCfg, CLIPVisionCfg
from torch import nn

from .registry import check_config, get_model_config
from .tokenizer import tokenize

__all__ = ["TOKENIZERS", "DualEncoder", "build_clip", "normalize_tokens"]

MAX_LOGIT_SCALE = 100.0
# the tokenizers a model can name (hnclip.models.tokenizer): CLIP's BPE, lower-cased, zero-padded, EOT last
TOKENIZERS = ("clip",)


def build_clip(config: dict, context_length: int) -> CLIP:
    """A randomly initialised open_clip CLIP for ``config`` with a ``context_length``-token text tower."""
    text_cfg = dict(config["text_cfg"], context_length=context_length)
    return CLIP(
        config["embed_dim"],
        vision_cfg=CLIPVisionCfg(**config["vision_cfg"]),
        text_cfg=CLIPTextCfg(**text_cfg),
        quick_gelu=bool(config.get("quick_gelu", False)),
        init_logit_scale=math.log(MAX_LOGIT_SCALE),
    )


def normalize_tokens(tokens: torch.Tensor) -> torch.Tensor:
    """L2-normalised token features, in float32 at least whatever autocast made them (float64 stays).

    Padded caption positions are zero vectors (see ``DualEncoder._encode_text``). ``F.normalize`` divides by
    ``max(norm, 1e-12)``, and 1e-12 underflows to 0 in float16: the zeros become 0/0 = NaN, which the token
    loss masks in its forward but not in its backward (a NaN times a zero gradient), so under fp16 every
    step's gradients were non-finite and the gradient scaler skipped them all. float32 keeps the eps;
    the losses read float32 anyway, at the cost of float32 token tensors ([B, L, D]).
    """
    return F.normalize(tokens.to(torch.promote_types(tokens.dtype, torch.float32)), dim=-1)


_normalize_tokens = normalize_tokens  # forward's argument of the same name shadows it


class DualEncoder(nn.Module):
    """CLIP image/text encoders returning normalised global features and, on request, token features.

    Args:
        config: architecture dict (see :mod:`hnclip.models.registry`).
        context_length: text positions; defaults to ``config["text_cfg"]["context_length"]``.
        frozen_positions: leading positional rows held as a buffer (Long-CLIP freezes 20).
        name: registry name of ``config`` (or the source a converter read it from), recorded in :attr:`spec`
            for readability only.
        tokenizer: the tokenizer's name in :data:`TOKENIZERS`, recorded in :attr:`spec` when given (None: CLIP's
            BPE, unrecorded, as every model saved before converters recorded it).
    """

    def __init__(self, config: dict, context_length: int | None = None, frozen_positions: int = 0,
                 name: str | None = None, tokenizer: str | None = None):
        super().__init__()
        where = f"model config {name!r}" if name else "model config"
        check_config(config, where)
        config = copy.deepcopy(config)
        context_length = int(context_length or config["text_cfg"].get("context_length", 77))
        if context_length < 2:
            raise ValueError(f"{where}: context_length must be >= 2 (SOT and EOT), got {context_length}")
        if not 0 <= frozen_positions <= context_length:
            raise ValueError(f"{where}: frozen_positions must lie in [0, {context_length}], "
                             f"got {frozen_positions}")
        if tokenizer is not None and tokenizer not in TOKENIZERS:
            raise ValueError(f"{where}: tokenizer {tokenizer!r} is not supported; supported: {', '.join(TOKENIZERS)}")
        self._config = config
        self._name = name
        self._tokenizer = tokenizer
        self.frozen_positions = int(frozen_positions)
        self.clip = build_clip(config, context_length)

        table = self.clip.positional_embedding.detach().clone()
        del self.clip.positional_embedding  # a stale full table would silently shadow the split one
        self.register_buffer("positional_embedding_frozen", table[:frozen_positions].clone())
        self.positional_embedding_trainable = nn.Parameter(table[frozen_positions:].clone())
        self.logit_scale = nn.Parameter(self.clip.logit_scale.detach().clone())
        del self.clip.logit_scale

        preprocess = config.get("preprocess_cfg", {})
        self.image_mean = tuple(float(v) for v in preprocess.get("mean", OPENAI_DATASET_MEAN))
        self.image_std = tuple(float(v) for v in preprocess.get("std", OPENAI_DATASET_STD))
        # how the image stores this model reads must have been resized (checked by hnclip.evaluate)
        self.interpolation = str(preprocess.get("interpolation", "bicubic"))
        self.image_size = tuple(int(v) for v in self.clip.visual.image_size)
        self.context_length = context_length
        self.embed_dim = int(config["embed_dim"])

    @classmethod
    def from_spec(cls, spec: dict) -> DualEncoder:
        """Rebuild the (randomly initialised) architecture described by :attr:`spec`."""
        missing = [k for k in ("context_length", "frozen_positions") if k not in spec]
        if missing or ("config" not in spec and "name" not in spec):
            raise ValueError(f"model spec lacks {missing or ['config']}: {spec}")
        config = spec.get("config") or get_model_config(spec["name"])
        return cls(config, spec["context_length"], spec["frozen_positions"], spec.get("name"), spec.get("tokenizer"))

    @property
    def spec(self) -> dict:
        """JSON-serialisable description that :meth:`from_spec` turns back into this architecture."""
        spec = {"name": self._name, "config": copy.deepcopy(self._config),
                "context_length": self.context_length, "frozen_positions": self.frozen_positions}
        if self._tokenizer is not None:
            spec["tokenizer"] = self._tokenizer
        return spec

    def positional_embedding(self) -> torch.Tensor:
        """The full [context_length, width] text positional table (frozen rows first)."""
        return torch.cat([self.positional_embedding_frozen, self.positional_embedding_trainable], dim=0)

    def tokenize(self, texts: list[str] | str) -> torch.LongTensor:
        return tokenize(texts, self.context_length)

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """Recompute each block's activations in backward: one extra block forward per block, for most
        of the activation memory (what lets ViT-L train on 248-token captions at large batch)."""
        self.clip.set_grad_checkpointing(enable)

    def _encode_image(self, images: torch.Tensor, with_tokens: bool):
        visual = self.clip.visual
        if not with_tokens:
            return visual(images), None
        # open_clip's forward drops the patch tokens unless the tower was built with output_tokens,
        # which would also change CLIP.encode_image's return type; run its stages here instead
        x = visual.transformer(visual._embeds(images))
        pooled, patches = visual._pool(x)
        return pooled @ visual.proj, patches @ visual.proj

    def _encode_text(self, tokens: torch.Tensor, with_tokens: bool):
        if tokens.ndim != 2 or tokens.shape[1] != self.context_length:
            raise ValueError(f"tokens must have shape [B, {self.context_length}] for this model, "
                             f"got {tuple(tokens.shape)}")
        eot = tokens.argmax(dim=-1)  # EOT has the largest id in CLIP's vocabulary
        # Attention is causal and pooling reads EOT, so columns after the batch's last EOT cannot reach
        # any output we keep: skip them. Costs one host sync; saves most of the text compute when
        # 248-position rows are mostly padding.
        length = int(eot.max()) + 1
        x = self.clip.token_embedding(tokens[:, :length])
        x = x + self.positional_embedding()[:length].to(x.dtype)
        x = self.clip.transformer(x, attn_mask=self.clip.attn_mask[:length, :length])
        x = self.clip.ln_final(x)
        rows = torch.arange(tokens.shape[0], device=tokens.device)
        if not with_tokens:
            return x[rows, eot] @ self.clip.text_projection, None, None
        projected = F.pad(x @ self.clip.text_projection, (0, 0, 0, tokens.shape[1] - length))
        # a position is real up to and including EOT; comparing ids with the pad id 0 would also
        # mask the token "!", whose id is 0
        mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] <= eot[:, None]
        return projected[rows, eot], projected, mask

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        return F.normalize(self._encode_image(images, with_tokens=False)[0], dim=-1)

    def encode_text(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.normalize(self._encode_text(tokens, with_tokens=False)[0], dim=-1)

    def scale(self) -> torch.Tensor:
        """The logit scale s the losses multiply cosines by: exp of the learned log-scale, clamped at
        ``MAX_LOGIT_SCALE`` as CLIP clamps it; the one place that expression is written."""
        return self.logit_scale.exp().clamp(max=MAX_LOGIT_SCALE)

    def forward(self, images: torch.Tensor | None, tokens: torch.Tensor | None,
                with_tokens: bool = False, normalize_tokens: bool = True) -> dict[str, torch.Tensor]:
        """Normalised features of both towers and the exponentiated, clamped logit scale.

        With ``with_tokens``: ``image_tokens`` [B, P, D] (patches without CLS, after ln_post and the
        projection), ``text_tokens`` [B, L, D] and ``text_mask`` [B, L] (True up to and including EOT),
        each real token L2-normalised, or left as projected with ``normalize_tokens=False`` (FineLIP's
        aggregators weight the raw projected tokens); positions after the batch's longest caption are
        zero vectors (never computed, see ``_encode_text``). Passing None for one input skips that tower.
        """
        out = {"logit_scale": self.scale()}
        if images is not None:
            pooled, patches = self._encode_image(images, with_tokens)
            out["image_features"] = F.normalize(pooled, dim=-1)
            if with_tokens:
                out["image_tokens"] = _normalize_tokens(patches) if normalize_tokens else patches
        if tokens is not None:
            pooled, token_features, mask = self._encode_text(tokens, with_tokens)
            out["text_features"] = F.normalize(pooled, dim=-1)
            if with_tokens:
                out["text_tokens"] = (_normalize_tokens(token_features) if normalize_tokens
                                      else token_features)
                out["text_mask"] = mask
        return out
