"""Framework name -> module. Kept free of torch so the config layer can validate names cheaply.

Each module defines ``FRAMEWORK``, its :class:`~hnclip.frameworks.base.Framework` subclass; it is
imported only when a run asks for it (a module that fails to import breaks only that framework).
"""

from __future__ import annotations

import importlib

__all__ = ["FRAMEWORK_MODULES", "FRAMEWORK_NAMES", "FRAMEWORK_PRODUCTS", "get_framework_class"]

FRAMEWORK_MODULES = {
    "longclip": "hnclip.frameworks.longclip",
    "lora": "hnclip.frameworks.lora",
    "dora": "hnclip.frameworks.dora",
    "finelip": "hnclip.frameworks.finelip",
    "goal": "hnclip.frameworks.goal",
    "structxlip": "hnclip.frameworks.structxlip",
}
FRAMEWORK_NAMES = tuple(FRAMEWORK_MODULES)
# Cached preprocessing products each framework trains on (its class's ``products``; a test checks they
# agree), readable by the workflow without importing torch.
FRAMEWORK_PRODUCTS: dict[str, tuple[str, ...]] = {"goal": ("segments",), "structxlip": ("segments", "edges")}


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
