"""The file names of a saved model folder, and the formats one is converted from, in a module without torch, so
light verbs (plan, cost, the CLI's parser) can read them without importing the model code."""

__all__ = ["CONVERSION_JSON", "CONVERT_FORMATS", "FRAMEWORK_JSON", "FRAMEWORK_WEIGHTS", "MODEL_JSON", "MODEL_WEIGHTS"]

MODEL_WEIGHTS = "model.safetensors"
MODEL_JSON = "model.json"
FRAMEWORK_WEIGHTS = "framework.safetensors"
FRAMEWORK_JSON = "framework.json"
CONVERSION_JSON = "conversion.json"  # a converted model's source: format, names, pins, the file's sha256
# what hnclip.models.convert.convert_source converts (config backbone.source and models.<name>.source take them)
CONVERT_FORMATS = ("longclip", "openai", "open_clip", "transformers", "goal", "structxlip", "finelip")
