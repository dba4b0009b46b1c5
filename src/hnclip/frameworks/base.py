"""The framework interface: what a fine-tuning framework adds to the one training loop.

A framework (Long-CLIP fine-tuning, LoRA, DoRA, FineLIP, GOAL, StructXLIP) is a :class:`Framework`
subclass. The loop in :mod:`hnclip.train` builds it from ``TrainConfig.framework`` through the registry
(:func:`hnclip.frameworks.build_framework`) and only ever calls the hooks below, never a framework name:

==========================  =============================================================================
hook                        the loop's use
==========================  =============================================================================
``settings_class``          the framework's settings dataclass (its registration row's); ``self.settings``
                            holds the run's
``products``                names of cached per-benchmark preprocessing products (``"segments"``, ...)
                            the run needs; their files are handed to :meth:`prepare`
``required_columns``        manifest columns besides the caption (e.g. a short caption)
``prepare``                 once, before training: read products / columns for the training set's rows
``batch_extras``            per micro-batch: the framework's data for those rows -> :attr:`Batch.extras`
``wrap_model``              once, after the frozen-margin features: e.g. add LoRA adapters
``param_groups``            AdamW groups: the model's at ``cfg.lr``, new modules at ``cfg.module_lr``
``encode``                  one micro-batch's forward pass(es) -> an output dict
``loss_terms``              named, already weighted loss terms; the loop backpropagates their sum
``export_model``            the plain DualEncoder saved for evaluation (adapters merged)
``encode_images/texts``,    evaluation: per-item features and the image x text score used for Recall@K
``score``, ``has_score``    (default: cosine of the global features)
``hn_plugin``               one line: what "+HN" (gamma > 0) trains for this framework (report legend)
==========================  =============================================================================

**The plug-in protocol.** :meth:`loss_terms` is the template every framework shares: the term named
``"global"`` is the framework's global image-text contrastive term, composed with the FILIP token term
(``"token"``, weight ``cfg.token_weight``) by :class:`hnclip.losses.HNClipLoss`, the one place where the
two meet; with ``gamma > 0`` (the "+HN" variant) the global term is the HN objective, with the run's
``label_smoothing`` in both variants. Everything else comes from :meth:`extra_terms`, which never sees
gamma. Subclasses override :meth:`extra_terms` (and :meth:`encode` when they need more forward passes).
A framework whose authors train no global term (FineLIP) says so with :attr:`trains_global_term`; its
"+HN" variant then adds the HN term rather than replacing one (:attr:`hn_plugin`).

A framework is an ``nn.Module`` whose submodules are its extra trainable modules (none for Long-CLIP,
LoRA, DoRA). They are created in ``__init__`` under the run's seed, trained with the model, saved in
resume checkpoints (``state_dict``) and beside the exported model (:func:`hnclip.frameworks.save_framework`),
and loaded again at evaluation (:func:`hnclip.framework_loading.load_framework`).

Writing a framework: its settings dataclass and one :func:`~hnclip.frameworks.registry.register_framework`
row (name, module, settings, products, "+HN" legend) in :mod:`.settings`; in its module a subclass that
sets ``name`` (``settings_class``, ``products`` and ``hn_plugin`` come from the row) and
``FRAMEWORK = YourClass`` at the end. Then ``workflow/scripts/config_docs.py`` rewrites the schema's
``framework`` enum and ``train.<section>`` and config/README.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from hnclip.losses import HNClipLoss

from .registry import framework_entry
from .settings import FrameworkSettings, LongCLIPSettings
from .weight_decay import param_groups

__all__ = ["Batch", "Framework"]


@dataclass
class Batch:
    """One micro-batch as the loop hands it to a framework.

    Attributes:
        pixels: normalised images [B, 3, H, W] on the training device.
        tokens: caption tokens [B, context_length] on the training device.
        positions: the micro-batch's rows of the training set (CPU LongTensor [B]); index
            per-row data prepared in :meth:`Framework.prepare` with it.
        epoch: the 0-based epoch the micro-batch belongs to (StructXLIP anneals its weights per epoch).
        epoch_progress: micro-batches of this epoch done before this one, over the epoch's micro-batches,
            in [0, 1) (FineLIP ramps its hinge in over the first epoch with it).
        extras: what :meth:`Framework.batch_extras` returned for these rows (already on the device).
    """

    pixels: torch.Tensor
    tokens: torch.Tensor
    positions: torch.Tensor
    epoch: int = 0
    epoch_progress: float = 0.0
    extras: dict[str, Any] = field(default_factory=dict)


class Framework(nn.Module):
    """Base class: plain fine-tuning of every weight with global InfoNCE (+ HN, + token term).

    Args:
        cfg: the run's :class:`~hnclip.config.train.TrainConfig`.
        model: the plain (not yet wrapped) DualEncoder; read for sizes (``embed_dim``,
            ``context_length``...) when building modules, never stored.

    Subclasses keep the constructor signature ``(cfg, model)``: evaluation rebuilds a framework from
    the saved config and the loaded model, then loads the module weights into it.
    """

    name: ClassVar[str] = ""
    #: the framework's settings dataclass; the run's instance is ``self.settings``
    settings_class: ClassVar[type[FrameworkSettings]] = LongCLIPSettings
    #: cached per-benchmark preprocessing products the training set must provide (see :meth:`prepare`)
    products: ClassVar[tuple[str, ...]] = ()
    #: True when :meth:`score` is not the cosine of global features (evaluation then uses it)
    has_score: ClassVar[bool] = False
    #: what a run with gamma > 0 ("+HN") trains, in one line (the report's plug-in legend)
    hn_plugin: ClassVar[str] = framework_entry("longclip").hn_legend

    def __init_subclass__(cls, **kwargs):
        """A named subclass takes its settings class, products and "+HN" legend from its registration row."""
        super().__init_subclass__(**kwargs)
        if cls.name:
            entry = framework_entry(cls.name)
            cls.settings_class, cls.products, cls.hn_plugin = entry.settings_cls, entry.products, entry.hn_legend

    def __init__(self, cfg, model: nn.Module | None = None):
        super().__init__()
        self.cfg = cfg
        self.settings = cfg.framework_settings
        if not isinstance(self.settings, self.settings_class):
            raise TypeError(f"framework {self.name or type(self).__name__!r} takes {self.settings_class.__name__}, "
                            f"the config holds {type(self.settings).__name__}")
        # no parameters or buffers: it adds nothing to the state dict
        self.criterion = HNClipLoss(gamma=cfg.gamma, token_weight=cfg.token_weight,
                                    label_smoothing=cfg.label_smoothing)

    # ----------------------------------------------------------------------------------- configuration
    @property
    def hn_meaning(self) -> str:
        """What "+HN" trains for this framework with these settings (:attr:`hn_plugin` unless an option changes it)."""
        return self.hn_plugin

    @property
    def trains_global_term(self) -> bool:
        """Whether :meth:`loss_terms` has a ``"global"`` term (False only where the authors train none)."""
        return True

    @property
    def needs_tokens(self) -> bool:
        """Whether :meth:`encode` asks the model for token features (they cost memory and time)."""
        return self.cfg.token_weight > 0

    def required_columns(self) -> tuple[str, ...]:
        """Manifest columns, besides ``cfg.caption_column``, that :meth:`prepare` reads."""
        return ()

    # ------------------------------------------------------------------------------------------ data
    def prepare(self, data, products: Mapping[str, Path], tokenize) -> None:
        """Called once before training with the training set and the product files.

        ``data`` is a :class:`hnclip.training.batches.TrainingSet` (``image_ids``, ``captions``,
        ``tokens``, and ``manifest``: the manifest rows in training-set order, with every column);
        ``products`` maps each name in :attr:`products` to its file or folder (a ``Path``);
        ``tokenize(list[str])`` is the model's tokenizer. Store per-row data on ``self`` (plain
        attributes, not buffers: it must not enter the state dict) for :meth:`batch_extras`. A product lacking an image of the training set
        must raise an error naming the file and the image_id.
        """

    def batch_extras(self, positions: torch.Tensor, device: torch.device) -> dict[str, Any]:
        """Per-micro-batch data for training-set rows ``positions`` (CPU LongTensor), moved to ``device``.

        Runs in the main process once per micro-batch: keep it to indexing prepared arrays.
        """
        return {}

    # ----------------------------------------------------------------------------------------- model
    def wrap_model(self, model: nn.Module) -> nn.Module:
        """The model to train (e.g. with adapters). Called after the frozen-margin features are encoded."""
        return model

    def export_model(self, model: nn.Module) -> nn.Module:
        """The plain DualEncoder to save and evaluate: adapters merged, Linear attention converted back."""
        from hnclip.models import merge_adapters

        return merge_adapters(model)

    def param_groups(self, model: nn.Module) -> list[dict]:
        """AdamW groups: the model's trainable parameters at ``cfg.lr``, the framework's modules at
        ``cfg.module_lr``.

        Each group is split into weight-decay and no-decay parameters (biases, norms, ...); every
        group carries ``lr`` and ``name``.
        """
        groups = [dict(g, lr=self.cfg.lr) for g in param_groups(model, self.cfg.weight_decay)]
        if any(p.requires_grad for p in self.parameters()):
            for group in param_groups(self, self.cfg.weight_decay):
                groups.append(dict(group, lr=self.cfg.module_lr, name="module_" + group["name"]))
        return groups

    # ----------------------------------------------------------------------------------------- training
    def encode(self, model: nn.Module, batch: Batch) -> dict[str, torch.Tensor]:
        """Forward pass(es) of one micro-batch (runs under the loop's autocast).

        The dict must hold the model's ``image_features``, ``text_features`` and ``logit_scale``
        (plus ``image_tokens``, ``text_tokens``, ``text_mask`` when :attr:`needs_tokens`); frameworks
        that encode more (crops, edge maps, short captions) add their own keys.
        """
        return model(batch.pixels, batch.tokens, with_tokens=self.needs_tokens)

    def global_term(self, out: Mapping[str, torch.Tensor], margin_features: torch.Tensor | None = None):
        """The global image-text contrastive term; with ``cfg.gamma > 0`` it is the HN objective.

        Features are cast to float32 and the loss runs outside autocast: in bf16, cosines near 0.9
        (dense-caption G entries) have a resolution of ~0.004, ~0.4 in logits at s = 100, which
        would drown the margin being studied.

        Under data parallelism (torchrun) the term spans the global micro-batch: local rows against
        every rank's features, with G from the gathered margin features (:class:`hnclip.losses.HNClipLoss`);
        on one process it is exactly ``contrastive_loss``. The token term and :meth:`extra_terms` stay
        per process.
        """
        return self.criterion.global_loss(out["image_features"].float(), out["text_features"].float(),
                                          out["logit_scale"].float(), margin_features)

    def token_term(self, out: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """``cfg.token_weight`` x the FILIP token loss of this process's rows (normalised token features)."""
        return self.criterion.token_term(out["image_tokens"].float(), out["text_tokens"].float(), out["text_mask"],
                                         out["logit_scale"].float())

    def loss_terms(self, out: Mapping[str, torch.Tensor], batch: Batch,
                   margin_features: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Named, already weighted terms of the trained objective (the loop minimises their sum).

        ``"global"`` first (the only term gamma touches) where :attr:`trains_global_term`, then
        ``"token"`` when ``cfg.token_weight > 0``, then :meth:`extra_terms`. ``margin_features``: the
        frozen-margin text features of the batch, or None (G from the batch's own text features).
        """
        terms = {}
        if self.trains_global_term:
            terms["global"] = self.global_term(out, margin_features)
        if self.cfg.token_weight > 0:
            terms["token"] = self.token_term(out)
        extra = self.extra_terms(out, batch)
        clash = set(extra) & set(terms)
        if clash:
            raise ValueError(f"framework {self.name!r}: extra_terms may not redefine {sorted(clash)}")
        terms.update(extra)
        return terms

    def extra_terms(self, out: Mapping[str, torch.Tensor], batch: Batch) -> dict[str, torch.Tensor]:
        """The framework's own terms, each already multiplied by its weight (never by gamma)."""
        return {}

    # --------------------------------------------------------------------------------------- evaluation
    def encode_images(self, model: nn.Module, pixels: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per-image evaluation features; every value has the images on dim 0 (kept on the CPU after)."""
        return {"features": model.encode_image(pixels)}

    def encode_texts(self, model: nn.Module, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per-caption evaluation features; every value has the captions on dim 0."""
        return {"features": model.encode_text(tokens)}

    def score(self, images: Mapping[str, torch.Tensor], texts: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Scores [n_images, n_texts] of image rows against caption rows (higher = better match).

        Called on chunks of rows, so it must be row-wise: a pair's score may not depend on the others.
        """
        return images["features"] @ texts["features"].T
