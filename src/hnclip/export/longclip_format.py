"""Long-CLIP's own checkpoint format: the plain state dict its ``train/train.py`` saves.

Long-CLIP (``model/model_longclip.py``) holds two full 248-row text tables and adds rows ``[0, 20)`` of
``positional_embedding`` and rows ``[20, 248)`` of ``positional_embedding_res``; every other key is OpenAI
CLIP's. We write our one table into both keys, so whichever rows Long-CLIP reads from each are ours (the
rows it ignores are copies too), and :func:`hnclip.models.load_longclip_checkpoint` reads the file back to
the same weights. ``train.py`` trains in float32 (its model is ``.float()``'d on the CPU before training
under autocast) and saves ``model.state_dict()``: float32 tensors and no other entries.

``longclip.load`` builds the model from the state dict's shapes alone, with fixed rules (heads = width // 64
in both towers, QuickGELU, MLP width 4 x width, no LayerScale, exactly 248 text positions, OpenAI's
normalisation in its image transform, image side = patch size x grid), so an architecture outside them is
refused, naming the key. It also rounds every Linear/Conv weight and both projections through float16
before running in float32 on the CPU (``convert_weights``): its features equal ours up to that rounding.
"""

from __future__ import annotations

from pathlib import Path

import torch
from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD

from .common import architecture, openai_state_dict, refuse_if

__all__ = ["LONGCLIP_CONTEXT", "LONGCLIP_FILE", "LONGCLIP_KEEP", "longclip_problems", "longclip_state_dict",
           "write_longclip"]

LONGCLIP_FILE = "longclip.pt"
LONGCLIP_CONTEXT = 248  # CLIP.__init__ in Long-CLIP's model_longclip.py fixes the tables' and masks' length
LONGCLIP_KEEP = 20  # its mask1: rows read from positional_embedding; the rest from positional_embedding_res


def longclip_problems(model) -> list[str]:
    """What Long-CLIP's loader would build differently from ``model``, one entry per config key."""
    arch = architecture(model)
    problems = []
    if arch.context_length != LONGCLIP_CONTEXT:
        problems.append(f"text_cfg.context_length={arch.context_length} (Long-CLIP's model has exactly "
                        f"{LONGCLIP_CONTEXT} text positions)")
    if not arch.quick_gelu:
        problems.append("quick_gelu=false (Long-CLIP's blocks always use QuickGELU)")
    if arch.vision_head_width != 64:
        problems.append(f"vision_cfg.head_width={arch.vision_head_width} (Long-CLIP infers vision heads = "
                        "width // 64)")
    if arch.text_heads != arch.text_width // 64:
        problems.append(f"text_cfg.heads={arch.text_heads} (Long-CLIP infers text heads = width // 64 = "
                        f"{arch.text_width // 64})")
    for tower, ratio in (("vision_cfg", arch.vision_mlp_ratio), ("text_cfg", arch.text_mlp_ratio)):
        if ratio != 4.0:
            problems.append(f"{tower}.mlp_ratio={ratio} (Long-CLIP's MLP is 4 x width)")
    for tower, value in (("vision_cfg", arch.vision_ls_init_value), ("text_cfg", arch.text_ls_init_value)):
        if value is not None:
            problems.append(f"{tower}.ls_init_value={value} (Long-CLIP has no LayerScale)")
    if not isinstance(arch.image_size, int) or not isinstance(arch.patch_size, int):
        problems.append(f"vision_cfg.image_size={arch.image_size!r}/patch_size={arch.patch_size!r} "
                        "(Long-CLIP needs square images and patches)")
    elif arch.image_size % arch.patch_size:
        problems.append(f"vision_cfg.image_size={arch.image_size} is not a multiple of patch_size="
                        f"{arch.patch_size} (Long-CLIP's input resolution is patch_size x grid)")
    if not _close(arch.mean, OPENAI_DATASET_MEAN) or not _close(arch.std, OPENAI_DATASET_STD):
        problems.append(f"preprocess_cfg mean={list(arch.mean)} std={list(arch.std)} (Long-CLIP's transform "
                        "normalises with OpenAI's mean and std)")
    if arch.interpolation != "bicubic":  # longclip.load's preprocess is fixed: other pixels than the model's
        problems.append(f"preprocess_cfg.interpolation={arch.interpolation!r} (Long-CLIP's transform resizes "
                        "bicubic)")
    return problems


def _close(a, b) -> bool:
    return len(a) == len(b) and all(abs(float(x) - float(y)) < 1e-7 for x, y in zip(a, b, strict=True))


def longclip_state_dict(model, where: str = "model") -> dict[str, torch.Tensor]:
    """``model``'s weights as Long-CLIP's ``train.py`` saves them (refused if Long-CLIP cannot build it)."""
    refuse_if(longclip_problems(model), "longclip", where)
    state = openai_state_dict(model)
    table = state["positional_embedding"]
    state["positional_embedding_res"] = table.clone()
    return state


def write_longclip(model, out_dir: Path, where: str = "model") -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / LONGCLIP_FILE
    torch.save(longclip_state_dict(model, where), path)
    return [path]
