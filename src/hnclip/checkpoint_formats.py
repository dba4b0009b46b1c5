"""Checkpoint formats and backbone origins, one row each: the one place that says what a config's ``source``
needs, whether its text tower can be stretched, how it is loaded and how a rehearsal stands in for its files.

A **format** (:class:`CheckpointFormat`) is what ``models.<name>.source`` (and, where ``backbone`` is set,
``backbone.source``) names and :func:`hnclip.models.convert.convert_source` converts. Its loader is a
``"module:function"`` name (or a callable), imported only when a checkpoint is converted, so this module stays
light: the config checks, the plan, the cost estimate and the rule files read it without torch.

A **backbone origin** (:class:`BackboneOrigin`) is where ``backbone.source`` takes the runs' backbone from:
``released`` (a folder released with hnclip, installed as it is), ``pretrain`` (trained in the DAG), or a
format the DAG converts. The rule files and the cost estimate ask it (:func:`backbone_origin`) instead of
comparing names.

A new format is one module holding its loader plus one :func:`register_format` call (CONTRIBUTING.md,
"A checkpoint format"), the call the shipped rows go through too. A row's ``description`` is the one text
that describes the format: the schema's ``models.<name>.source`` and ``backbone.source`` (their enums and
descriptions) are written from the rows (``workflow/scripts/config_docs.py``), and config/README.md from the
schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module

__all__ = ["BACKBONE_FIELD_HINTS", "FIELD_HINTS", "BackboneOrigin", "CheckpointFormat", "backbone_origin", "backbone_origins",
           "backbone_source_names", "checkpoint_format", "format_names", "register_format", "resolve",
           "stretchable_sources"]

# what a missing field names, in an error that says it is required (the converter's words)
FIELD_HINTS = {"model": "an architecture such as ViT-B-32, hf-hub:ORG/REPO or local-dir:FOLDER",
               "base": "the CLIPModel its weights were fine-tuned from, e.g. openai/clip-vit-base-patch16"}
# the same for backbone.<field> (config_checks)
BACKBONE_FIELD_HINTS = {"model": "an architecture such as ViT-B-32 with a pretrained tag in backbone.checkpoint, "
                                 "hf-hub:ORG/REPO or local-dir:FOLDER"}


@dataclass(frozen=True)
class CheckpointFormat:
    """One checkpoint format.

    ``needs``: the config fields it cannot convert without (``checkpoint``, ``model``, ``base``); ``base`` is
    accepted only where needed. ``stretchable``: a 77-position tower Long-CLIP's stretch applies to (False:
    it has its 248 positions already). ``loader``: ``loader(request) -> (dual encoder or None, weights file)``
    with ``request`` a :class:`hnclip.models.format_loaders.ConvertRequest`; None when the loader saved the
    folder itself. ``backbone``: ``backbone.source`` may name it. ``ecosystem``: it keeps its own image
    normalisation and interpolation, so the image stores are prepared after it. ``checkpoint_kind``: what its
    ``checkpoint`` names locally (:func:`hnclip.model_files.missing_local_source`). ``stand_in``: the
    rehearsal's writer of a random file in its format, ``writer(checkpoint, base, seed, depth)``.
    ``description``: what its ``checkpoint`` (and ``model``, ``base``) name, in the config's words: the one
    text the schema's ``source`` descriptions and config/README.md show for it (config_docs.py writes them).
    """

    name: str
    loader: str | Callable
    needs: tuple[str, ...] = ("checkpoint",)
    stretchable: bool = False
    backbone: bool = False
    ecosystem: bool = False
    checkpoint_kind: str = "file"
    stand_in: str | Callable | None = None
    description: str = ""

    @property
    def takes_base(self) -> bool:
        return "base" in self.needs


_LOADERS = "hnclip.models.format_loaders"
_STAND_INS = "hnclip.rehearsal.released"
_REGISTRY: dict[str, CheckpointFormat] = {}
# the config fields a format may need; what a format's ``checkpoint`` names locally
# (:func:`hnclip.model_files.missing_local_source`); the backbone origins that are no format
FIELDS = ("checkpoint", "model", "base")
CHECKPOINT_KINDS = ("file", "folder", "open_clip")
ORIGIN_NAMES = ("released", "pretrain")


def register_format(fmt: CheckpointFormat) -> CheckpointFormat:
    """Add a format (its name must be new, its row complete); returns it. The built-in rows come through here."""
    where = f"checkpoint format {fmt.name!r}"
    if fmt.name in _REGISTRY or fmt.name in ORIGIN_NAMES:
        raise ValueError(f"{where} is already registered")
    if not set(fmt.needs) <= set(FIELDS) or not fmt.needs:
        raise ValueError(f"{where}: needs is a non-empty subset of {', '.join(FIELDS)}, got {fmt.needs!r}")
    if fmt.backbone and fmt.takes_base:
        raise ValueError(f"{where}: a backbone is converted without a base (the config's backbone has no base key)")
    if fmt.checkpoint_kind not in CHECKPOINT_KINDS:
        raise ValueError(f"{where}: checkpoint_kind is one of {', '.join(CHECKPOINT_KINDS)}, got {fmt.checkpoint_kind!r}")
    for field in ("loader", "stand_in"):
        target = getattr(fmt, field)
        if isinstance(target, str) and not re.match(r"^[\w.]+:\w+$", target):
            raise ValueError(f"{where}: {field} is a callable or a 'module:function' name, got {target!r}")
    if not fmt.description.strip():
        raise ValueError(f"{where}: a description (what its config fields name) is what the schema and docs show")
    _REGISTRY[fmt.name] = fmt
    return fmt


def format_names() -> tuple[str, ...]:
    """Every format, in registration order (the schema's ``models.<name>.source`` enum)."""
    return tuple(_REGISTRY)


def checkpoint_format(name: str) -> CheckpointFormat:
    if name not in _REGISTRY:
        raise ValueError(f"{name!r}: not a checkpoint format; known: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def resolve(target: str | Callable) -> Callable:
    """A ``"module:function"`` name imported now (a callable is returned as it is)."""
    if callable(target):
        return target
    module, _, function = target.partition(":")
    return getattr(import_module(module), function)


# the built-in formats, each through the registration a new one takes (its checks included)
for _row in (
        CheckpointFormat("longclip", f"{_LOADERS}:load_longclip", backbone=True,
                         stand_in=f"{_STAND_INS}:longclip_stand_in",
                         description="`checkpoint`: a Long-CLIP .pt, local or hf://OWNER/REPO/FILE (248 positions)"),
        CheckpointFormat("openai", f"{_LOADERS}:load_openai", stretchable=True, backbone=True,
                         description="`checkpoint`: an OpenAI-format CLIP state dict, local or hf://OWNER/REPO/FILE"),
        CheckpointFormat("open_clip", f"{_LOADERS}:load_open_clip", needs=("model",), stretchable=True,
                         backbone=True, ecosystem=True, checkpoint_kind="open_clip",
                         description="`model`: an open_clip architecture (ViT-B-32, with a pretrained tag such as "
                                     "laion2b_s34b_b79k or a weights file in `checkpoint`), hf-hub:ORG/REPO or "
                                     "local-dir:FOLDER, loaded through open_clip's own create_model_and_transforms "
                                     "and cache"),
        CheckpointFormat("transformers", f"{_LOADERS}:load_transformers", stretchable=True, backbone=True,
                         ecosystem=True, checkpoint_kind="folder",
                         description="`checkpoint`: a CLIPModel Hub id OWNER/NAME (or hf://OWNER/NAME) or "
                                     "save_pretrained folder"),
        CheckpointFormat("goal", f"{_LOADERS}:load_overlay", needs=("checkpoint", "base"),
                         stand_in=f"{_STAND_INS}:overlay_stand_in",
                         description="`checkpoint`: GOAL's released .pth (a transformers CLIPModel state dict, 248 "
                                     "positions) over `base`, the CLIPModel it was fine-tuned from"),
        CheckpointFormat("structxlip", f"{_LOADERS}:load_overlay", needs=("checkpoint", "base"),
                         stand_in=f"{_STAND_INS}:overlay_stand_in",
                         description="`checkpoint`: StructXLIP's released .pth (one per benchmark) over `base`, "
                                     "likewise"),
        CheckpointFormat("finelip", "hnclip.framework_loading:load_finelip",
                         stand_in=f"{_STAND_INS}:finelip_stand_in",
                         description="`checkpoint`: FineLIP's released checkpoint, Long-CLIP's plus its cross-net, "
                                     "saved with our FineLIP framework and ranked by FineLIP's fused score (0.8 "
                                     "cosine + 0.2 fine-grained, its train/test.py)"),
):
    register_format(_row)


# ------------------------------------------------------------------------------------ backbone origins
@dataclass(frozen=True)
class BackboneOrigin:
    """Where ``backbone.source`` takes the backbone from. ``trained_in_dag``: pretrained by the DAG's own
    recipe; ``ships_its_spec``: a folder released with hnclip, whose model.json names it; neither: converted
    from a checkpoint format (rule ``convert_backbone``). ``described``: the backbone in a caption's words."""

    name: str
    needs: tuple[str, ...] = ()
    trained_in_dag: bool = False
    ships_its_spec: bool = False
    stretchable: bool = False
    ecosystem: bool = False
    described: str = "backbone{named} converted from {source}"
    description: str = ""  # what the config names for it (a format's row's description), for the schema

    @property
    def installed(self) -> bool:
        """Installed as it is (rule ``install_backbone``) rather than converted."""
        return self.trained_in_dag or self.ships_its_spec

    @property
    def reads_model(self) -> bool:
        """Its conversion reads an architecture name (``backbone.model``)."""
        return "model" in self.needs

    def describe(self, name: str | None) -> str:
        return self.described.format(named=f" {name}" if name else "", source=self.name)


_ORIGINS = {"released": BackboneOrigin("released", needs=("checkpoint",), ships_its_spec=True,
                                       described="released backbone{named}",
                                       description="a model folder released with hnclip (`checkpoint`: "
                                                   "model.safetensors + model.json, e.g. the toy backbone shipped "
                                                   "in the repository), checked against `sha256` and installed as "
                                                   "it is"),
            "pretrain": BackboneOrigin("pretrain", trained_in_dag=True,
                                       described="backbone{named} pretrained in the DAG",
                                       description="random-init `name` pretrained in the DAG by the `pretrain` "
                                                   "recipe (`snakemake backbone_release` rebuilds the released toy "
                                                   "backbone with that recipe whatever the source)")}


def backbone_origins() -> dict[str, BackboneOrigin]:
    """Every ``backbone.source``: released, pretrain, then each format a backbone may be converted from."""
    converted = {name: BackboneOrigin(name, needs=fmt.needs, stretchable=fmt.stretchable, ecosystem=fmt.ecosystem,
                                      description=fmt.description)
                 for name, fmt in _REGISTRY.items() if fmt.backbone}
    return {**_ORIGINS, **converted}


def backbone_source_names() -> tuple[str, ...]:
    """The schema's ``backbone.source`` enum."""
    return tuple(backbone_origins())


def stretchable_sources() -> tuple[str, ...]:
    """The ``backbone.source`` names Long-CLIP's stretch applies to (``backbone.stretch``)."""
    return tuple(name for name, origin in backbone_origins().items() if origin.stretchable)


def backbone_origin(source: str | dict | None) -> BackboneOrigin:
    """The origin ``source`` names: a ``backbone.source``, or a whole config (its ``backbone.source``). A name
    that is no origin (a spec recorded by another version) reads as converted from it."""
    if isinstance(source, dict):
        source = (source.get("backbone") or {}).get("source", "pretrain")
    return backbone_origins().get(source) or BackboneOrigin(str(source))
