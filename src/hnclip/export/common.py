"""What every export format shares: our weights under OpenAI/open_clip key names, the architecture read off
a model's spec, and refusals that name the config key a format cannot represent."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from hnclip.models import DualEncoder

__all__ = ["Architecture", "ExportError", "architecture", "openai_state_dict", "refuse_if"]


class ExportError(ValueError):
    """The model cannot be written in the asked format without changing what it computes."""


@dataclass(frozen=True)
class Architecture:
    """The dimensions an exporter maps, with open_clip's defaults filled in (``hnclip.models.registry``)."""

    config: dict  # the model's own config, context length set to the model's
    embed_dim: int
    quick_gelu: bool
    image_size: int | tuple
    patch_size: int | tuple
    vision_width: int
    vision_layers: int
    vision_head_width: int
    vision_mlp_ratio: float
    vision_ls_init_value: float | None
    context_length: int
    vocab_size: int
    text_width: int
    text_heads: int
    text_layers: int
    text_mlp_ratio: float
    text_ls_init_value: float | None
    mean: tuple[float, ...]
    std: tuple[float, ...]
    frozen_positions: int
    # the resize filter the model's image stores use (its preprocess_cfg, open_clip's name): an export that
    # said another would feed the model other pixels than it was trained and evaluated on
    interpolation: str = "bicubic"

    @property
    def vision_heads(self) -> int:
        return self.vision_width // self.vision_head_width


def architecture(model: DualEncoder) -> Architecture:
    if not isinstance(model, DualEncoder):
        raise TypeError(f"export needs a plain DualEncoder (hnclip.models.load_model), got {type(model).__name__}")
    config = copy.deepcopy(model.spec["config"])
    config["text_cfg"]["context_length"] = model.context_length
    vision, text = config["vision_cfg"], config["text_cfg"]
    return Architecture(
        config=config, embed_dim=int(config["embed_dim"]), quick_gelu=bool(config.get("quick_gelu", False)),
        image_size=vision["image_size"], patch_size=vision["patch_size"], vision_width=int(vision["width"]),
        vision_layers=int(vision["layers"]), vision_head_width=int(vision.get("head_width", 64)),
        vision_mlp_ratio=float(vision.get("mlp_ratio", 4.0)), vision_ls_init_value=vision.get("ls_init_value"),
        context_length=int(model.context_length), vocab_size=int(text.get("vocab_size", 49408)),
        text_width=int(text["width"]), text_heads=int(text["heads"]), text_layers=int(text["layers"]),
        text_mlp_ratio=float(text.get("mlp_ratio", 4.0)), text_ls_init_value=text.get("ls_init_value"),
        mean=tuple(model.image_mean), std=tuple(model.image_std), frozen_positions=int(model.frozen_positions),
        interpolation=model.interpolation,
    )


def refuse_if(problems: list[str], fmt: str, where: str) -> None:
    """Raise :class:`ExportError` listing every problem (each names its config key), if there are any."""
    if problems:
        raise ExportError(f"{where}: cannot export as {fmt} without changing what the model computes: "
                          + "; ".join(problems))


@torch.no_grad()
def openai_state_dict(model: DualEncoder) -> dict[str, torch.Tensor]:
    """Float32 copies of the weights under OpenAI CLIP's names (open_clip's ``CLIP`` names them the same).

    Our ``clip.`` submodules drop their prefix; the split positional table (frozen rows, trainable rows)
    becomes one ``positional_embedding``; ``logit_scale`` is the log of the scale, as in CLIP.
    """
    state = {key.removeprefix("clip."): value.detach().to("cpu", torch.float32).clone().contiguous()
             for key, value in model.state_dict().items() if key.startswith("clip.")}
    state["positional_embedding"] = model.positional_embedding().detach().to("cpu", torch.float32).clone()
    state["logit_scale"] = model.logit_scale.detach().to("cpu", torch.float32).reshape(()).clone()
    return state
