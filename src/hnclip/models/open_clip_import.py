"""Import open_clip without its timm and transformers integrations, and bring them back when a model needs them.

Why: every job that loads a model is a fresh process, and ``import open_clip`` imports timm (and through
it wandb) and transformers for its optional timm image towers and Hugging Face text towers: 1.7 s of the
5.7 s it takes on the 2-core CPU (``benchmarks/startup_cost.py``), in each of the embedded default's ~60
jobs that load a model.
hnclip's :class:`~hnclip.models.dual_encoder.DualEncoder` is open_clip's plain ``CLIP`` with its own ViT
and text towers only (:mod:`hnclip.models.registry` refuses timm and Hugging Face towers), so those
integrations are never used there.

:func:`import_open_clip` imports open_clip with ``timm`` and ``transformers`` marked absent (a ``None``
entry in ``sys.modules`` makes their ``import`` raise ImportError, which open_clip catches: both are
optional to it), then removes the marks, so ``import transformers`` elsewhere in the process works as
usual. :func:`open_clip_with_integrations` is what code handing a user's model to open_clip itself
(``hnclip.models.from_open_clip``) calls first: it re-runs open_clip's modules that import them in place so
that they, and the classes open_clip already bound from them, see the installed libraries.

It also keeps torch's compiler out of the import. open_clip imports torchvision, whose package imports
every model and op, and ``torchvision.ops.roi_align`` imports ``torch._dynamo`` (with sympy and triton) for
one helper it calls only inside ``roi_align``: about 2 s of the start of every job that only evaluates
(``benchmarks/startup_cost.py``; a training job imports it anyway when torch's optimizer first adds its
parameters), for a compiler the toy never runs. While open_clip imports, ``torch._dynamo.utils`` is a stand-in whose
``is_compile_supported`` imports the real one when first called; the stand-ins leave ``sys.modules``
afterwards, so ``torch._dynamo`` imports as usual wherever it is used (tests/test_models_open_clip_import.py).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

__all__ = ["OPTIONAL", "import_open_clip", "open_clip_with_integrations"]

# open_clip's modules that import an optional library in a try block: module -> library
OPTIONAL = {"open_clip.timm_model": "timm", "open_clip.hf_model": "transformers", "open_clip.coca_model": "transformers"}


# the OPTIONAL modules imported while their library was hidden (re-run by open_clip_with_integrations)
_IMPORTED_WITHOUT: set[str] = set()


def _is_compile_supported(device_type):
    """torch._dynamo.utils.is_compile_supported, imported when first called (module docstring)."""
    from torch._dynamo.utils import is_compile_supported

    return is_compile_supported(device_type)


def _dynamo_stand_ins() -> dict[str, ModuleType]:
    """Stand-ins for ``torch._dynamo`` and its ``utils`` while torchvision imports, if neither is imported."""
    if "torch._dynamo" in sys.modules or "torchvision" in sys.modules:
        return {}
    utils = ModuleType("torch._dynamo.utils")
    utils.is_compile_supported = _is_compile_supported
    return {"torch._dynamo": ModuleType("torch._dynamo"), "torch._dynamo.utils": utils}


def import_open_clip() -> ModuleType:
    """``open_clip``, imported without timm and transformers if it is not imported yet (module docstring)."""
    if "open_clip" in sys.modules:
        return sys.modules["open_clip"]
    hidden = sorted(set(OPTIONAL.values()) - set(sys.modules))
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError
    stand_ins = _dynamo_stand_ins()
    sys.modules.update(stand_ins)
    try:
        module = importlib.import_module("open_clip")
    finally:
        for name in hidden:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]
        for name, stand_in in stand_ins.items():
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
    _IMPORTED_WITHOUT.update(m for m, library in OPTIONAL.items() if library in hidden and m in sys.modules)
    return module


def open_clip_with_integrations() -> ModuleType:
    """``open_clip`` with its timm and Hugging Face adapters bound to the installed libraries.

    A no-op when open_clip was imported normally. Reloading runs a module again in its own namespace, so
    the classes ``open_clip.model`` imported from it earlier see the libraries as well.
    """
    open_clip = import_open_clip()
    for module_name in sorted(_IMPORTED_WITHOUT):
        if importlib.util.find_spec(OPTIONAL[module_name]) is not None:
            importlib.reload(sys.modules[module_name])
        _IMPORTED_WITHOUT.discard(module_name)
    return open_clip


import_open_clip()  # on import: hnclip.models imports this module before any that imports from open_clip
