"""open_clip's format: a model config JSON (``<name>.json``) and ``open_clip_model.safetensors``.

Our DualEncoder is open_clip's own ``CLIP`` (``hnclip.models.dual_encoder.build_clip``) whose text table is
held in two pieces, so the config is ours with the model's context length, and the weights are the CLIP's
state dict with the table joined: nothing to refuse. Loading::

    open_clip.add_model_config(folder / f"{name}.json")
    model, _, preprocess = open_clip.create_model_and_transforms(
        name, pretrained=str(folder / "open_clip_model.safetensors"), image_mean=MEAN, image_std=STD,
        image_interpolation=INTERPOLATION)  # the model's own resize filter; open_clip's default is bicubic
    tokenizer = open_clip.get_tokenizer(name)  # CLIP's BPE at the model's context length

A model config file carries no normalisation (open_clip's defaults are OpenAI's, which every registry
model uses), so ``open_clip_config.json`` beside it records ``model_cfg`` and ``preprocess_cfg`` as open_clip's
``local-dir:`` / ``hf-hub:`` loaders read them: ``create_model_and_transforms("local-dir:" + folder)``
needs no mean/std/interpolation arguments. The interpolation is the model's own (its ``preprocess_cfg``, what
its image stores were resized with), not open_clip's bicubic default.
"""

from __future__ import annotations

import re
from pathlib import Path

from hnclip.fileio import write_json_atomic
from hnclip.models.weights_files import save_weights

from .common import ExportError, architecture, openai_state_dict

__all__ = ["OPEN_CLIP_CONFIG", "OPEN_CLIP_WEIGHTS", "open_clip_model_config", "write_open_clip"]

OPEN_CLIP_WEIGHTS = "open_clip_model.safetensors"
OPEN_CLIP_CONFIG = "open_clip_config.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def open_clip_model_config(model) -> dict:
    """The open_clip model config (``embed_dim``, ``quick_gelu``, ``vision_cfg``, ``text_cfg``) of ``model``."""
    config = architecture(model).config
    config.pop("preprocess_cfg", None)  # not a CLIP() argument: open_clip_config.json carries it
    return config


def _check_name(name: str) -> None:
    import open_clip

    if not _NAME.match(name):
        raise ExportError(f"open_clip model name {name!r}: use letters, digits, '-', '_' and '.' only "
                          "(it becomes the config file's name)")
    builtin = Path(open_clip.__file__).parent / "model_configs" / f"{name}.json"
    if builtin.is_file():
        raise ExportError(f"open_clip model name {name!r} is one of open_clip's built-in architectures "
                          f"({builtin}); add_model_config would replace it: choose another name")


def write_open_clip(model, out_dir: Path, name: str, where: str = "model") -> list[Path]:
    _check_name(name)
    arch = architecture(model)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = open_clip_model_config(model)
    config_path = out_dir / f"{name}.json"
    write_json_atomic(config_path, config)
    weights_path = out_dir / OPEN_CLIP_WEIGHTS
    save_weights(openai_state_dict(model), weights_path, metadata={"format": "pt"})
    preprocess = {"size": arch.image_size, "mode": "RGB", "mean": list(arch.mean), "std": list(arch.std),
                  "interpolation": arch.interpolation, "resize_mode": "shortest"}
    hub_path = out_dir / OPEN_CLIP_CONFIG
    write_json_atomic(hub_path, {"model_cfg": config, "preprocess_cfg": preprocess})
    return [config_path, weights_path, hub_path]
