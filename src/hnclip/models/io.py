"""Saving and loading a trained dual encoder: ``model.safetensors`` (weights) + ``model.json`` (spec).

safetensors rather than pickle, so loading a model directory can never run code.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from safetensors.torch import load_file, save_file
from torch import nn

from .adapters import is_adapted, merge_adapters
from .attention import convert_attention_to_native, has_linear_attention
from .dual_encoder import DualEncoder

__all__ = ["MODEL_JSON", "MODEL_WEIGHTS", "load_model", "save_model"]

MODEL_WEIGHTS = "model.safetensors"
MODEL_JSON = "model.json"
_FORMAT_VERSION = 1


def save_model(model: nn.Module, directory) -> Path:
    """Write ``model`` to ``directory`` (created if needed) and return the directory.

    Adapters are merged, and Linear attention converted back, on a deep copy, so saving a checkpoint
    mid-training leaves the model being trained untouched (costs one model's memory for the moment).
    """
    if is_adapted(model) or has_linear_attention(model):
        model = merge_adapters(copy.deepcopy(model)) if is_adapted(model) else \
            convert_attention_to_native(copy.deepcopy(model))
    if not isinstance(model, DualEncoder):
        raise TypeError(f"save_model needs a DualEncoder (or an adapted one), got {type(model).__name__}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(tensors, str(directory / MODEL_WEIGHTS), metadata={"format": "hnclip-dual-encoder"})
    manifest = {"format_version": _FORMAT_VERSION, "spec": model.spec}
    (directory / MODEL_JSON).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return directory


def load_model(directory) -> DualEncoder:
    """The DualEncoder saved by :func:`save_model` in ``directory``, weights bit-identical."""
    directory = Path(directory)
    spec_path, weights_path = directory / MODEL_JSON, directory / MODEL_WEIGHTS
    for path in (spec_path, weights_path):
        if not path.is_file():
            raise FileNotFoundError(f"model directory {directory}: missing {path.name}")
    try:
        manifest = json.loads(spec_path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{spec_path}: invalid JSON ({err})") from err
    if manifest.get("format_version") != _FORMAT_VERSION or "spec" not in manifest:
        raise ValueError(f"{spec_path}: expected format_version {_FORMAT_VERSION} with a 'spec', got "
                         f"format_version={manifest.get('format_version')!r}")
    model = DualEncoder.from_spec(manifest["spec"])
    state = load_file(str(weights_path), device="cpu")
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(f"{weights_path}: weights do not fit the spec in {spec_path.name}; missing "
                         f"{result.missing_keys[:5]}, unexpected {result.unexpected_keys[:5]}")
    return model
