"""Fine-tuning frameworks behind one interface (:class:`~hnclip.frameworks.base.Framework`).

- :mod:`.base` the interface and :class:`~hnclip.frameworks.base.Batch`; :mod:`.registry` the one row per
  framework (:func:`register_framework`); :mod:`.settings` each framework's settings and its row;
  :mod:`.weight_decay` the AdamW groups every framework's ``param_groups`` builds on.
- :mod:`.longclip` full fine-tuning (optionally Long-CLIP's short-caption PCA term); :mod:`.lora`,
  :mod:`.dora` PEFT adapters; :mod:`.finelip` token aggregation + cross-modal hinge loss;
  :mod:`.goal`, :mod:`.structxlip` segment/sentence (and edge) alignment.

Importing this package does not import torch (the CLI's light verbs and the config layer use the
names only); ``Framework`` and ``Batch`` are loaded on first access.
"""

from __future__ import annotations

from . import settings  # noqa: F401  (runs the built-in frameworks' registration rows)
from .registry import framework_entry, framework_names, get_framework_class, register_framework

__all__ = ["Batch", "Framework", "build_framework", "framework_entry", "framework_names", "get_framework_class",
           "register_framework", "save_framework"]


def build_framework(cfg, model):
    """The framework named by ``cfg.framework``, its modules initialised from the current RNG state."""
    return get_framework_class(cfg.framework)(cfg, model)


def save_framework(framework, directory):
    """Write the framework's name, config and module weights beside a saved model (``directory``)."""
    from hnclip.models.io import save_framework_files

    tensors = {k: v.detach().contiguous().cpu() for k, v in framework.state_dict().items()}
    return save_framework_files(directory, framework.name, framework.cfg.to_dict(), tensors)


def __getattr__(name):
    if name in ("Batch", "Framework"):
        from . import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
