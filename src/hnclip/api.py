"""Load a fine-tuned model folder for your own code: the model, its image preprocess and its tokenizer.

What open_clip's ``create_model_and_transforms`` + ``get_tokenizer`` give an open_clip user, for a folder
hnclip wrote (``results/runs/<run>/model/``: ``model.json`` + ``model.safetensors``, or any folder
:func:`hnclip.models.save_model` wrote). Built only from the functions training and evaluation use, so
features computed here are the ones the reported Recall@K was computed from:

- the model: :func:`hnclip.models.load_model` (safetensors, so loading never runs code), in eval mode;
- the preprocess: :func:`hnclip.data.image_store.resize_center_crop` (shorter side to the model's size with
  the model's own interpolation, centre crop) then :func:`hnclip.data.image_store.to_model_input` (the
  model's mean and std), i.e. what the image stores and the evaluation apply;
- the tokenizer: the model's :meth:`~hnclip.models.DualEncoder.tokenize` (CLIP's BPE at the model's context
  length, 248 after a Long-CLIP stretch; too-long captions are cut keeping EOT last).

``model.encode_image`` and ``model.encode_text`` return L2-normalised features, so ``image_features @
text_features.T`` is the cosine similarity that retrieval ranks by. A FineLIP run's token aggregators
(``framework.json`` beside the model) are not applied: these are the dual encoder's global features.
Exports in open_clip's and transformers' formats (``results/exports/``) load with those libraries instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from hnclip.data.image_store import resize_center_crop, to_model_input
from hnclip.models import DualEncoder, load_model

__all__ = ["load", "preprocess_for"]


def preprocess_for(model: DualEncoder) -> Callable[[Image.Image], torch.Tensor]:
    """``preprocess(image) -> float32 [3, H, W]`` for ``model``: RGB, resize + centre crop, normalise.

    The same operations, in the same order, as the image stores training and evaluation read (converted to
    RGB before the resize, see :mod:`hnclip.data.image_store`), so no feature differs from the evaluated one.
    """
    height, width = model.image_size
    if height != width:  # resize_center_crop crops squares, as every open_clip eval transform does
        raise ValueError(f"model image size {model.image_size} is not square; hnclip's preprocess crops squares")

    def preprocess(image: Image.Image) -> torch.Tensor:
        pixels = np.asarray(resize_center_crop(image.convert("RGB"), height, model.interpolation))
        return to_model_input(pixels[None], model.image_mean, model.image_std)[0]

    return preprocess


def load(folder, device: str | torch.device = "cpu"
         ) -> tuple[DualEncoder, Callable[[Image.Image], torch.Tensor], Callable[[list[str] | str], torch.Tensor]]:
    """``(model, preprocess, tokenize)`` of the model folder ``folder`` (``model.json`` + ``model.safetensors``).

    ``model`` is in eval mode on ``device``; ``preprocess`` maps a PIL image to a [3, H, W] tensor (stack them
    for a batch); ``tokenize`` maps a caption or a list of them to [B, context_length] token ids (on the CPU,
    as open_clip's tokenizer returns them).
    """
    model = load_model(Path(folder)).to(device).eval()
    return model, preprocess_for(model), model.tokenize
