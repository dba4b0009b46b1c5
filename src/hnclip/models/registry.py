"""Architecture registry: the JSON files in ``hnclip/model_configs/`` keyed by file stem.

A config has open_clip's shape (``embed_dim``, ``quick_gelu``, ``vision_cfg``, ``text_cfg``, optional
``preprocess_cfg`` with ``mean``/``std`` and, for a model converted from open_clip or transformers, its
``interpolation``: the image stores it reads must be resized the same way), restricted to the keys
:class:`DualEncoder` supports: it
re-implements the text path and reads patch tokens itself, so open_clip options that change pooling or
add towers (attentional pooling, timm/HF towers, CLS text embedding...) would silently be ignored and
are rejected instead.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

__all__ = ["CONFIG_DIR", "INTERPOLATIONS", "check_config", "find_config_name", "get_model_config", "list_models"]

CONFIG_DIR = Path(__file__).resolve().parent.parent / "model_configs"

_TOP_KEYS = {"embed_dim", "quick_gelu", "vision_cfg", "text_cfg", "preprocess_cfg"}
_VISION_KEYS = {"image_size", "patch_size", "width", "layers", "head_width", "mlp_ratio", "ls_init_value",
                "patch_dropout"}
_TEXT_KEYS = {"context_length", "vocab_size", "width", "heads", "layers", "mlp_ratio", "ls_init_value"}
_PREPROCESS_KEYS = {"mean", "std", "interpolation"}
# how the image stores resize (hnclip.data.image_store.RESAMPLE): a model resized otherwise is refused
INTERPOLATIONS = ("bicubic", "bilinear")

_registry: dict[str, dict] = {}


def check_config(config: dict, where: str) -> None:
    """Raise ValueError naming ``where`` and the key if ``config`` uses anything DualEncoder cannot honour."""
    if not isinstance(config, dict):
        raise ValueError(f"{where}: a model config must be a JSON object, got {type(config).__name__}")
    for required in ("embed_dim", "vision_cfg", "text_cfg"):
        if required not in config:
            raise ValueError(f"{where}: missing key {required!r}")
    sections = [("", config, _TOP_KEYS), ("vision_cfg.", config["vision_cfg"], _VISION_KEYS),
                ("text_cfg.", config["text_cfg"], _TEXT_KEYS)]
    if "preprocess_cfg" in config:
        sections.append(("preprocess_cfg.", config["preprocess_cfg"], _PREPROCESS_KEYS))
    for prefix, section, allowed in sections:
        unknown = sorted(set(section) - allowed)
        if unknown:
            raise ValueError(f"{where}: unsupported key(s) {[prefix + k for k in unknown]}; "
                             f"supported under {prefix or 'top level'}: {sorted(allowed)}")
    interpolation = config.get("preprocess_cfg", {}).get("interpolation", "bicubic")
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"{where}: preprocess_cfg.interpolation={interpolation!r} is not one the image stores "
                         f"resize with ({', '.join(INTERPOLATIONS)})")
    vision, text = config["vision_cfg"], config["text_cfg"]
    required_keys = (("vision_cfg.", vision, ("image_size", "patch_size", "width", "layers")),
                     ("text_cfg.", text, ("width", "heads", "layers")))
    for prefix, section, required in required_keys:
        for key in required:
            if key not in section:
                raise ValueError(f"{where}: missing key {prefix + key!r}")
    if vision["width"] % vision.get("head_width", 64):
        raise ValueError(f"{where}: vision_cfg.width={vision['width']} is not a multiple of "
                         f"head_width={vision.get('head_width', 64)}")
    if text["width"] % text["heads"]:
        raise ValueError(f"{where}: text_cfg.width={text['width']} is not a multiple of "
                         f"heads={text['heads']}")


def _load_registry() -> dict[str, dict]:
    if not _registry:
        paths = sorted(CONFIG_DIR.glob("*.json"))
        if not paths:
            raise FileNotFoundError(f"no model configs found in {CONFIG_DIR}")
        for path in paths:
            with path.open() as handle:
                try:
                    config = json.load(handle)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}: invalid JSON ({err})") from err
            check_config(config, str(path))
            _registry[path.stem] = config
    return _registry


def list_models() -> list[str]:
    """Names accepted by :func:`hnclip.models.create_model`."""
    return sorted(_load_registry())


def get_model_config(name: str) -> dict:
    """A deep copy of config ``name`` (callers may edit it without touching the registry)."""
    registry = _load_registry()
    if name not in registry:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(list_models())}")
    return copy.deepcopy(registry[name])


def find_config_name(config: dict) -> str | None:
    """The registry name whose architecture equals ``config`` up to the text context length, if any.

    The context length is ignored because a spec records it separately: an OpenAI 77-token ViT-L/14
    and Long-CLIP-L share every other dimension.
    """
    def strip(cfg: dict) -> dict:
        cfg = copy.deepcopy(cfg)
        cfg["text_cfg"].pop("context_length", None)
        return cfg

    target = strip(config)
    for name, candidate in sorted(_load_registry().items()):
        if strip(candidate) == target:
            return name
    return None
