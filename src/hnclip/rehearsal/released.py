"""Stand-ins for the baselines' released weights, in each publisher's own format, with random weights.

What each publisher's training script writes (read from their code; :mod:`hnclip.models.publishers` reads them):

- a transformers ``CLIPModel`` base (``openai/clip-vit-base-patch16`` for GOAL's and StructXLIP's releases):
  ``save_pretrained`` with its ``CLIPProcessor`` (CLIP's BPE, OpenAI's normalisation, bicubic);
- GOAL (``goal_loss_finetuning.py``) and StructXLIP (``structxlip/train.py``): ``torch.save({k: v.cpu() for k, v
  in model.state_dict().items()}, path)`` of the fine-tuned CLIPModel, whose text position table
  ``longclip_pos_embeddings`` stretched to 248 rows; StructXLIP publishes one file per benchmark;
- FineLIP (``train/train.py`` ``save_checkpoint``): ``torch.save(self.model.module.state_dict(), path)`` of its
  ``CLIP``: Long-CLIP's keys (:mod:`.checkpoint`) plus ``cross_net.aggr_net.*`` and ``cross_net.cap_aggr_net.*``
  (``model/cross_net.py`` ``TokenAggregation``: ``weight`` = LayerNorm(D), Linear(D, int(0.2 D)), GELU,
  Linear(int(0.2 D), K); ``scale`` of shape [1, 1, 1], ones at init), K = int(num_patches * 0.4 * 0.5).

The fine-tuned weights are the base's moved by seeded noise, so a converter that took the base's tensor instead of
the file's would show in the features.
"""

from __future__ import annotations

from pathlib import Path

import torch

from hnclip.checkpoint_formats import checkpoint_format, resolve

__all__ = ["LONGCLIP_B", "finelip_stand_in", "finelip_state_dict", "longclip_stand_in", "overlay_stand_in",
           "overlay_state_dict", "write_clip_model_folder", "write_finelip_checkpoint", "write_overlay_checkpoint",
           "write_released_stand_ins"]

FINELIP_AGGR_RATIO, FINELIP_SPARSE_RATIO, FINELIP_DIM_RATIO = 0.4, 0.5, 0.2  # CrossSparseAggrNet_v2's defaults
# Long-CLIP-B (and FineLIP-B, trained from it): ViT-B/16 at 224 px, 248 text positions (build_model's numbers)
LONGCLIP_B = {"embed_dim": 512, "image_resolution": 224, "vision_layers": 12, "vision_width": 768,
              "vision_patch_size": 16, "context_length": 248, "vocab_size": 49408, "transformer_width": 512,
              "transformer_layers": 12}


def write_clip_model_folder(folder, *, seed: int = 0, vision: dict | None = None, text: dict | None = None,
                            projection_dim: int = 512) -> Path:
    """A random CLIPModel (default: openai/clip-vit-base-patch16's shapes) and its processor, saved as the Hub
    repository holds them."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    from hnclip.export.transformers_format import clip_tokenizer

    vision = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
              "image_size": 224, "patch_size": 16, "hidden_act": "quick_gelu", **(vision or {})}
    text = {"vocab_size": 49408, "hidden_size": 512, "intermediate_size": 2048, "num_hidden_layers": 12,
            "num_attention_heads": 8, "max_position_embeddings": 77, "hidden_act": "quick_gelu", **(text or {})}
    config = CLIPConfig(text_config=text, vision_config=vision, projection_dim=projection_dim)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = CLIPModel(config)
    folder = Path(folder)
    model.save_pretrained(folder)
    side = int(vision["image_size"])
    images = CLIPImageProcessor(size={"shortest_edge": side}, crop_size={"height": side, "width": side}, resample=3)
    CLIPProcessor(image_processor=images, tokenizer=clip_tokenizer(int(text["max_position_embeddings"]))
                  ).save_pretrained(folder)
    return folder


def _moved(state: dict, seed: int, scale: float = 0.02) -> dict:
    generator = torch.Generator().manual_seed(seed)
    return {k: (v + torch.randn(v.shape, generator=generator) * scale) if v.is_floating_point() else v
            for k, v in state.items()}


def overlay_state_dict(base_folder, seed: int = 0) -> dict[str, torch.Tensor]:
    """What GOAL's and StructXLIP's training saves: the base CLIPModel's state with its text positions stretched
    to 248 (Long-CLIP's scheme), every tensor moved by seeded noise."""
    from transformers import CLIPModel

    from hnclip.models.positional import stretch_positional_embedding

    state = CLIPModel.from_pretrained(str(base_folder)).state_dict()
    key = "text_model.embeddings.position_embedding.weight"
    state[key] = stretch_positional_embedding(state[key], 20)
    return {k: v.detach().cpu().clone() for k, v in _moved(state, seed).items()}


def write_overlay_checkpoint(path, base_folder, seed: int = 0) -> Path:
    """``torch.save`` of :func:`overlay_state_dict` (GOAL's and StructXLIP's ``.pth``)."""
    return _save(overlay_state_dict(base_folder, seed), path)


def finelip_state_dict(seed: int = 0, arch: dict | None = None) -> dict[str, torch.Tensor]:
    """FineLIP's saved ``CLIP``: Long-CLIP's state dict for ``arch`` plus its cross-net (module docstring)."""
    from .checkpoint import LONGCLIP_L, longclip_state_dict

    a = {**LONGCLIP_L, **(arch or {})}
    state = _moved(longclip_state_dict(seed, a), seed + 1)
    dim = int(a["embed_dim"])
    patches = (a["image_resolution"] // a["vision_patch_size"]) ** 2
    slots, hidden = int(patches * FINELIP_AGGR_RATIO * FINELIP_SPARSE_RATIO), int(dim * FINELIP_DIM_RATIO)
    generator = torch.Generator().manual_seed(seed + 2)

    def normal(*shape, std=0.1):
        return torch.randn(shape, generator=generator) * std

    for side in ("aggr_net", "cap_aggr_net"):
        prefix = f"cross_net.{side}"
        state.update({
            f"{prefix}.weight.0.weight": 1 + normal(dim), f"{prefix}.weight.0.bias": normal(dim),
            f"{prefix}.weight.1.weight": normal(hidden, dim, std=dim ** -0.5), f"{prefix}.weight.1.bias": normal(hidden),
            f"{prefix}.weight.3.weight": normal(slots, hidden, std=hidden ** -0.5), f"{prefix}.weight.3.bias": normal(slots),
            f"{prefix}.scale": 1 + normal(1, 1, 1),
        })
    return state


def write_finelip_checkpoint(path, seed: int = 0, arch: dict | None = None) -> Path:
    return _save(finelip_state_dict(seed, arch), path)


def _save(state: dict, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    tmp.replace(path)
    return path


def _inside(path, folder: Path) -> bool:
    return path is not None and Path(path).resolve().is_relative_to(folder.resolve())


def write_released_stand_ins(models: dict, folder, seed: int = 0, layers: dict | None = None) -> dict[str, str]:
    """Each ``models:`` entry's files, in its publisher's format, where the entry points inside the rehearsal's
    ``folder`` (a path elsewhere may be a real download and is never written): Long-CLIP's ``.pt`` (Long-CLIP-B's
    shapes), GOAL's and StructXLIP's ``.pth`` over a random ``openai/clip-vit-base-patch16``-shaped base folder,
    FineLIP-B's checkpoint, a transformers folder. ``layers`` ({vision, text}) stacks fewer blocks, every width
    kept (config ``rehearsal.layers``). Returns name -> what was written (files already there are kept)."""
    folder = Path(folder)
    depth = {"vision_layers": layers["vision"], "transformer_layers": layers["text"]} if layers else {}
    hf_depth = ({"num_hidden_layers": layers["vision"]}, {"num_hidden_layers": layers["text"]}) if layers else ({}, {})
    written = {}
    for name, entry in sorted(models.items()):
        source, checkpoint, base = entry["source"], entry.get("checkpoint"), entry.get("base")
        fmt = checkpoint_format(source)
        made = []
        for folder_path in ([base] if fmt.takes_base else []) + (
                [checkpoint] if fmt.checkpoint_kind == "folder" else []):
            if _inside(folder_path, folder) and not Path(folder_path).is_dir():
                write_clip_model_folder(folder_path, seed=seed, vision=hf_depth[0], text=hf_depth[1])
                made.append(str(folder_path))
        if _inside(checkpoint, folder) and not Path(checkpoint).exists():
            if fmt.stand_in is not None:
                resolve(fmt.stand_in)(checkpoint, base, seed, depth)
            if Path(checkpoint).exists():
                made.append(str(checkpoint))
        if made:
            written[name] = ", ".join(made)
    return written


# the stand-in writers hnclip.checkpoint_formats names, writer(checkpoint, base, seed, depth): a random file in
# the format's own layout at Long-CLIP-B's (or the base's) shapes, ``depth`` fewer blocks where set
def longclip_stand_in(checkpoint, base, seed: int, depth: dict) -> None:
    from .checkpoint import write_longclip_checkpoint

    write_longclip_checkpoint(checkpoint, seed=seed, arch={**LONGCLIP_B, **depth})


def overlay_stand_in(checkpoint, base, seed: int, depth: dict) -> None:
    write_overlay_checkpoint(checkpoint, base, seed=seed + 1)


def finelip_stand_in(checkpoint, base, seed: int, depth: dict) -> None:
    write_finelip_checkpoint(checkpoint, seed=seed, arch={**LONGCLIP_B, **depth})
