"""Building dual encoders: random init from the registry, and Long-CLIP's positional stretch of a model."""

from __future__ import annotations

import torch

from .attention import convert_attention_to_linear, has_linear_attention
from .dual_encoder import DualEncoder
from .positional import stretch_positional_embedding, stretched_length
from .registry import get_model_config

__all__ = ["create_model", "stretch_model"]

_POSITIONAL_KEYS = ("positional_embedding_frozen", "positional_embedding_trainable")


def create_model(name: str, context_length: int | None = None, frozen_positions: int = 0,
                 seed: int | None = None) -> DualEncoder:
    """A randomly initialised :class:`DualEncoder` of registry architecture ``name``.

    ``seed`` makes the initialisation reproducible without touching the caller's global RNG state.
    """
    config = get_model_config(name)
    if seed is None:
        return DualEncoder(config, context_length, frozen_positions, name=name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return DualEncoder(config, context_length, frozen_positions, name=name)


def stretch_model(model: DualEncoder, keep: int = 20, factor: int = 4) -> DualEncoder:
    """A copy of ``model`` whose text table is stretched Long-CLIP style, rows ``[0, keep)`` frozen.

    An n-position model becomes a (keep + factor * (n - keep))-position one (77 -> 248); every other
    weight is copied unchanged, so the result matches what Long-CLIP's ``load_from_clip`` starts from.
    """
    if not isinstance(model, DualEncoder):
        raise TypeError(f"stretch_model needs a plain DualEncoder, got {type(model).__name__} "
                        "(merge adapters first with merge_adapters)")
    spec = model.spec
    new_length = stretched_length(model.context_length, keep, factor)
    stretched = DualEncoder(spec["config"], new_length, keep, spec["name"], spec.get("tokenizer"))
    if has_linear_attention(model):
        convert_attention_to_linear(stretched)
    state = {k: v for k, v in model.state_dict().items() if k not in _POSITIONAL_KEYS}
    table = stretch_positional_embedding(model.positional_embedding().detach(), keep, factor)
    state["positional_embedding_frozen"] = table[:keep]
    state["positional_embedding_trainable"] = table[keep:]
    stretched.load_state_dict(state, strict=True)
    reference = next(model.parameters())
    return stretched.to(device=reference.device, dtype=reference.dtype).train(model.training)
