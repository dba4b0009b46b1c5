"""Load a fine-tuned model folder for your own code: the model, its image preprocess and its tokenizer.

What open_clip's ``create_model_and_transforms`` + ``get_tokenizer`` give an open_clip user, for a folder
hnclip wrote (``results/runs/<run>/model/``: ``model.json`` + ``model.safetensors``, or any folder
:func:`hnclip.models.save_model` wrote). Built only from the functions training and evaluation use, so
features computed here are the ones the reported Recall@K was computed from:

- the model: :func:`hnclip.models.load_model` (safetensors, so loading never runs code), in eval mode;
- the preprocess: a torchvision ``Compose`` (RGB, ``Resize`` of the shorter side to the model's size with the
  model's own interpolation, ``CenterCrop``, ``ToTensor``, ``Normalize`` with the model's mean and std) whose
  repr shows each step, as open_clip's does; it gives the tensors of
  :func:`hnclip.data.image_store.resize_center_crop` + :func:`hnclip.data.image_store.to_model_input`, i.e.
  what the image stores and the evaluation apply (tests/test_api.py checks them equal);
- the tokenizer: the model's :meth:`~hnclip.models.DualEncoder.tokenize` (CLIP's BPE at the model's context
  length, 248 after a Long-CLIP stretch; too-long captions are cut keeping EOT last).

``model.encode_image`` and ``model.encode_text`` return L2-normalised features, so ``image_features @
text_features.T`` is the cosine similarity that retrieval ranks by. A FineLIP run's token aggregators
(``framework.json`` beside the model) are not applied: these are the dual encoder's global features.
Exports in open_clip's and transformers' formats (``results/exports/<run>/<format>/``) load with those
libraries, and here too: :func:`load` converts such a folder as the pipeline converts a backbone (checked against
the library's own model on a probe).
"""

from __future__ import annotations

from pathlib import Path

import torch
from PIL import Image

from hnclip.models import DualEncoder, load_model

__all__ = ["load", "preprocess_for"]


class ConvertRGB:
    """``image.convert("RGB")``, first as the image stores do (open_clip's ``_convert_to_rgb``), with a repr."""

    def __call__(self, image: Image.Image) -> Image.Image:
        return image.convert("RGB")

    def __repr__(self) -> str:
        return "ConvertRGB()"


def preprocess_for(model: DualEncoder):
    """``preprocess(image) -> float32 [3, H, W]`` for ``model``: a torchvision ``Compose`` of RGB, resize of the
    shorter side + centre crop at the model's size and interpolation, ``ToTensor`` and ``Normalize``.

    The same operations, in the same order, as the image stores training and evaluation read
    (:mod:`hnclip.data.image_store`: torchvision's size rule and crop offsets, transcribed there), so no feature
    differs from the evaluated one.
    """
    from torchvision import transforms as T

    height, width = model.image_size
    if height != width:  # the stores crop squares, as every open_clip eval transform does
        raise ValueError(f"model image size {model.image_size} is not square; hnclip's preprocess crops squares")
    modes = {"bicubic": T.InterpolationMode.BICUBIC, "bilinear": T.InterpolationMode.BILINEAR}
    return T.Compose([ConvertRGB(), T.Resize(height, interpolation=modes[model.interpolation]), T.CenterCrop(height),
                      T.ToTensor(), T.Normalize(mean=list(model.image_mean), std=list(model.image_std))])


def load_any(folder) -> DualEncoder:
    """The DualEncoder in ``folder``: hnclip's model folder (``model.json``), an open_clip export or local-dir
    folder (``open_clip_config.json``), or a transformers ``save_pretrained`` folder (``config.json``)."""
    folder = Path(folder)
    if (folder / "model.json").is_file():
        return load_model(folder)
    if (folder / "open_clip_config.json").is_file():
        from hnclip.models.from_open_clip import load_open_clip

        return load_open_clip(f"local-dir:{folder}")[0]
    if (folder / "config.json").is_file():
        from hnclip.models.from_transformers import load_transformers_folder

        return load_transformers_folder(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"hnclip.api.load: {folder} does not exist")
    names = ", ".join(sorted(p.name for p in folder.iterdir())[:8]) or "nothing"
    hint = (" (a Long-CLIP export: load it with longclip.load, or convert it with backbone.source: longclip)"
            if (folder / "longclip.pt").is_file() else "")
    raise FileNotFoundError(f"hnclip.api.load: {folder} is not a model folder hnclip reads (it holds {names}; "
                            f"expected model.json, an open_clip export's open_clip_config.json or a transformers "
                            f"folder's config.json){hint}")


def load(folder, device: str | torch.device = "cpu"):
    """``(model, preprocess, tokenize)`` of the model folder ``folder``: hnclip's (``model.json`` +
    ``model.safetensors``), or an export in open_clip's or transformers' format (:func:`load_any`).

    ``model`` is in eval mode on ``device``; ``preprocess`` maps a PIL image to a [3, H, W] tensor (stack them
    for a batch); ``tokenize`` maps a caption or a list of them to [B, context_length] token ids (on the CPU,
    as open_clip's tokenizer returns them).
    """
    model = load_any(folder).to(device).eval()
    return model, preprocess_for(model), model.tokenize
