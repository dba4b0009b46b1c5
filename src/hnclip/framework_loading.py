"""Frameworks rebuilt from files: a run's framework saved beside its model folder (:func:`load_framework`, for
evaluation, export and the regime job), and FineLIP's released checkpoint as one of our model folders
(:func:`load_finelip_checkpoint`): the Long-CLIP encoder, and beside it our FineLIP framework holding the
publisher's two aggregators, so its evaluation ranks by FineLIP's fused score.

Both rebuild a run's settings (:class:`~hnclip.config.train.TrainConfig`), which is composed of the frameworks'
settings, so they sit above both packages; the frameworks save themselves
(:func:`hnclip.frameworks.save_framework`) without it. Reading the publisher's file is the models layer's
(:func:`hnclip.models.publishers.finelip_parts`, against their code).
"""

from __future__ import annotations

from pathlib import Path

from hnclip.config.train import TrainConfig
from hnclip.frameworks import build_framework, save_framework

__all__ = ["load_finelip", "load_finelip_checkpoint", "load_framework"]


def load_framework(directory, model):
    """The framework saved beside the model in ``directory`` (None for a model saved without one).

    ``model`` is the loaded plain DualEncoder (the framework reads its sizes to rebuild modules).
    Module weights are loaded strictly: a missing or extra tensor raises naming the file.
    """
    from hnclip.models.io import read_framework_files

    saved = read_framework_files(directory)
    if saved is None:
        return None
    name, config, tensors, where = saved
    try:
        cfg = TrainConfig.from_overrides(config)
    except ValueError as err:
        raise ValueError(f"{where}: saved config does not fit this TrainConfig ({err})") from err
    if cfg.framework != name:
        raise ValueError(f"{where}: framework {name!r} but its config says {cfg.framework!r}")
    framework = build_framework(cfg, model)
    try:
        result = framework.load_state_dict(tensors, strict=False)
    except RuntimeError as err:  # shapes differ: the config was edited or the weights come from elsewhere
        raise ValueError(f"{where}: module weights do not fit framework {name!r} ({err})") from err
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(f"{where}: module weights do not fit framework {name!r}; missing "
                         f"{result.missing_keys[:5]}, unexpected {result.unexpected_keys[:5]}")
    return framework


def load_finelip_checkpoint(checkpoint, out_dir) -> Path:
    """FineLIP's released checkpoint as a model folder with its aggregators and fused score beside it."""
    from hnclip.models.checkpoints import longclip_from_state_dict, read_state_dict
    from hnclip.models.io import save_model
    from hnclip.models.publishers import FINELIP_KEEP_SCORE_WEIGHT, finelip_parts

    checkpoint = Path(checkpoint)
    where = f"FineLIP checkpoint {checkpoint}"
    encoder, modules, slots = finelip_parts(read_state_dict(checkpoint), where)
    model = longclip_from_state_dict(encoder, where)
    cfg = TrainConfig.from_overrides({"framework": "finelip", "finelip.slots": str(slots),
                                      "finelip.score_weight": str(FINELIP_KEEP_SCORE_WEIGHT)})
    framework = build_framework(cfg, model)
    try:
        result = framework.load_state_dict(modules, strict=False)
    except RuntimeError as err:
        raise ValueError(f"{where}: its aggregators do not fit our FineLIP framework ({err})") from err
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(f"{where}: its aggregators do not fit our FineLIP framework; missing {result.missing_keys[:5]}, "
                         f"unexpected {result.unexpected_keys[:5]}")
    save_model(model, out_dir)
    save_framework(framework, out_dir)
    return Path(out_dir)


def load_finelip(request):
    """The ``finelip`` checkpoint format's loader (:mod:`hnclip.checkpoint_formats`): the checkpoint fetched and
    saved with its cross-net as a model folder by :func:`load_finelip_checkpoint` (no dual encoder returned)."""
    if request.stretch is not None:
        raise ValueError(f"{request.key}.stretch: a FineLIP checkpoint has its 248 positions already")
    weights = request.fetch_checkpoint()
    load_finelip_checkpoint(weights, request.out_dir)
    return None, weights
