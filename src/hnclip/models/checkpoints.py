"""Loading OpenAI-format CLIP and Long-CLIP checkpoints into a :class:`DualEncoder`.

Sources are local files or ``hf://OWNER/REPO/FILENAME`` (resolved through the Hugging Face cache; the
token comes only from ``HF_TOKEN``; ``HF_HUB_OFFLINE=1`` and ``HF_HUB_CACHE`` are read at call time,
so a pre-populated cache works without network). Weights are read with ``torch.load(weights_only=True)``
or safetensors: never unpickled code.

We derive the architecture from the state dict exactly as open_clip's
``build_model_from_openai_state_dict`` does (heads = width // 64, QuickGELU) but build it ourselves in
float32: open_clip's builder rounds every weight through float16, which would also perturb float32
checkpoints, and its implicit config could not be recorded in the model's spec.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .dual_encoder import DualEncoder
from .registry import find_config_name

__all__ = ["LONGCLIP_FROZEN_POSITIONS", "config_from_openai_state_dict", "dual_encoder_from_openai_state",
           "load_longclip_checkpoint",
           "load_openai_checkpoint", "longclip_from_state_dict", "read_state_dict", "resolve_source"]

HF_SCHEME = "hf://"
# Long-CLIP's encode_text adds positional_embedding * mask1 (rows < 20) + positional_embedding_res * mask2
LONGCLIP_FROZEN_POSITIONS = 20
_OPENAI_EXTRA_KEYS = ("input_resolution", "context_length", "vocab_size")


def _is_true(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def resolve_source(source) -> Path:
    """A local path for ``source``: an existing file, or ``hf://OWNER/REPO/FILENAME`` via the HF cache."""
    text = str(source)
    if text.startswith(HF_SCHEME):
        parts = text[len(HF_SCHEME):].split("/", 2)
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"{text!r}: expected hf://OWNER/REPO/FILENAME")
        from huggingface_hub import hf_hub_download

        owner, repo, filename = parts
        try:
            path = hf_hub_download(
                repo_id=f"{owner}/{repo}",
                filename=filename,
                cache_dir=os.environ.get("HF_HUB_CACHE") or None,
                # False, not None: never fall back to a token stored on disk by `hf auth login`
                token=os.environ.get("HF_TOKEN") or False,
                local_files_only=_is_true(os.environ.get("HF_HUB_OFFLINE")),
            )
        except Exception as err:  # hub errors never contain the token
            offline = os.environ.get("HF_HUB_OFFLINE", "")
            raise FileNotFoundError(f"could not resolve {text!r} from the Hugging Face Hub "
                                    f"(HF_HUB_OFFLINE={offline!r}): {err}") from err
        return Path(path)
    path = Path(text).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    return path


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """Tensors of a ``.safetensors`` file or a ``torch.save``'d state dict (maybe under ``state_dict``)."""
    if path.suffix == ".safetensors":
        from .weights_files import load_weights

        return load_weights(path)
    from .weights_files import load_torch_weights

    loaded = load_torch_weights(path, "torch state dict")  # TorchScript archives and pickled models: refused
    if isinstance(loaded, dict) and isinstance(loaded.get("state_dict"), dict):
        loaded = loaded["state_dict"]
    if not isinstance(loaded, dict) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        raise ValueError(f"{path}: expected a dict of tensors, got {type(loaded).__name__}")
    return {k.removeprefix("module."): v for k, v in loaded.items()}


def _require(state: dict, keys, where: str) -> None:
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"{where}: missing key(s) {missing}")


def config_from_openai_state_dict(state: dict[str, torch.Tensor], where: str = "state dict") -> dict:
    """The architecture config of an OpenAI-format ViT CLIP state dict (open_clip's inference rules)."""
    if "visual.proj" not in state:
        raise ValueError(f"{where}: no 'visual.proj' key; only ViT CLIP checkpoints are supported")
    _require(state, ("visual.conv1.weight", "visual.positional_embedding", "text_projection",
                     "positional_embedding", "token_embedding.weight", "ln_final.weight"), where)
    vision_width = state["visual.conv1.weight"].shape[0]
    patch_size = state["visual.conv1.weight"].shape[-1]
    grid = round((state["visual.positional_embedding"].shape[0] - 1) ** 0.5)
    text_width = state["ln_final.weight"].shape[0]
    vision_layers = len({k.split(".")[3] for k in state if k.startswith("visual.transformer.resblocks.")})
    text_layers = len({k.split(".")[2] for k in state if k.startswith("transformer.resblocks.")})
    if text_width < 64 or vision_width < 64:
        raise ValueError(f"{where}: widths {vision_width}/{text_width} give zero heads "
                         "(OpenAI heads = width // 64)")
    return {
        "embed_dim": int(state["text_projection"].shape[1]),
        "quick_gelu": True,  # OpenAI CLIP and Long-CLIP were trained with QuickGELU
        "vision_cfg": {"image_size": int(patch_size * grid), "patch_size": int(patch_size),
                       "width": int(vision_width), "layers": vision_layers, "head_width": 64},
        "text_cfg": {"context_length": int(state["positional_embedding"].shape[0]),
                     "vocab_size": int(state["token_embedding.weight"].shape[0]),
                     "width": int(text_width), "heads": int(text_width // 64), "layers": text_layers},
    }


def _build_from_openai_state_dict(state: dict[str, torch.Tensor], frozen_positions: int,
                                  where: str) -> DualEncoder:
    state = {k: v for k, v in state.items() if k not in _OPENAI_EXTRA_KEYS}
    config = config_from_openai_state_dict(state, where)
    _require(state, ("logit_scale",), where)
    return dual_encoder_from_openai_state(config, state, frozen_positions, where, name=find_config_name(config))


def dual_encoder_from_openai_state(config: dict, state: dict[str, torch.Tensor], frozen_positions: int, where: str,
                                   name: str | None = None, tokenizer: str | None = None) -> DualEncoder:
    """A :class:`DualEncoder` of ``config`` holding ``state``: weights under OpenAI/open_clip names (what every
    converter maps its source to), ``positional_embedding`` the whole text table (its length is the model's
    positions, its first ``frozen_positions`` rows frozen), ``logit_scale`` the log scale. Loaded in float32; a
    tensor the architecture lacks, or one it has and ``state`` lacks, raises naming it."""
    state = dict(state)
    table = state.pop("positional_embedding")
    config = {**config, "text_cfg": {**config["text_cfg"], "context_length": int(table.shape[0])}}
    model = DualEncoder(config, int(table.shape[0]), frozen_positions, name=name, tokenizer=tokenizer)
    mapped = {"logit_scale": state.pop("logit_scale").reshape(model.logit_scale.shape),
              "positional_embedding_frozen": table[:frozen_positions],
              "positional_embedding_trainable": table[frozen_positions:]}
    mapped.update({f"clip.{k}": v for k, v in state.items()})
    mapped = {k: v.detach().to(torch.float32) for k, v in mapped.items()}
    result = model.load_state_dict(mapped, strict=False)
    if result.missing_keys or result.unexpected_keys:
        unexpected = [k.removeprefix("clip.") for k in result.unexpected_keys[:5]]
        raise ValueError(f"{where}: weights do not fit the architecture; missing {result.missing_keys[:5]}, "
                         f"unexpected {unexpected}")
    return model


def load_longclip_checkpoint(source) -> DualEncoder:
    """A Long-CLIP ``.pt`` (OpenAI keys plus ``positional_embedding_res``) as a DualEncoder.

    Long-CLIP stores two full 248-row tables and uses rows [0, 20) of ``positional_embedding`` and rows
    [20, 248) of ``positional_embedding_res``; we merge them and freeze the first 20 rows again.
    """
    path = resolve_source(source)
    return longclip_from_state_dict(read_state_dict(path), str(path))


def longclip_from_state_dict(state: dict[str, torch.Tensor], where: str) -> DualEncoder:
    """:func:`load_longclip_checkpoint` on a state dict already read (FineLIP's checkpoints carry Long-CLIP's
    less their own modules: :mod:`.publishers`); ``where`` names it in errors."""
    state = dict(state)
    _require(state, ("positional_embedding", "positional_embedding_res"), where)
    table, residual = state["positional_embedding"], state.pop("positional_embedding_res")
    if table.shape != residual.shape or table.shape[0] <= LONGCLIP_FROZEN_POSITIONS:
        raise ValueError(f"{where}: positional_embedding {tuple(table.shape)} and positional_embedding_res "
                         f"{tuple(residual.shape)} must match and have more than "
                         f"{LONGCLIP_FROZEN_POSITIONS} rows")
    state["positional_embedding"] = torch.cat([table[:LONGCLIP_FROZEN_POSITIONS],
                                               residual[LONGCLIP_FROZEN_POSITIONS:]], dim=0)
    return _build_from_openai_state_dict(state, LONGCLIP_FROZEN_POSITIONS, where)


def load_openai_checkpoint(source) -> DualEncoder:
    """A plain OpenAI-format CLIP state dict (e.g. 77 positions) as a DualEncoder, nothing frozen."""
    path = resolve_source(source)
    state = read_state_dict(path)
    if "positional_embedding_res" in state:
        raise ValueError(f"{path}: has positional_embedding_res, i.e. is a Long-CLIP checkpoint; "
                         "use load_longclip_checkpoint")
    return _build_from_openai_state_dict(state, 0, str(path))
