"""Each framework's own settings: one frozen dataclass per framework, torch-free.

A run carries the settings of its framework only (``TrainConfig.framework_settings``), so the config
hash covers what that framework trains on and nothing else: a changed FineLIP margin retrains the
FineLIP runs, not the LoRA ones. The workflow config holds them under ``train.<section>`` (the schema's
defaults are tested against the defaults here, ``tests/test_train_config.py``); the command line takes
``--set <section>.<field>=value``. LoRA and DoRA share the ``lora`` section.

Why each default is what it is (and which public file it comes from) is in the framework's module
docstring; the help text here says what a value does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from hnclip.config_fields import coerce_numbers, field_types, help_field, parse_value

__all__ = ["SETTINGS_CLASSES", "FineLIPSettings", "FrameworkSettings", "GoalSettings", "LoRASettings",
           "LongCLIPSettings", "StructXLIPSettings"]

FINELIP_HINGES = ("sum", "max")
FINELIP_HN_READINGS = ("global", "hinge")


@dataclass(frozen=True)
class FrameworkSettings:
    """Base: parsing from ``key=value`` text or YAML, checks naming ``TrainConfig.<section>.<field>``."""

    section: ClassVar[str] = ""

    def __post_init__(self):
        coerce_numbers(self)
        self.check()

    def check(self) -> None:
        """Raise ValueError naming the field and value of a setting out of range."""

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

    short_weight: float = help_field(0.0, "weight of Long-CLIP's short-caption PCA term (>= 0); 0 = off, the "
                                          "paper's Long-CLIP FT (global term on long captions)")
    short_caption_column: str = help_field("short_caption", "manifest column of the short captions "
                                                            "(read only when short_weight > 0)")
    pca_components: int = help_field(32, "principal components of the batch's image features kept by the "
                                         "short-caption term (Long-CLIP: 32)")

    def check(self) -> None:
        self._require("short_weight", self.short_weight >= 0, "must be >= 0")
        self._require("pca_components", self.pca_components >= 1, "must be >= 1")
        if self.short_weight > 0:
            self._require("short_caption_column", bool(self.short_caption_column), "must be a column name")


@dataclass(frozen=True)
class LoRASettings(FrameworkSettings):
    """PEFT adapters (LoRA, and DoRA with the same settings); their learning rate is the run's ``lr``."""

    section: ClassVar[str] = "lora"

    r: int = help_field(16, "adapter rank")
    alpha: int = help_field(32, "adapter scaling numerator (scale = alpha / r)")
    dropout: float = help_field(0.0, "dropout on the adapter input, in [0, 1) (peft's default 0)")

    def check(self) -> None:
        self._require("r", self.r >= 1, "must be >= 1")
        self._require("alpha", self.alpha >= 1, "must be >= 1")
        self._require("dropout", 0 <= self.dropout < 1, "must be in [0, 1)")


@dataclass(frozen=True)
class FineLIPSettings(FrameworkSettings):
    """FineLIP's aggregators, cross-modal hinge and evaluation score; what its "+HN" means."""

    section: ClassVar[str] = "finelip"

    slots: int = help_field(0, "aggregated tokens K per image and per caption; 0 = FineLIP's "
                               "int(0.2 * image patches)")
    weight: float = help_field(1.0, "weight of the cross-modal hinge (FineLIP: 1, its only loss term)")
    margin: float = help_field(0.2, "margin of the VSE hinge")
    hinge: str = help_field("sum", "sum | max: hinge summed over violating negatives (FineLIP's default) or "
                                   "on the hardest one only (VSE++)")
    ramp: bool = help_field(True, "ramp the hinge in linearly over the first epoch's micro-batches, as "
                                  "FineLIP's train.py does")
    score_weight: float = help_field(0.2, "evaluation score = (1 - w) * global cosine + w * cross similarity, "
                                          "w in [0, 1]")
    hn: str = help_field("global", "global | hinge: what gamma > 0 does. global: add the HN global InfoNCE "
                                   "term beside the unchanged hinge (FineLIP trains no global term to "
                                   "replace); hinge: no global term, gamma * G added to the hinge's negatives")

    def check(self) -> None:
        self._require("slots", self.slots >= 0, "must be >= 0")
        self._require("weight", self.weight >= 0, "must be >= 0")
        self._require("margin", self.margin >= 0, "must be >= 0")
        self._require("hinge", self.hinge in FINELIP_HINGES, f"is not one of {', '.join(FINELIP_HINGES)}")
        self._require("score_weight", 0 <= self.score_weight <= 1, "must be in [0, 1]")
        self._require("hn", self.hn in FINELIP_HN_READINGS, f"is not one of {', '.join(FINELIP_HN_READINGS)}")


@dataclass(frozen=True)
class GoalSettings(FrameworkSettings):
    """GOAL's term weights (``goal_loss_finetuning.py``: loss_org + 0.5 loss_seg + loss_patch + loss_text)."""

    section: ClassVar[str] = "goal"

    segment_weight: float = help_field(0.5, "weight of the segment-sentence CLIP term")
    patch_weight: float = help_field(1.0, "weight of the patch-token alignment term")
    text_weight: float = help_field(1.0, "weight of the text-token alignment term")

    def check(self) -> None:
        for name in ("segment_weight", "patch_weight", "text_weight"):
            self._require(name, getattr(self, name) >= 0, "must be >= 0")


@dataclass(frozen=True)
class StructXLIPSettings(FrameworkSettings):
    """StructXLIP's structure terms (``structxlip/train.py`` argparse defaults) and their annealing."""

    section: ClassVar[str] = "structxlip"

    structure_weight: float = help_field(0.5, "weight of the edge-caption contrastive term (detached scale)")
    consistency_weight: float = help_field(0.05, "weight of the RGB-edge consistency term")
    local_weight: float = help_field(0.1, "weight of the local chunk-to-edge-crop InfoNCE")
    top_k: int = help_field(3, "edge crops per image in the local term (its best-scoring segments)")
    chunk_tau: float = help_field(0.07, "temperature of the local term")
    chunk_window: int = help_field(3, "base words per caption chunk")
    chunk_stride: int = help_field(1, "stride between caption chunks")
    max_chunks: int = help_field(64, "chunks per caption at most")
    max_log_logit_scale: float = help_field(3.5, "clamp of the log logit scale")
    lexicon: str = help_field("colour,material,texture", "word categories removed from captions for the "
                                                         "structure terms")
    anneal_warm_epochs: int = help_field(1, "epochs of the weights' linear warm-up, (epoch + 1) / warm")
    anneal_decay_start: int = help_field(1, "epoch where the weights' cosine decay starts")
    anneal_decay_end: int = help_field(8, "epoch where it reaches each term's floor")

    def check(self) -> None:
        for name in ("structure_weight", "consistency_weight", "local_weight"):
            self._require(name, getattr(self, name) >= 0, "must be >= 0")
        for name in ("top_k", "chunk_window", "chunk_stride", "max_chunks", "anneal_warm_epochs"):
            self._require(name, getattr(self, name) >= 1, "must be >= 1")
        self._require("chunk_tau", self.chunk_tau > 0, "must be > 0")
        self._require("anneal_decay_end", 0 <= self.anneal_decay_start <= self.anneal_decay_end,
                      f"must be >= anneal_decay_start ({self.anneal_decay_start}) >= 0")

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(c.strip() for c in self.lexicon.split(",") if c.strip())


SETTINGS_CLASSES: dict[str, type[FrameworkSettings]] = {
    cls.section: cls for cls in (LongCLIPSettings, LoRASettings, FineLIPSettings, GoalSettings, StructXLIPSettings)}
