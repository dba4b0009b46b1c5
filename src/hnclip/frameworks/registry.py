"""The framework registry: one :func:`register_framework` row per framework, torch-free.

A row names the framework, the module defining its :class:`~hnclip.frameworks.base.Framework` subclass
(``FRAMEWORK = YourClass`` at its end), its settings dataclass (whose ``section`` is the workflow config's
``train.<section>``), the cached preprocessing products it trains on and what its "+HN" variant trains.
Everything else reads the rows: :class:`~hnclip.config.train.TrainConfig` (framework names, settings
sections), the Framework class attributes (``settings_class``, ``products``, ``hn_plugin``), the
workflow's train inputs (``workflow/rules/run_inputs.smk``), the config checks (``plan``), the benchmarks, and
``workflow/scripts/config_docs.py``, which writes the schema's ``framework`` enum and ``train.<section>``
sections and config/README.md from them. Like peft's ``register_peft_method``, a new framework is a call
here plus its module; the built-in rows sit beside their settings in :mod:`hnclip.frameworks.settings`
(importing :mod:`hnclip.frameworks` runs them).

A framework's module is imported only when a run asks for it (a module that fails to import breaks only
that framework), so reading the rows never imports torch.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

__all__ = ["FrameworkEntry", "framework_entry", "framework_names", "frameworks_of_section", "get_framework_class",
           "register_framework", "settings_sections"]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# name -> row, in registration order (the order of the schema's enum and of every listing)
_REGISTRY: dict[str, FrameworkEntry] = {}


@dataclass(frozen=True)
class FrameworkEntry:
    """One framework's registration row (see :func:`register_framework`)."""

    name: str
    module: str
    settings_cls: type
    products: tuple[str, ...]
    hn_legend: str
    tuned_rate: str = "lr"

    @property
    def section(self) -> str:
        """``train.<section>`` / ``--set <section>.<key>``: the settings dataclass's section."""
        return self.settings_cls.section


def register_framework(*, name: str, module: str, settings_cls: type, products: tuple[str, ...] = (),
                       hn_legend: str, tuned_rate: str = "lr") -> FrameworkEntry:
    """Register a framework; the row is what every torch-free reader sees.

    Args:
        name: the framework's name (``methods.<m>.framework``, ``TrainConfig.framework``); lower case.
        module: import path of the module defining ``FRAMEWORK``, imported on first use.
        settings_cls: its :class:`~hnclip.frameworks.settings.FrameworkSettings` subclass; frameworks may
            share one (DoRA takes LoRA's), but a section belongs to one class.
        products: cached per-benchmark preprocessing products the run trains on (``"segments"``,
            ``"edges"``); the workflow's train rule takes their files as inputs.
        hn_legend: one line, what a run with gamma > 0 ("+HN") trains (the plug-in table's legend).
        tuned_rate: the train setting the tuning protocol (:mod:`hnclip.tuning`) searches for this
            framework: ``lr``, or a rate of its own new modules (FineLIP's ``module_lr``, whose encoders keep
            the shared ``train.lr``).
    """
    if not _NAME.match(name):
        raise ValueError(f"framework name {name!r}: lower-case letters, digits and _ only")
    if name in _REGISTRY:
        raise ValueError(f"framework {name!r} is already registered (module {_REGISTRY[name].module})")
    section = getattr(settings_cls, "section", "")
    if not section:
        raise ValueError(f"framework {name!r}: settings class {settings_cls.__name__} names no section")
    for other in _REGISTRY.values():
        if other.section == section and other.settings_cls is not settings_cls:
            raise ValueError(f"framework {name!r}: section {section!r} already belongs to "
                             f"{other.settings_cls.__name__} (framework {other.name!r})")
    products = tuple(products)
    if not all(isinstance(p, str) and p for p in products):
        raise ValueError(f"framework {name!r}: products must be names, got {products!r}")
    if not hn_legend.strip():
        raise ValueError(f"framework {name!r}: hn_legend must say what +HN trains")
    if tuned_rate not in ("lr", "module_lr"):
        raise ValueError(f"framework {name!r}: tuned_rate must be lr or module_lr, got {tuned_rate!r}")
    entry = FrameworkEntry(name=name, module=module, settings_cls=settings_cls, products=products,
                           hn_legend=hn_legend, tuned_rate=tuned_rate)
    _REGISTRY[name] = entry
    return entry


def framework_names() -> tuple[str, ...]:
    """Registered framework names, in registration order."""
    return tuple(_REGISTRY)


def framework_entry(name: str) -> FrameworkEntry:
    """The row registered as ``name``; an unknown name lists the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown framework {name!r}; known frameworks: {', '.join(_REGISTRY)}") from None


def settings_sections() -> dict[str, type]:
    """Section -> settings dataclass, in order of first registration."""
    sections: dict[str, type] = {}
    for entry in _REGISTRY.values():
        sections.setdefault(entry.section, entry.settings_cls)
    return sections


def frameworks_of_section(section: str) -> tuple[str, ...]:
    """The frameworks reading ``train.<section>`` (LoRA and DoRA share ``lora``)."""
    return tuple(e.name for e in _REGISTRY.values() if e.section == section)


def get_framework_class(name: str):
    """The Framework subclass registered as ``name``; an unknown name lists the known ones."""
    module_name = framework_entry(name).module
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
