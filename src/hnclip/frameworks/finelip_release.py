"""FineLIP's released checkpoint as one of our model folders: the Long-CLIP encoder, and beside it our FineLIP
framework holding the publisher's two aggregators, so its evaluation ranks by FineLIP's fused score.

Reading the publisher's file is the models layer's (:func:`hnclip.models.publishers.finelip_parts`, against
their code); building and saving the framework around it needs the frameworks, so it is done here, above it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["load_finelip", "load_finelip_checkpoint"]


def load_finelip_checkpoint(checkpoint, out_dir) -> Path:
    """FineLIP's released checkpoint as a model folder with its aggregators and fused score beside it."""
    from hnclip.config.train import TrainConfig
    from hnclip.frameworks import build_framework, save_framework
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
