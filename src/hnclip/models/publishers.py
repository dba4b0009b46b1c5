"""The baselines' released weights, read as their own evaluation code reads them.

**GOAL** (PerceptualAI-Lab/GOAL ``retrieval_goal.py``) and **StructXLIP** (intelligolabs/StructXLIP
``structxlip/retrieval.py``) publish a ``.pth`` that is a state dict of transformers' ``CLIPModel`` (their
training scripts save ``{k: v.cpu() for k, v in model.state_dict().items()}``). Their evaluation loads the base
model it was fine-tuned from (``openai/clip-vit-base-patch16`` or ``-large-patch14``), stretches its text
position table to 248 rows with ``longclip_pos_embeddings`` (Long-CLIP's scheme: 20 rows kept, 4 per later row,
:func:`hnclip.models.positional.stretch_positional_embedding`), then ``load_state_dict(checkpoint,
strict=False)``: every tensor of the file replaces the base's, and the base keeps what the file lacks.
StructXLIP first unwraps ``model_state_dict`` or a ``clip_model.`` prefix (its ``extract_state_dict``); GOAL
loads the file as it is. We do the same over the base's ``save_pretrained`` folder, read with
:mod:`.from_transformers`; the tensors the file lacks are logged (kept from the base, as theirs), a tensor the
base does not have is logged and left out (as ``strict=False`` leaves it), a tensor of another shape is refused
(``load_state_dict`` refuses it too). Their evaluation runs in bfloat16; ours in float32, as every evaluation.

**FineLIP** (ffa-ti-ma/FineLIP ``train/train.py`` ``save_checkpoint``) saves its whole ``CLIP`` module: Long-CLIP's
state dict (``positional_embedding`` and ``positional_embedding_res``) plus ``cross_net.*``, its
``CrossSparseAggrNet_v2`` (``model/cross_net.py``): ``aggr_net`` (image side) and ``cap_aggr_net`` (caption side),
each a ``TokenAggregation``: ``weight`` = LayerNorm, Linear(D, int(0.2 D)), GELU, Linear(., K), and ``scale``
[1, 1, 1]. The encoder goes through Long-CLIP's converter; the two aggregators become our FineLIP framework's
``image_aggregator`` and ``text_aggregator`` (:mod:`hnclip.frameworks.finelip`, written from the same code),
saved beside the model by :mod:`hnclip.framework_loading` (above the framework layer, which is above this one), so its evaluation ranks by FineLIP's fused score: ``train/test.py`` ``get_metrics``
with ``--finegrain``, ``0.8 * global cosine + 0.2 * forward_dual_aggr`` (``finelip.score_weight`` 0.2).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import torch

from .positional import stretch_positional_embedding, stretched_length
from .weights_files import load_torch_weights

__all__ = ["FINELIP_KEEP_SCORE_WEIGHT", "LONG_TOKENS", "PUBLISHERS", "finelip_parts", "load_overlay_checkpoint",
           "overlay_state", "read_publisher_state"]

log = logging.getLogger(__name__)

LONG_TOKENS = 248  # --new_max_token of GOAL's and StructXLIP's evaluation
KEEP = 20  # longclip_pos_embeddings' keep_len
FINELIP_KEEP_SCORE_WEIGHT = 0.2  # train/test.py: alpha 0.8 on the global logits, 0.2 on the fine-grained ones
_POSITIONS = "text_model.embeddings.position_embedding.weight"
_POSITION_IDS = ("text_model.embeddings.position_ids", "vision_model.embeddings.position_ids")


def _unwrap_structxlip(state: dict) -> dict:
    """StructXLIP's ``extract_state_dict``: ``model_state_dict`` if present, else a ``clip_model.`` prefix off."""
    if "model_state_dict" in state:
        return state["model_state_dict"]
    if any(k.startswith("clip_model.") for k in state):
        return {k.removeprefix("clip_model."): v for k, v in state.items()}
    return state


PUBLISHERS: dict[str, Callable[[dict], dict]] = {"goal": lambda state: state, "structxlip": _unwrap_structxlip}


def read_publisher_state(path: Path, publisher: str) -> dict[str, torch.Tensor]:
    """The tensors of a publisher's ``.pth`` (``torch.load(weights_only=True)``: never unpickled code)."""
    loaded = load_torch_weights(path, f"{publisher} checkpoint")
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: expected a state dict, got {type(loaded).__name__}")
    state = PUBLISHERS[publisher](loaded)
    bad = [k for k, v in state.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise ValueError(f"{path}: {publisher}'s checkpoint should hold tensors only; {bad[:5]} are not")
    return state


def overlay_state(base: dict, config: dict, checkpoint: dict, where: str) -> tuple[dict, dict]:
    """The base CLIPModel's state (and config dict) stretched to 248 positions and overlaid with ``checkpoint``,
    as ``longclip_pos_embeddings`` + ``load_state_dict(strict=False)`` leave the model (module docstring)."""
    length = int(base[_POSITIONS].shape[0])
    if stretched_length(length, KEEP) != LONG_TOKENS:
        raise ValueError(f"{where}: the base model has {length} text positions; longclip_pos_embeddings stretches "
                         f"77 to {LONG_TOKENS}, {length} to {stretched_length(length, KEEP)}")
    state = dict(base)
    state[_POSITIONS] = stretch_positional_embedding(base[_POSITIONS], KEEP)
    unexpected, replaced = [], 0
    for key, value in checkpoint.items():
        if key in _POSITION_IDS:
            continue
        if key not in state:
            unexpected.append(key)
            continue
        if tuple(value.shape) != tuple(state[key].shape):
            raise ValueError(f"{where}: tensor {key} has shape {tuple(value.shape)}, the base model's (stretched to "
                             f"{LONG_TOKENS} positions) {tuple(state[key].shape)}: not a checkpoint of this base")
        state[key] = value.to(torch.float32)
        replaced += 1
    kept = sorted(set(state) - set(checkpoint))
    if unexpected:
        log.warning("%s: %d tensor(s) the base model does not have are left out, as the publisher's "
                    "load_state_dict(strict=False) leaves them: %s", where, len(unexpected), unexpected[:10])
    if kept:
        log.warning("%s: %d tensor(s) absent from the checkpoint are the base model's, as in the publisher's "
                    "evaluation: %s", where, len(kept), kept[:10])
    if not replaced:
        raise ValueError(f"{where}: no tensor of the checkpoint fits the base model: not a checkpoint of it")
    log.info("%s: %d tensors from the checkpoint over the base model", where, replaced)
    config = {**config, "text_config": {**config["text_config"], "max_position_embeddings": LONG_TOKENS}}
    return state, config


def load_overlay_checkpoint(publisher: str, checkpoint, base_folder, frozen_positions: int = KEEP):
    """GOAL's or StructXLIP's released ``.pth`` over its base model's ``save_pretrained`` folder, as a DualEncoder."""
    from .from_transformers import load_transformers_folder

    checkpoint = Path(checkpoint)
    state = read_publisher_state(checkpoint, publisher)
    where = f"{publisher} checkpoint {checkpoint}"
    return load_transformers_folder(base_folder, frozen_positions=frozen_positions, name=f"{publisher}:{checkpoint.name}",
                                    state_override=lambda base, config: overlay_state(base, config, state, where))


def finelip_parts(state: dict, where: str) -> tuple[dict, dict, int]:
    """(Long-CLIP state dict, our FineLIP framework's tensors, K) of a FineLIP checkpoint's state dict."""
    encoder = {k: v for k, v in state.items() if not k.startswith(("cross_net.", "criterion."))}
    modules = {}
    sides = {"aggr_net": "image_aggregator", "cap_aggr_net": "text_aggregator"}
    for theirs, ours in sides.items():
        prefix = f"cross_net.{theirs}."
        part = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        expected = {"scale", "weight.0.weight", "weight.0.bias", "weight.1.weight", "weight.1.bias",
                    "weight.3.weight", "weight.3.bias"}
        if set(part) != expected:
            raise ValueError(f"{where}: cross_net.{theirs} holds {sorted(part)}, expected TokenAggregation's "
                             f"{sorted(expected)} (a FineLIP checkpoint trained with run_finelip)")
        for key, value in part.items():
            modules[f"{ours}.{key}"] = value.reshape(1) if key == "scale" else value
    other = sorted(k for k in state if k.startswith("cross_net.") and k.split(".")[1] not in sides)
    if other:
        raise ValueError(f"{where}: cross_net holds modules our FineLIP framework does not have: {other[:5]}")
    slots = int(modules["image_aggregator.weight.3.weight"].shape[0])
    return encoder, {k: v.to(torch.float32) for k, v in modules.items()}, slots
