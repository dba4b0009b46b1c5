"""Framework name -> module, settings section, products and "+HN" meaning. Torch-free, so the config
layer and the workflow read them cheaply.

Each module defines ``FRAMEWORK``, its :class:`~hnclip.frameworks.base.Framework` subclass; it is
imported only when a run asks for it (a module that fails to import breaks only that framework). The
tables below restate class attributes (``products``, ``settings_class``, ``hn_plugin``) so that readers
need not import torch; ``tests/test_frameworks_losses.py`` checks that they agree.
"""

from __future__ import annotations

import importlib

__all__ = ["FRAMEWORK_HN_PLUGIN", "FRAMEWORK_MODULES", "FRAMEWORK_NAMES", "FRAMEWORK_PRODUCTS", "FRAMEWORK_SECTIONS",
           "get_framework_class"]

FRAMEWORK_MODULES = {
    "longclip": "hnclip.frameworks.longclip",
    "lora": "hnclip.frameworks.lora",
    "dora": "hnclip.frameworks.dora",
    "finelip": "hnclip.frameworks.finelip",
    "goal": "hnclip.frameworks.goal",
    "structxlip": "hnclip.frameworks.structxlip",
}
FRAMEWORK_NAMES = tuple(FRAMEWORK_MODULES)
# Cached preprocessing products each framework trains on; the workflow's train rule takes them as inputs.
# StructXLIP needs the segments too: its local term matches caption chunks with the edge maps of each
# image's best-scoring segment crops (StructXLIP structxlip/dataloader.py ranks an image's segments by
# similarity_score and keeps chunk_top_k), and the segment product is where that ranking lives.
FRAMEWORK_PRODUCTS: dict[str, tuple[str, ...]] = {"goal": ("segments",), "structxlip": ("segments", "edges")}
# The ``train.<section>`` of the workflow config (and ``--set <section>.<key>``) holding each framework's
# settings (hnclip.frameworks.settings); DoRA is LoRA with a magnitude vector and shares its settings.
FRAMEWORK_SECTIONS: dict[str, str] = {"longclip": "longclip", "lora": "lora", "dora": "lora",
                                      "finelip": "finelip", "goal": "goal", "structxlip": "structxlip"}
# What a run with gamma > 0 ("+HN") trains, per framework: the plug-in table's legend.
FRAMEWORK_HN_PLUGIN: dict[str, str] = {
    "longclip": "the global InfoNCE term on long captions becomes the HN objective",
    "lora": "the global InfoNCE term becomes the HN objective (adapters trained as before)",
    "dora": "the global InfoNCE term becomes the HN objective (adapters trained as before)",
    "finelip": "FineLIP trains no global term (only its cross-modal hinge), so +HN adds the HN global term "
               "beside the unchanged hinge",
    "goal": "GOAL's global image-caption term becomes the HN objective; segment, patch and text terms unchanged",
    "structxlip": "StructXLIP's global image-caption term becomes the HN objective; structure, consistency and "
                  "local terms unchanged",
}


def get_framework_class(name: str):
    """The Framework subclass registered as ``name``; an unknown name lists the known ones."""
    if name not in FRAMEWORK_MODULES:
        raise ValueError(f"unknown framework {name!r}; known frameworks: {', '.join(FRAMEWORK_NAMES)}")
    module_name = FRAMEWORK_MODULES[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ImportError(f"framework {name!r} is registered but its module {module_name} cannot be "
                          f"imported: {err}") from err
    framework = getattr(module, "FRAMEWORK", None)
    if framework is None:
        raise ImportError(f"framework module {module_name} defines no FRAMEWORK class")
    if framework.name != name:
        raise ImportError(f"{module_name}.FRAMEWORK is named {framework.name!r}, registered as {name!r}")
    return framework
