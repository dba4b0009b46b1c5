"""hnclip: the HN-CLIP reproduction library (losses, models, data adapters, training, evaluation)."""

__version__ = "0.1.0"
