"""Each framework's own settings (one frozen dataclass per framework) and its registration row, torch-free.

A run carries the settings of its framework only (``TrainConfig.framework_settings``), so the config
hash covers what that framework trains on and nothing else: a changed FineLIP margin retrains the
FineLIP runs, not the LoRA ones. The workflow config holds them under ``train.<section>``; the command
line takes ``--set <section>.<field>=value``. LoRA and DoRA share the ``lora`` section.

Each field's default, range (:func:`~hnclip.settings_fields.help_field`'s bounds, checked in
``__post_init__``) and help text are declared here once: ``workflow/scripts/config_docs.py`` writes the
schema's ``train.<section>`` sections (and its ``framework`` enum, from the :func:`register_framework`
rows after each class) and config/README.md from them; the class docstring's first paragraph is the
section's description. ``tests/test_config_docs.py`` fails while the written files are stale.

Why each default is what it is (and which public file it comes from) is in the framework's module
docstring; the help text here says what a value does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from hnclip.settings_fields import check_bounds, coerce_numbers, field_types, help_field, parse_value

from .registry import register_framework

__all__ = ["FineLIPSettings", "FrameworkSettings", "GoalSettings", "LoRASettings",
           "LongCLIPSettings", "StructXLIPSettings"]

FINELIP_HINGES = ("sum", "max")
FINELIP_HN_READINGS = ("global", "hinge")


@dataclass(frozen=True)
class FrameworkSettings:
    """Base: parsing from ``key=value`` text or YAML, checks naming ``TrainConfig.<section>.<field>``."""

    section: ClassVar[str] = ""

    def __post_init__(self):
        coerce_numbers(self)
        check_bounds(self, f"TrainConfig.{self.section}")
        self.check()

    def check(self) -> None:
        """Raise ValueError naming the field and value of a setting that breaks a rule beyond its bounds."""

    def _require(self, name: str, ok: bool, why: str) -> None:
        if not ok:
            raise ValueError(f"TrainConfig.{self.section}.{name}={getattr(self, name)!r} {why}")

    @classmethod
    def from_dict(cls, values: Mapping[str, object] | None):
        """The settings with ``values`` (text or typed) over the defaults; an unknown key lists the known ones."""
        values = dict(values or {})
        types_ = field_types(cls)
        unknown = sorted(set(values) - set(types_))
        if unknown:
            raise ValueError(f"unknown TrainConfig.{cls.section} key(s) {unknown}; known keys: {', '.join(types_)}")
        return cls(**{k: parse_value(f"TrainConfig.{cls.section}.{k}", types_[k], v) for k, v in values.items()})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f"{cls.section}.{f.name}": f.metadata.get("help", "") for f in dataclasses.fields(cls)}


@dataclass(frozen=True)
class LongCLIPSettings(FrameworkSettings):
    """Long-CLIP fine-tuning; its short-caption (primary-component) term is off by default."""

    section: ClassVar[str] = "longclip"

    short_weight: float = help_field(0.0, "weight of Long-CLIP's short-caption term (PCA-reduced image features "
                                          "vs short captions), >= 0; 0 = off: plain long-caption fine-tuning, "
                                          "the paper's Long-CLIP FT", minimum=0)
    short_caption_column: str = help_field("short_caption", "manifest column of the short captions "
                                                            "(read only when short_weight > 0)")
    pca_components: int = help_field(32, "principal components of the batch's image features kept by the "
                                         "short-caption term (Long-CLIP: 32)", minimum=1)
    cone_weight: float = help_field(0.0, "weight of the caption-cone term, >= 0; 0 = off. Not Long-CLIP's: the toy "
                                         "backbone's recipe (pretrain.long) uses it to keep the cone Long-CLIP-L's "
                                         "text tower has: weight x the mean over the micro-batch's caption pairs of "
                                         "relu(cone_min - their cosine), a floor under every pair", minimum=0)
    cone_min: float = help_field(0.0, "the floor under every in-batch caption pair's cosine: pairs below it are "
                                      "pulled together, in [-1, 1]", minimum=-1, maximum=1)

    def check(self) -> None:
        if self.short_weight > 0:
            self._require("short_caption_column", bool(self.short_caption_column), "must be a column name")


@dataclass(frozen=True)
class LoRASettings(FrameworkSettings):
    """PEFT adapters: LoRA, and DoRA with the same settings. Their learning rate is the run's ``lr``."""

    section: ClassVar[str] = "lora"

    r: int = help_field(16, "adapter rank", minimum=1)
    alpha: int = help_field(32, "adapter scaling numerator (scale = alpha / r)", minimum=1)
    dropout: float = help_field(0.0, "dropout on the adapter input, in [0, 1) (peft's default 0)", minimum=0,
                                exclusive_maximum=1)


@dataclass(frozen=True)
class FineLIPSettings(FrameworkSettings):
    """FineLIP's aggregators, cross-modal hinge and evaluation score; what its "+HN" means. FineLIP trains its
    cross-modal hinge only; its aggregators train at ``module_lr``."""

    section: ClassVar[str] = "finelip"

    slots: int = help_field(0, "aggregated tokens K per image and per caption; 0 = FineLIP's "
                               "int(0.2 * image patches)", minimum=0)
    weight: float = help_field(1.0, "weight of the cross-modal hinge (FineLIP: 1, its only loss term)", minimum=0)
    margin: float = help_field(0.2, "margin of the VSE hinge", minimum=0)
    hinge: str = help_field("sum", "hinge over the negatives: sum of all violations (FineLIP's default), or max "
                                   "(the hardest negative only, VSE++)", choices=FINELIP_HINGES)
    ramp: bool = help_field(True, "ramp the hinge in linearly over the first epoch's micro-batches, as "
                                  "FineLIP's train.py does")
    score_weight: float = help_field(0.2, "evaluation score = (1 - w) * global cosine + w * cross similarity, "
                                          "w in [0, 1]", minimum=0, maximum=1)
    hn: str = help_field("global", "what +HN (gamma > 0) trains: global adds the HN global InfoNCE term beside "
                                   "the unchanged hinge (FineLIP trains no global term to replace); hinge adds "
                                   "gamma * G to the hinge's negatives instead (no global term)",
                         choices=FINELIP_HN_READINGS)


@dataclass(frozen=True)
class GoalSettings(FrameworkSettings):
    """GOAL's term weights (``goal_loss_finetuning.py``: loss_org + 0.5 loss_seg + loss_patch + loss_text)."""

    section: ClassVar[str] = "goal"

    segment_weight: float = help_field(0.5, "weight of the segment-sentence CLIP term", minimum=0)
    patch_weight: float = help_field(1.0, "weight of the patch-token alignment term", minimum=0)
    text_weight: float = help_field(1.0, "weight of the text-token alignment term", minimum=0)


@dataclass(frozen=True)
class StructXLIPSettings(FrameworkSettings):
    """StructXLIP's structure terms (``structxlip/train.py`` argparse defaults) and their annealing."""

    section: ClassVar[str] = "structxlip"

    structure_weight: float = help_field(0.5, "weight of the edge-caption contrastive term (detached logit "
                                              "scale)", minimum=0)
    consistency_weight: float = help_field(0.05, "weight of the RGB-edge consistency term", minimum=0)
    local_weight: float = help_field(0.1, "weight of the local chunk-to-edge-crop InfoNCE", minimum=0)
    top_k: int = help_field(3, "edge crops per image in the local term (its best-scoring segments)", minimum=1)
    chunk_tau: float = help_field(0.07, "temperature of the local term", exclusive_minimum=0)
    chunk_window: int = help_field(3, "base words per caption chunk", minimum=1)
    chunk_stride: int = help_field(1, "stride between caption chunks", minimum=1)
    max_chunks: int = help_field(64, "chunks per caption at most", minimum=1)
    max_log_logit_scale: float = help_field(3.5, "clamp of the log logit scale")
    lexicon: str = help_field("colour,material,texture", "word categories removed from captions for the "
                                                         "structure terms")
    anneal_warm_epochs: int = help_field(1, "epochs of the term weights' linear warm-up, (epoch + 1) / warm",
                                         minimum=1)
    anneal_decay_start: int = help_field(1, "epoch where the term weights' cosine decay starts", minimum=0)
    anneal_decay_end: int = help_field(8, "epoch where they reach each term's floor (structure 0.7, consistency "
                                          "0.5, local 0.4 of the base)", minimum=0)

    def check(self) -> None:
        self._require("anneal_decay_end", 0 <= self.anneal_decay_start <= self.anneal_decay_end,
                      f"must be >= anneal_decay_start ({self.anneal_decay_start}) >= 0")

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(c.strip() for c in self.lexicon.split(",") if c.strip())


# ------------------------------------------------------------------------------- the registration rows
# One row per framework (hnclip.frameworks.registry); the framework's module defines FRAMEWORK.
register_framework(
    name="longclip", module="hnclip.frameworks.longclip", settings_cls=LongCLIPSettings,
    hn_legend="the global InfoNCE term on long captions becomes the HN objective")
register_framework(
    name="lora", module="hnclip.frameworks.lora", settings_cls=LoRASettings,
    hn_legend="the global InfoNCE term becomes the HN objective (adapters trained as before)")
# DoRA is LoRA with a magnitude vector and shares its settings
register_framework(
    name="dora", module="hnclip.frameworks.dora", settings_cls=LoRASettings,
    hn_legend="the global InfoNCE term becomes the HN objective (adapters trained as before)")
register_framework(
    name="finelip", module="hnclip.frameworks.finelip", settings_cls=FineLIPSettings,
    hn_legend="FineLIP trains no global term (only its cross-modal hinge), so +HN adds the HN global term "
              "beside the unchanged hinge",
    tuned_rate="module_lr")
register_framework(
    name="goal", module="hnclip.frameworks.goal", settings_cls=GoalSettings, products=("segments",),
    hn_legend="GOAL's global image-caption term becomes the HN objective; segment, patch and text terms unchanged")
# StructXLIP needs the segments too: its local term matches caption chunks with the edge maps of each
# image's best-scoring segment crops (StructXLIP structxlip/dataloader.py ranks an image's segments by
# similarity_score and keeps chunk_top_k), and the segment product is where that ranking lives.
register_framework(
    name="structxlip", module="hnclip.frameworks.structxlip", settings_cls=StructXLIPSettings,
    products=("segments", "edges"),
    hn_legend="StructXLIP's global image-caption term becomes the HN objective; structure, consistency and "
              "local terms unchanged")
