"""The file names of a saved model folder, and the formats one is converted from, in a module without torch, so
light verbs (plan, cost, the CLI's parser) can read them without importing the model code."""

import json
from pathlib import Path

__all__ = ["CONVERSION_JSON", "CONVERT_FORMATS", "EXPORT_FORMATS", "FRAMEWORK_JSON", "FRAMEWORK_WEIGHTS", "MODEL_JSON", "MODEL_WEIGHTS",
           "describe_conversion", "model_geometry"]

MODEL_WEIGHTS = "model.safetensors"
MODEL_JSON = "model.json"
FRAMEWORK_WEIGHTS = "framework.safetensors"
FRAMEWORK_JSON = "framework.json"
CONVERSION_JSON = "conversion.json"  # a converted model's source: format, names, pins, the file's sha256
# what hnclip.models.convert.convert_source converts (config backbone.source and models.<name>.source take them)
CONVERT_FORMATS = ("longclip", "openai", "open_clip", "transformers", "goal", "structxlip", "finelip")
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
