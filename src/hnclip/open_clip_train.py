"""HN-CLIP's loss inside open_clip's own trainer, ``open_clip_train.main`` (shipped in open_clip_torch).

open_clip_train builds its loss with ``create_loss(args)`` (imported into ``open_clip_train.main``) and calls it
as ``loss(**model_out, output_dict=True)``, where ``model_out`` is the model's output dict: the normalised
``image_features`` and ``text_features`` and ``logit_scale``, already exponentiated (``CLIP.forward`` returns
``self.logit_scale.exp()``), which is the multiplier :class:`~hnclip.losses.HNClipLoss` expects. So HN-CLIP's
global term needs one patch, made by :func:`install`::

    import hnclip.open_clip_train, open_clip_train.main
    hnclip.open_clip_train.install(gamma=0.5)
    open_clip_train.main.main(["--train-data", "train.csv", ...])

The FILIP token term (``token_weight > 0``) needs token features, which open_clip's ``encode_image`` /
``encode_text`` pool away; :func:`token_features` computes them from an open_clip ``CLIP`` as hnclip's own dual
encoder does (patches after ``ln_post`` and the projection, words after ``ln_final`` and ``text_projection``,
each L2-normalised, the mask true up to and including EOT), and ``install(token_weight=...)`` makes the model
that open_clip_train builds return them from its forward.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

from .losses import HNClipLoss

__all__ = ["install", "make_loss", "token_features", "with_token_outputs"]


def make_loss(args, gamma: float, token_weight: float = 0.0, label_smoothing: float = 0.0) -> HNClipLoss:
    """The ``create_loss(args)`` replacement: an :class:`HNClipLoss` honouring ``--gather-with-grad``; the
    options whose loss HN-CLIP does not define (distillation, SigLIP, CoCa, Horovod) are refused in one line."""
    for flag, refused in (("distill", "--distill"), ("siglip", "--siglip"), ("horovod", "--horovod")):
        if getattr(args, flag, False):
            raise ValueError(f"hnclip.open_clip_train: {refused} has its own loss; HN-CLIP replaces only ClipLoss")
    if "coca" in str(getattr(args, "model", "")).lower():
        raise ValueError(f"hnclip.open_clip_train: --model {args.model} is a CoCa (captioning loss); "
                         "HN-CLIP replaces only ClipLoss")
    return HNClipLoss(gamma=gamma, token_weight=token_weight, label_smoothing=label_smoothing,
                      gather_with_grad=bool(getattr(args, "gather_with_grad", True)))


def _text_tokens(model, texts: torch.Tensor):
    """(pooled, projected word tokens, mask) of open_clip ``CLIP``'s own text tower (``CLIP.encode_text``'s
    stages, the projection applied to every position)."""
    from open_clip.transformer import text_global_pool

    cast_dtype = model.transformer.get_cast_dtype()
    x = model.token_embedding(texts).to(cast_dtype) + model.positional_embedding.to(cast_dtype)
    x = model.ln_final(model.transformer(x, attn_mask=model.attn_mask))
    pooled = text_global_pool(x, texts, model.text_pool_type, eos_token_id=getattr(model, "text_eos_id", None))
    project = model.text_projection
    if isinstance(project, torch.nn.Linear):
        pooled, words = project(pooled), project(x)
    else:
        pooled, words = pooled @ project, x @ project
    eot = texts.argmax(dim=-1)  # EOT has the largest id in CLIP's vocabulary
    mask = torch.arange(texts.shape[1], device=texts.device)[None, :] <= eot[:, None]
    return pooled, words, mask


def token_features(model, images: torch.Tensor, texts: torch.Tensor) -> dict[str, torch.Tensor]:
    """An open_clip ``CLIP``'s forward output dict plus ``image_tokens`` [B, P, D] (patches, no CLS),
    ``text_tokens`` [B, L, D] and ``text_mask`` [B, L]: the keyword arguments of :class:`HNClipLoss`.

    The pooled features are those of ``model.encode_image`` / ``encode_text`` (one pass computes both).
    Only open_clip's plain ``CLIP`` with its ``VisionTransformer`` is supported (not ``CustomTextCLIP``).
    """
    visual = model.visual
    if not hasattr(visual, "_pool") or not hasattr(model, "token_embedding"):
        raise TypeError(f"token_features needs open_clip's CLIP with a VisionTransformer; got "
                        f"{type(model).__name__} with {type(visual).__name__}")
    pooled_image, patches = visual._pool(visual.transformer(visual._embeds(images)))
    if visual.proj is not None:
        pooled_image, patches = pooled_image @ visual.proj, patches @ visual.proj
    pooled_text, words, mask = _text_tokens(model, texts)
    out = {"image_features": F.normalize(pooled_image, dim=-1), "text_features": F.normalize(pooled_text, dim=-1),
           "logit_scale": model.logit_scale.exp(), "image_tokens": F.normalize(patches.float(), dim=-1),
           "text_tokens": F.normalize(words.float(), dim=-1), "text_mask": mask}
    if getattr(model, "logit_bias", None) is not None:
        out["logit_bias"] = model.logit_bias
    return out


def with_token_outputs(model):
    """Make ``model(images, texts)`` return :func:`token_features` (both inputs given) so that open_clip_train's
    ``loss(**model_out)`` receives the token features; a call with one input keeps open_clip's forward."""
    plain_forward = model.forward

    def forward(self, image=None, text=None):
        if image is None or text is None:
            return plain_forward(image, text)
        return token_features(self, image, text)

    model.forward = types.MethodType(forward, model)
    return model


def install(gamma: float = 0.5, token_weight: float = 0.0, label_smoothing: float = 0.0) -> None:
    """Patch ``open_clip_train.main`` so that its next ``main([...])`` trains with HN-CLIP's loss.

    ``create_loss`` becomes :func:`make_loss`; with ``token_weight > 0`` the model that
    ``create_model_and_transforms`` builds also returns token features (:func:`with_token_outputs`).
    Call it once per process, before ``main``; a second call replaces the first's settings.
    """
    import open_clip
    import open_clip_train.main as trainer

    trainer.create_loss = lambda args: make_loss(args, gamma, token_weight, label_smoothing)
    if token_weight:
        def create_model_and_transforms(*args, **kwargs):
            model, *transforms = open_clip.create_model_and_transforms(*args, **kwargs)
            return (with_token_outputs(model), *transforms)

        trainer.create_model_and_transforms = create_model_and_transforms
    else:
        trainer.create_model_and_transforms = open_clip.create_model_and_transforms
