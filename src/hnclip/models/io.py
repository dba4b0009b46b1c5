"""Saving and loading a trained dual encoder: ``model.safetensors`` (weights) + ``model.json`` (spec).

Beside them, a fine-tuning framework's extra modules (e.g. FineLIP's token aggregators, used again at
evaluation): ``framework.json`` (name + run config) and ``framework.safetensors`` (their weights, only
when there are any). safetensors rather than pickle, so loading a model directory can never run code.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from torch import nn

from hnclip.model_files import FRAMEWORK_JSON, FRAMEWORK_WEIGHTS, MODEL_JSON, MODEL_WEIGHTS

from .adapters import is_adapted, merge_adapters
from .attention import convert_attention_to_native, has_linear_attention
from .dual_encoder import DualEncoder
from .weights_files import load_weights, save_weights

__all__ = ["FRAMEWORK_JSON", "FRAMEWORK_WEIGHTS", "MODEL_JSON", "MODEL_WEIGHTS", "load_model", "read_framework_files",
           "save_framework_files", "save_model"]

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
    save_weights(tensors, directory / MODEL_WEIGHTS, metadata={"format": "hnclip-dual-encoder"})
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
    state = load_weights(weights_path)
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(f"{weights_path}: weights do not fit the spec in {spec_path.name}; missing "
                         f"{result.missing_keys[:5]}, unexpected {result.unexpected_keys[:5]}")
    return model


def save_framework_files(directory, name: str, config: dict, tensors: dict) -> Path:
    """Write ``framework.json`` ({name, config}) and, if ``tensors`` is not empty, ``framework.safetensors``.

    A stale weights file from an earlier save into the same folder is removed, so the folder never
    pairs one framework's json with another's weights.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights = directory / FRAMEWORK_WEIGHTS
    if tensors:
        save_weights(tensors, weights, metadata={"format": "hnclip-framework", "framework": name})
    else:
        weights.unlink(missing_ok=True)
    manifest = {"format_version": _FORMAT_VERSION, "framework": name, "config": config,
                "has_weights": bool(tensors)}
    (directory / FRAMEWORK_JSON).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return directory


def read_framework_files(directory):
    """(name, config, tensors, json path) saved by :func:`save_framework_files`, or None if there is none."""
    directory = Path(directory)
    spec_path = directory / FRAMEWORK_JSON
    if not spec_path.is_file():
        return None
    try:
        manifest = json.loads(spec_path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{spec_path}: invalid JSON ({err})") from err
    missing = [k for k in ("framework", "config", "has_weights") if k not in manifest]
    if manifest.get("format_version") != _FORMAT_VERSION or missing:
        raise ValueError(f"{spec_path}: expected format_version {_FORMAT_VERSION} with framework, config and "
                         f"has_weights; got format_version={manifest.get('format_version')!r}, missing {missing}")
    tensors = {}
    if manifest["has_weights"]:
        weights_path = directory / FRAMEWORK_WEIGHTS
        if not weights_path.is_file():
            raise FileNotFoundError(f"{spec_path} announces module weights but {weights_path} is missing")
        tensors = load_weights(weights_path)
    return manifest["framework"], manifest["config"], tensors, spec_path
