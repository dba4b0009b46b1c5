"""One training run's settings: a flat dataclass, parsed from the workflow's ``key=value`` overrides.

Every field carries a default and help text (peft's config style); ``__post_init__`` rejects bad values
naming the field, so a typo in the workflow config fails before any model is loaded. The hash of the
whole dict names the run's settings in checkpoints: resuming under different settings is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field

from hnclip.frameworks.registry import FRAMEWORK_NAMES

__all__ = ["FRAMEWORKS", "TrainConfig"]

FRAMEWORKS = FRAMEWORK_NAMES  # the registry in hnclip.frameworks.registry
FINELIP_HINGES = ("sum", "max")
MARGINS = ("recompute", "frozen")
PRECISIONS = ("auto", "fp32", "bf16")
DEVICES = ("auto", "cpu", "cuda")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _help(text: str) -> dict:
    return {"help": text}


@dataclass
class TrainConfig:
    """Settings of one fine-tuning run.

    Args:
        framework: a name in :mod:`hnclip.frameworks.registry`. ``longclip`` fine-tunes every weight
            with global InfoNCE on the long captions; ``lora``/``dora`` train low-rank adapters and merge
            them at the end; ``finelip`` adds token aggregators and a cross-modal hinge loss; ``goal``
            and ``structxlip`` add segment-sentence (and edge) alignment from cached preprocessing.
        gamma: HN margin strength; 0 is plain InfoNCE.
        token_weight: weight of the FILIP token-level loss. The dataclass default 0.0 leaves the branch
            off (and skips computing token features); full HN-CLIP uses 0.5, which the workflow config sets.
        margin: ``recompute`` builds G from the current batch's text features; ``frozen`` from the initial
            model's, computed once for the whole training set.
        micro_batch, accum_steps: the effective batch is their product (paper: 16 x 8 = 128); the
            contrastive loss sees only the micro-batch's negatives.
        lr, adapter_lr: peak learning rate for full fine-tuning, resp. for LoRA/DoRA (all trainable
            parameters of an adapter run use ``adapter_lr``).
        warmup_steps, min_lr_ratio: linear warmup over optimizer steps, then cosine decay to
            ``min_lr_ratio * lr``.
        grad_clip: max global gradient norm; 0 disables clipping.
        precision: ``auto`` is bf16 autocast on CUDA and fp32 on CPU.
        dynamics_every: optimizer steps 1, 1 + k, 1 + 2k, ... log boosted vs standard gradient norms
            (costs up to two extra backward passes per micro-batch of those steps); 0 disables.
        checkpoint_every: optimizer steps between resumable checkpoints (also written at each epoch end).
        max_steps: stop after this many optimizer steps (0: run all epochs); the LR schedule spans the
            shorter of the two.
        module_lr: peak learning rate of a framework's new modules (FineLIP's aggregators...): they
            start from random weights, so they get a higher rate than the pretrained encoders.
        longclip_short_weight, short_caption_column, longclip_pca_components: Long-CLIP's own recipe
            adds a short-caption term matching PCA-reduced image features (top ``k`` components of the
            batch) with short-caption features; weight 0 (the default, and the paper's "Long-CLIP FT"
            baseline: global InfoNCE on long captions) leaves it off and needs no short captions.
        finelip_slots, finelip_weight, finelip_margin, finelip_hinge, finelip_score_weight: FineLIP's
            K aggregated tokens per side (0: FineLIP's 20 % of the patch count), weight and margin of its cross-modal hinge loss (``sum`` over
            violating negatives or only the hardest, ``max``), and the evaluation score
            ``(1 - w) * global cosine + w * cross similarity``.
    """

    framework: str = field(default="longclip", metadata=_help(" | ".join(FRAMEWORK_NAMES)))
    gamma: float = field(default=0.0, metadata=_help("HN margin strength (>= 0; 0 = InfoNCE)"))
    token_weight: float = field(default=0.0, metadata=_help(
        "weight of the FILIP token loss (>= 0); full HN-CLIP uses 0.5, set by the workflow config"))
    margin: str = field(default="recompute", metadata=_help("recompute | frozen: source of G's text features"))
    epochs: int = field(default=1, metadata=_help("passes over the training set (>= 1)"))
    micro_batch: int = field(default=16, metadata=_help(
        "samples per contrastive loss; under torchrun the global micro-batch, split evenly over processes "
        "(token and framework terms see each process's share)"))
    accum_steps: int = field(default=8, metadata=_help("micro-batches per optimizer step"))
    lr: float = field(default=1e-5, metadata=_help("peak learning rate, full fine-tuning"))
    adapter_lr: float = field(default=1e-4, metadata=_help("peak learning rate, LoRA/DoRA"))
    weight_decay: float = field(default=0.1, metadata=_help("AdamW decoupled weight decay on matrices"))
    warmup_steps: int = field(default=0, metadata=_help("linear warmup length in optimizer steps (>= 0)"))
    min_lr_ratio: float = field(default=0.0, metadata=_help("cosine floor as a fraction of the peak lr"))
    grad_clip: float = field(default=1.0, metadata=_help("max global grad norm; 0 disables"))
    beta1: float = field(default=0.9, metadata=_help("AdamW beta1"))
    beta2: float = field(default=0.98, metadata=_help("AdamW beta2 (CLIP's 0.98)"))
    eps: float = field(default=1e-6, metadata=_help("AdamW epsilon (CLIP's 1e-6)"))
    seed: int = field(default=0, metadata=_help("seeds weights of new modules, data order and dropout"))
    precision: str = field(default="auto", metadata=_help("auto | fp32 | bf16 (auto: bf16 on CUDA)"))
    device: str = field(default="auto", metadata=_help("auto | cpu | cuda"))
    dynamics_every: int = field(default=10, metadata=_help(
        "log gradient dynamics on steps 1, 1+k, 1+2k, ... (extra backward passes); 0 disables"))
    checkpoint_every: int = field(default=100, metadata=_help("optimizer steps between checkpoints (>= 1)"))
    eval_every_epoch: bool = field(default=True, metadata=_help("evaluate on the eval split after each epoch"))
    caption_column: str = field(default="caption", metadata=_help("manifest column holding the captions"))
    lora_r: int = field(default=16, metadata=_help("LoRA/DoRA rank"))
    lora_alpha: int = field(default=32, metadata=_help("LoRA/DoRA scaling numerator (scale = alpha / r)"))
    lora_dropout: float = field(default=0.05, metadata=_help("dropout on the adapter input, in [0, 1)"))
    max_steps: int = field(default=0, metadata=_help("cap on optimizer steps; 0 = no cap"))
    num_workers: int = field(default=0, metadata=_help("DataLoader worker processes for image reading"))
    module_lr: float = field(default=1e-4, metadata=_help(
        "peak learning rate of a framework's new modules (FineLIP aggregators, ...)"))
    longclip_short_weight: float = field(default=0.0, metadata=_help(
        "weight of Long-CLIP's short-caption PCA term (>= 0); 0 = off, plain long-caption fine-tuning"))
    short_caption_column: str = field(default="short_caption", metadata=_help(
        "manifest column of the short captions (read only when longclip_short_weight > 0)"))
    longclip_pca_components: int = field(default=32, metadata=_help(
        "principal components of the batch's image features kept for the short-caption term (Long-CLIP: 32)"))
    finelip_slots: int = field(default=0, metadata=_help(
        "FineLIP: aggregated tokens K per image and per caption; 0 = FineLIP's int(0.2 * image patches)"))
    finelip_weight: float = field(default=1.0, metadata=_help("FineLIP: weight of the cross-modal hinge loss"))
    finelip_margin: float = field(default=0.2, metadata=_help("FineLIP: margin of the VSE hinge loss"))
    finelip_hinge: str = field(default="sum", metadata=_help(
        "FineLIP: sum | max: hinge summed over negatives or on the hardest negative only (VSE++)"))
    finelip_score_weight: float = field(default=0.2, metadata=_help(
        "FineLIP: evaluation score = (1 - w) * global cosine + w * cross similarity, w in [0, 1]"))
    # GOAL and StructXLIP term settings; frameworks/goal.py and structxlip.py read them through their
    # Settings dataclasses, which validate them (tests/test_train_config.py checks the defaults agree)
    goal_segment_weight: float = field(default=0.5, metadata=_help("GOAL: weight of the segment-sentence CLIP term"))
    goal_patch_weight: float = field(default=1.0, metadata=_help("GOAL: weight of the patch-token alignment term"))
    goal_text_weight: float = field(default=1.0, metadata=_help("GOAL: weight of the text-token alignment term"))
    structxlip_structure_weight: float = field(default=0.5, metadata=_help(
        "StructXLIP: weight of the edge-caption contrastive term"))
    structxlip_consistency_weight: float = field(default=0.05, metadata=_help(
        "StructXLIP: weight of the RGB-edge consistency term"))
    structxlip_local_weight: float = field(default=0.1, metadata=_help(
        "StructXLIP: weight of the local chunk-to-edge-crop InfoNCE"))
    structxlip_top_k: int = field(default=3, metadata=_help("StructXLIP: edge crops per image in the local term"))
    structxlip_chunk_tau: float = field(default=0.07, metadata=_help("StructXLIP: temperature of the local term"))
    structxlip_chunk_window: int = field(default=3, metadata=_help("StructXLIP: words per caption chunk"))
    structxlip_chunk_stride: int = field(default=1, metadata=_help("StructXLIP: stride between caption chunks"))
    structxlip_max_chunks: int = field(default=64, metadata=_help("StructXLIP: chunks per caption at most"))
    structxlip_max_log_logit_scale: float = field(default=3.5, metadata=_help(
        "StructXLIP: clamp of the log logit scale"))
    structxlip_lexicon: str = field(default="colour,material,texture", metadata=_help(
        "StructXLIP: word categories removed from captions for the structure term"))
    structxlip_anneal_start: float = field(default=0.1, metadata=_help(
        "StructXLIP: training fraction where the cosine annealing of term weights starts"))
    structxlip_anneal_end: float = field(default=0.8, metadata=_help(
        "StructXLIP: training fraction where it ends"))

    def __post_init__(self):
        for f in dataclasses.fields(self):  # coerce ints given for float fields (e.g. gamma=1 in YAML)
            value = getattr(self, f.name)
            if _field_type(f) is float and isinstance(value, int) and not isinstance(value, bool):
                setattr(self, f.name, float(value))
        self._check_choice("framework", FRAMEWORKS)
        self._check_choice("margin", MARGINS)
        self._check_choice("precision", PRECISIONS)
        self._check_choice("device", DEVICES)
        self._check_choice("finelip_hinge", FINELIP_HINGES)
        for name in ("gamma", "token_weight", "lr", "adapter_lr", "weight_decay", "grad_clip", "eps",
                     "lora_alpha", "module_lr", "longclip_short_weight", "finelip_weight", "finelip_margin"):
            self._check(name, getattr(self, name) >= 0, "must be >= 0")
        for name in ("epochs", "micro_batch", "accum_steps", "checkpoint_every", "lora_r",
                     "longclip_pca_components"):
            self._check(name, getattr(self, name) >= 1, "must be >= 1")
        for name in ("warmup_steps", "dynamics_every", "max_steps", "num_workers", "finelip_slots"):
            self._check(name, getattr(self, name) >= 0, "must be >= 0")
        self._check("micro_batch", self.micro_batch >= 2, "must be >= 2 (a contrastive batch needs negatives)")
        self._check("min_lr_ratio", 0 <= self.min_lr_ratio <= 1, "must be in [0, 1]")
        for name in ("beta1", "beta2", "lora_dropout"):
            self._check(name, 0 <= getattr(self, name) < 1, "must be in [0, 1)")
        self._check("caption_column", bool(self.caption_column), "must be a column name")
        self._check("finelip_score_weight", 0 <= self.finelip_score_weight <= 1, "must be in [0, 1]")
        if self.longclip_short_weight > 0:
            self._check("short_caption_column", bool(self.short_caption_column), "must be a column name")
        if self.precision == "bf16" and self.device == "cpu":
            raise ValueError("precision='bf16' needs device 'cuda' or 'auto': bf16 autocast is only used on CUDA")

    def _check(self, name: str, ok: bool, why: str) -> None:
        if not ok:
            raise ValueError(f"TrainConfig.{name}={getattr(self, name)!r} {why}")

    def _check_choice(self, name: str, choices: tuple[str, ...]) -> None:
        self._check(name, getattr(self, name) in choices, f"is not one of {', '.join(choices)}")

    @property
    def effective_batch(self) -> int:
        return self.micro_batch * self.accum_steps

    @classmethod
    def from_overrides(cls, overrides: dict[str, object] | None = None) -> TrainConfig:
        """Build from ``{"gamma": "0.5", ...}`` (the CLI's ``key=value`` pairs), converting to field types.

        Values that already have the field's type are taken as they are, so a parsed YAML dict works too.
        """
        overrides = dict(overrides or {})
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - set(fields))
        if unknown:
            raise ValueError(f"unknown TrainConfig key(s) {unknown}; known keys: {', '.join(fields)}")
        kwargs = {name: _parse(name, _field_type(fields[name]), value) for name, value in overrides.items()}
        return cls(**kwargs)

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name -> help text (for ``hnclip train --help``)."""
        return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def config_hash(self) -> str:
        """sha256 of the sorted dict as JSON; floats print with repr, so 1e-05 and 0.00001 hash alike."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


_HINTS: dict[str, type] = {}


def _field_type(f: dataclasses.Field) -> type:
    # annotations are strings under `from __future__ import annotations`; resolve them once
    if not _HINTS:
        _HINTS.update(typing.get_type_hints(TrainConfig))
    hint = _HINTS[f.name]
    if isinstance(hint, types.UnionType):  # not used today; keeps a later `int | None` field parseable
        hint = next(a for a in hint.__args__ if a is not type(None))
    return hint


def _parse(name: str, kind: type, value: object):
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(f"TrainConfig.{name}: cannot read {value!r} as a boolean (true/false/1/0/yes/no)")
    if kind in (int, float):
        if isinstance(value, bool):
            raise ValueError(f"TrainConfig.{name}: expected a number, got the boolean {value!r}")
        if isinstance(value, kind) or (kind is float and isinstance(value, int)):
            return kind(value)
        try:
            text = str(value).strip()
            if kind is int:
                try:
                    return int(text)
                except ValueError:
                    number = float(text)  # accepts "1e3"; refuses "2.5" rather than truncating it
                    if not number.is_integer():
                        raise
                    return int(number)
            return float(text)
        except ValueError:
            raise ValueError(f"TrainConfig.{name}: cannot read {value!r} as {kind.__name__}") from None
    return str(value)
