"""The file names of a saved model folder, in a module without torch, so light verbs (plan, cost) can read a
folder's spec without importing the model code."""

__all__ = ["FRAMEWORK_JSON", "FRAMEWORK_WEIGHTS", "MODEL_JSON", "MODEL_WEIGHTS"]

MODEL_WEIGHTS = "model.safetensors"
MODEL_JSON = "model.json"
FRAMEWORK_WEIGHTS = "framework.safetensors"
FRAMEWORK_JSON = "framework.json"
