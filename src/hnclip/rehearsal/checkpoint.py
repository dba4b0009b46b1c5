"""A Long-CLIP-L checkpoint with random weights, in the exact format Long-CLIP publishes.

Long-CLIP's ``train/train.py`` saves ``torch.save(model.module.state_dict(), path)`` of its ``CLIP``
class (``model/model_longclip.py``): a plain dict of float32 tensors with OpenAI CLIP's key names, two
248-row text position tables (``positional_embedding``, whose rows [0, 20) are used, and
``positional_embedding_res``, whose rows [20, 248) are used: ``mask1``/``mask2`` are plain tensors, not
buffers, so they are not saved) and a 0-dim ``logit_scale`` (``train.py`` replaces it by
``Parameter(torch.ones([]) * log_scale)``).

The keys and shapes here are written from that class, not from our model, so converting the file with
``hnclip convert-checkpoint --format longclip`` (the paper's path) checks our converter against
Long-CLIP's layout rather than against itself. The initialisation follows Long-CLIP's
``initialize_parameters`` (normal with its standard deviations; LayerNorms at 1/0; biases 0), so the
random network's activations have the scale of a real one's at the start of training. The weights mean
nothing: the rehearsal exercises shapes and code paths, never accuracy.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

__all__ = ["LONGCLIP_L", "longclip_arch", "longclip_shapes", "longclip_state_dict", "write_longclip_checkpoint"]

# ViT-L/14 at 224 px with Long-CLIP's 248-position text tower (build_model's inferred numbers for
# longclip-L.pt: vision width 1024 x 24 layers, patch 14; text width 768 x 12 layers, vocab 49408)
LONGCLIP_L = {
    "embed_dim": 768,
    "image_resolution": 224,
    "vision_layers": 24,
    "vision_width": 1024,
    "vision_patch_size": 14,
    "context_length": 248,
    "vocab_size": 49408,
    "transformer_width": 768,
    "transformer_layers": 12,
}


def longclip_arch(layers: dict | None = None) -> dict:
    """Long-CLIP-L's numbers, with ``layers`` (``{"vision": N, "text": M}``, the config's
    ``rehearsal.layers``) replacing its depths when given: every width, the patch, the image size and the
    248 positions stay the paper's, so each block runs at the paper's shapes; only fewer are stacked."""
    if layers is None:
        return dict(LONGCLIP_L)
    depths = {"vision_layers": layers["vision"], "transformer_layers": layers["text"]}
    for key, value in depths.items():
        if not 1 <= int(value) <= LONGCLIP_L[key]:
            raise ValueError(f"rehearsal.layers: {key} {value} is outside 1..{LONGCLIP_L[key]} (Long-CLIP-L's)")
    return {**LONGCLIP_L, **{k: int(v) for k, v in depths.items()}}


def _block_shapes(prefix: str, width: int) -> dict[str, tuple[int, ...]]:
    """One ResidualAttentionBlock: nn.MultiheadAttention (packed in_proj), two LayerNorms, a 4x MLP."""
    return {
        f"{prefix}.attn.in_proj_weight": (3 * width, width),
        f"{prefix}.attn.in_proj_bias": (3 * width,),
        f"{prefix}.attn.out_proj.weight": (width, width),
        f"{prefix}.attn.out_proj.bias": (width,),
        f"{prefix}.ln_1.weight": (width,),
        f"{prefix}.ln_1.bias": (width,),
        f"{prefix}.mlp.c_fc.weight": (4 * width, width),
        f"{prefix}.mlp.c_fc.bias": (4 * width,),
        f"{prefix}.mlp.c_proj.weight": (width, 4 * width),
        f"{prefix}.mlp.c_proj.bias": (width,),
        f"{prefix}.ln_2.weight": (width,),
        f"{prefix}.ln_2.bias": (width,),
    }


def _std(key: str, width: int, layers: int) -> float:
    """Long-CLIP's initialize_parameters (the text tower's numbers, which it also applies nowhere else;
    the vision blocks get the same rule with their own width so both towers start at a sane scale)."""
    if key.endswith("attn.in_proj_weight"):
        return width ** -0.5
    if key.endswith(("attn.out_proj.weight", "mlp.c_proj.weight")):
        return (width ** -0.5) * ((2 * layers) ** -0.5)
    if key.endswith("mlp.c_fc.weight"):
        return (2 * width) ** -0.5
    return 0.0  # biases


def longclip_shapes(arch: dict | None = None) -> dict[str, tuple[int, ...]]:
    """Key -> shape of Long-CLIP's saved state dict (``arch`` overrides :data:`LONGCLIP_L`'s numbers)."""
    a = {**LONGCLIP_L, **(arch or {})}
    vw, tw, emb = a["vision_width"], a["transformer_width"], a["embed_dim"]
    grid = a["image_resolution"] // a["vision_patch_size"]
    shapes: dict[str, tuple[int, ...]] = {
        "positional_embedding": (a["context_length"], tw),
        "positional_embedding_res": (a["context_length"], tw),
        "text_projection": (tw, emb),
        "logit_scale": (),
        "visual.class_embedding": (vw,),
        "visual.positional_embedding": (grid * grid + 1, vw),
        "visual.proj": (vw, emb),
        "visual.conv1.weight": (vw, 3, a["vision_patch_size"], a["vision_patch_size"]),
        "visual.ln_pre.weight": (vw,),
        "visual.ln_pre.bias": (vw,),
    }
    for i in range(a["vision_layers"]):
        shapes.update(_block_shapes(f"visual.transformer.resblocks.{i}", vw))
    shapes.update({"visual.ln_post.weight": (vw,), "visual.ln_post.bias": (vw,)})
    for i in range(a["transformer_layers"]):
        shapes.update(_block_shapes(f"transformer.resblocks.{i}", tw))
    shapes.update({"token_embedding.weight": (a["vocab_size"], tw), "ln_final.weight": (tw,),
                   "ln_final.bias": (tw,)})
    return shapes


def longclip_state_dict(seed: int = 0, arch: dict | None = None) -> dict[str, torch.Tensor]:
    """Random float32 weights under Long-CLIP's key names and shapes (``arch`` defaults to Long-CLIP-L)."""
    a = {**LONGCLIP_L, **(arch or {})}
    vw, tw = a["vision_width"], a["transformer_width"]
    shapes = longclip_shapes(a)
    generator = torch.Generator().manual_seed(seed)

    def normal(shape, std):
        return torch.randn(shape, generator=generator, dtype=torch.float32) * std

    state = {}
    for key, shape in shapes.items():
        if key.endswith(("ln_1.weight", "ln_2.weight", "ln_pre.weight", "ln_post.weight", "ln_final.weight")):
            state[key] = torch.ones(shape)
        elif key == "logit_scale":
            state[key] = torch.tensor(math.log(1 / 0.07))  # CLIP's initial temperature, a 0-dim tensor
        elif key in ("positional_embedding", "positional_embedding_res"):
            state[key] = normal(shape, 0.01)
        elif key == "token_embedding.weight":
            state[key] = normal(shape, 0.02)
        elif key == "text_projection":
            state[key] = normal(shape, tw ** -0.5)
        elif key.startswith("visual.") and key.split(".")[1] in ("class_embedding", "positional_embedding", "proj"):
            state[key] = normal(shape, vw ** -0.5)  # VisionTransformer: scale * randn
        elif key == "visual.conv1.weight":
            state[key] = normal(shape, (3 * a["vision_patch_size"] ** 2) ** -0.5)  # fan-in scale
        elif key.startswith(("visual.transformer.", "transformer.")):
            width, layers = (vw, a["vision_layers"]) if key.startswith("visual.") else (tw, a["transformer_layers"])
            std = _std(key, width, layers)
            state[key] = normal(shape, std) if std else torch.zeros(shape)
        else:  # LayerNorm biases
            state[key] = torch.zeros(shape)
    return state


def write_longclip_checkpoint(path, seed: int = 0, arch: dict | None = None) -> Path:
    """``torch.save`` the random state dict to ``path`` as Long-CLIP's train.py does (about 1.7 GB)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(longclip_state_dict(seed, arch), tmp)
    tmp.replace(path)
    return path
