"""The file names of a saved model folder and what a converted one records, in a module without torch, so
light verbs (plan, cost, the CLI's parser) can read them without importing the model code."""

import json
import re
from pathlib import Path

__all__ = ["CONVERSION_JSON", "EXPORT_FORMATS", "FRAMEWORK_JSON", "FRAMEWORK_WEIGHTS", "MODEL_JSON", "MODEL_WEIGHTS",
           "RELEASE_FILE", "describe_conversion", "missing_local_source", "model_geometry"]

MODEL_WEIGHTS = "model.safetensors"
MODEL_JSON = "model.json"
FRAMEWORK_WEIGHTS = "framework.safetensors"
FRAMEWORK_JSON = "framework.json"
CONVERSION_JSON = "conversion.json"  # a converted model's source: format, names, pins, the file's sha256
# a released backbone's record (hnclip.backbone.release writes it), which the regime job reads beside the weights
RELEASE_FILE = "release.json"
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_WEIGHTS_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".ckpt")


def missing_local_source(value: str, kind: str) -> str | None:
    """What is missing when ``value`` names a local file or folder that is not there, else None.

    ``kind``: ``file`` (a checkpoint file, or ``hf://``), ``folder`` (a CLIPModel folder or Hub id
    ``OWNER/NAME``), ``open_clip`` (a pretrained tag or a weights file). A relative folder ``models/my-clip``
    is spelled like a Hub id: it is taken for a local folder when its parent (``models/``) exists here, so a
    missing one is said to be missing instead of being fetched from the Hub (and a download folder made for
    it). Readable without torch, so the config check can ask it before any job runs.
    """
    text = str(value)
    if text.startswith("hf://"):
        return None
    path = Path(text).expanduser()
    if kind == "file" or (kind == "open_clip" and (path.suffix in _WEIGHTS_SUFFIXES or "/" in text)):
        return None if path.is_file() else f"no such file {text} (relative paths are read from {Path.cwd()})"
    if kind == "folder" and not path.is_dir():
        looks_local = text.startswith(("/", ".", "~")) or not _HUB_ID.match(text)
        if looks_local or path.parent.is_dir():
            why = (f"; {path.parent}/ exists here, so it reads as a local folder, not a Hub id OWNER/NAME"
                   if not looks_local else "")
            return f"no such folder {text} (relative paths are read from {Path.cwd()}){why}"
    return None


# what hnclip.export.export_model writes (config export.formats, `hnclip export --format`)
EXPORT_FORMATS = ("longclip", "open_clip", "transformers")


def model_geometry(folder) -> tuple[int, str]:
    """(image side, interpolation) a saved model's image stores must have: its ``vision_cfg.image_size`` and its
    ``preprocess_cfg.interpolation`` (bicubic unless a converter recorded another)."""
    path = Path(folder) / MODEL_JSON
    try:
        config = json.loads(path.read_text())["spec"]["config"]
    except (OSError, KeyError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a saved model's spec ({err})") from err
    size = config["vision_cfg"]["image_size"]
    if isinstance(size, list | tuple):
        if len(set(size)) != 1:
            raise ValueError(f"{path}: non-square image size {size}; the image stores are square")
        size = size[0]
    return int(size), str(config.get("preprocess_cfg", {}).get("interpolation", "bicubic"))


def describe_conversion(folder) -> str | None:
    """One line naming what a converted model folder was made from (None for a folder that records nothing)."""
    path = Path(folder) / CONVERSION_JSON
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    text = " ".join(str(record[k]) for k in ("format", "model", "checkpoint") if record.get(k))
    if record.get("base"):
        text += f" over {record['base']}"
    if record.get("stretch") is not None:
        text += ", stretched to 248 text positions"
    return text
