"""transformers' format: a ``CLIPModel.save_pretrained`` folder with its ``CLIPProcessor`` beside it.

Key mapping (ours = OpenAI/open_clip names, :func:`~hnclip.export.common.openai_state_dict`):

==========================================  =====================================================
ours                                        transformers ``CLIPModel``
==========================================  =====================================================
``token_embedding.weight``                  ``text_model.embeddings.token_embedding.weight``
``positional_embedding`` [L, W]             ``text_model.embeddings.position_embedding.weight``
``transformer.resblocks.i.ln_1/ln_2``       ``text_model.encoder.layers.i.layer_norm1/layer_norm2``
``...attn.in_proj_weight/bias`` (q;k;v)     ``...self_attn.q_proj/k_proj/v_proj`` (row thirds)
``...attn.out_proj``                        ``...self_attn.out_proj``
``...mlp.c_fc/c_proj``                      ``...mlp.fc1/fc2``
``ln_final``                                ``text_model.final_layer_norm``
``text_projection`` [W, D] (x @ P)          ``text_projection.weight`` [D, W] (Linear: transposed)
``visual.conv1.weight``                     ``vision_model.embeddings.patch_embedding.weight``
``visual.class_embedding``                  ``vision_model.embeddings.class_embedding``
``visual.positional_embedding``             ``vision_model.embeddings.position_embedding.weight``
``visual.ln_pre`` / ``visual.ln_post``      ``vision_model.pre_layrnorm`` / ``vision_model.post_layernorm``
``visual.transformer.resblocks.i.*``        ``vision_model.encoder.layers.i.*`` (as the text blocks)
``visual.proj`` [W, D]                      ``visual_projection.weight`` [D, W]
``logit_scale``                             ``logit_scale``
==========================================  =====================================================

Both implement the same blocks (pre-norm, LayerNorm eps 1e-5, attention scaled by head_dim ** -0.5, ln_post
on the class token, text pooled at EOT: ours at the largest id, transformers at the first ``eos_token_id``,
the same position for CLIP's tokenizer). QuickGELU maps to ``quick_gelu``, erf GELU to ``gelu``. Refused:
LayerScale (``ls_init_value``; CLIPModel has none), non-square images or patches, a vocabulary other than
CLIP's 49,408 BPE tokens (the tokenizer saved beside it would not fit).

The tokenizer is CLIP's BPE (our :mod:`hnclip.models.tokenizer` uses open_clip's copy of it), written as
a ``CLIPTokenizer`` from that same vocabulary and merge list with ``model_max_length`` = the model's
positions; the image processor reproduces our store's geometry (shorter side to the image size with the
model's own resize filter, bicubic or bilinear, centre crop) and normalisation. transformers' own
``CLIPImageProcessor`` places an odd crop margin's extra pixel on the other side than torchvision (and so
open_clip and our store) do. The export ships no code of its own (loading it would need
``trust_remote_code``, which this project never asks of anyone): the card shows the exact path instead,
torchvision's Resize + CenterCrop first (with the model's filter), then the processor with
``do_resize=False, do_center_crop=False``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

from hnclip.models.tokenizer import EOT_TOKEN_ID, SOT_TOKEN_ID

from .common import ExportError, architecture, openai_state_dict, refuse_if

__all__ = ["CLIP_VOCAB_SIZE", "clip_processor", "clip_tokenizer", "hf_clip_config",
           "hf_state_dict", "transformers_problems", "write_transformers"]

CLIP_VOCAB_SIZE = 49408
_BLOCK = {"ln_1": "layer_norm1", "ln_2": "layer_norm2", "attn.out_proj": "self_attn.out_proj",
          "mlp.c_fc": "mlp.fc1", "mlp.c_proj": "mlp.fc2"}


def transformers_problems(model) -> list[str]:
    arch = architecture(model)
    problems = []
    for tower, value in (("vision_cfg", arch.vision_ls_init_value), ("text_cfg", arch.text_ls_init_value)):
        if value is not None:
            problems.append(f"{tower}.ls_init_value={value} (transformers' CLIPModel has no LayerScale)")
    if not isinstance(arch.image_size, int) or not isinstance(arch.patch_size, int):
        problems.append(f"vision_cfg.image_size={arch.image_size!r}/patch_size={arch.patch_size!r} "
                        "(CLIPVisionConfig takes one side for square images and patches)")
    if arch.vocab_size != CLIP_VOCAB_SIZE:
        problems.append(f"text_cfg.vocab_size={arch.vocab_size} (the CLIP tokenizer saved beside it has "
                        f"{CLIP_VOCAB_SIZE} tokens)")
    return problems


def hf_clip_config(model):
    """The ``CLIPConfig`` of ``model``'s architecture."""
    from transformers import CLIPConfig

    arch = architecture(model)
    act = "quick_gelu" if arch.quick_gelu else "gelu"
    text = {"vocab_size": arch.vocab_size, "hidden_size": arch.text_width,
            "intermediate_size": int(arch.text_width * arch.text_mlp_ratio), "projection_dim": arch.embed_dim,
            "num_hidden_layers": arch.text_layers, "num_attention_heads": arch.text_heads,
            "max_position_embeddings": arch.context_length, "hidden_act": act, "layer_norm_eps": 1e-5,
            "bos_token_id": SOT_TOKEN_ID, "eos_token_id": EOT_TOKEN_ID, "pad_token_id": EOT_TOKEN_ID}
    vision = {"hidden_size": arch.vision_width, "intermediate_size": int(arch.vision_width * arch.vision_mlp_ratio),
              "projection_dim": arch.embed_dim, "num_hidden_layers": arch.vision_layers,
              "num_attention_heads": arch.vision_heads, "num_channels": 3, "image_size": arch.image_size,
              "patch_size": arch.patch_size, "hidden_act": act, "layer_norm_eps": 1e-5}
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=arch.embed_dim,
                      logit_scale_init_value=float(model.logit_scale.detach()))


def _blocks(state: dict, ours: str, theirs: str, layers: int, out: dict) -> None:
    for i in range(layers):
        src, dst = f"{ours}.{i}", f"{theirs}.{i}"
        weight, bias = state.pop(f"{src}.attn.in_proj_weight"), state.pop(f"{src}.attn.in_proj_bias")
        for name, w, b in zip(("q_proj", "k_proj", "v_proj"), weight.chunk(3), bias.chunk(3), strict=True):
            out[f"{dst}.self_attn.{name}.weight"] = w.clone()
            out[f"{dst}.self_attn.{name}.bias"] = b.clone()
        for a, b in _BLOCK.items():
            for param in ("weight", "bias"):
                out[f"{dst}.{b}.{param}"] = state.pop(f"{src}.{a}.{param}")


def hf_state_dict(model) -> dict[str, torch.Tensor]:
    """``model``'s weights under ``CLIPModel``'s names (see the module's table)."""
    arch = architecture(model)
    state = openai_state_dict(model)
    out = {
        "text_model.embeddings.token_embedding.weight": state.pop("token_embedding.weight"),
        "text_model.embeddings.position_embedding.weight": state.pop("positional_embedding"),
        "text_model.final_layer_norm.weight": state.pop("ln_final.weight"),
        "text_model.final_layer_norm.bias": state.pop("ln_final.bias"),
        "text_projection.weight": state.pop("text_projection").t().contiguous(),
        "vision_model.embeddings.class_embedding": state.pop("visual.class_embedding"),
        "vision_model.embeddings.patch_embedding.weight": state.pop("visual.conv1.weight"),
        "vision_model.embeddings.position_embedding.weight": state.pop("visual.positional_embedding"),
        "vision_model.pre_layrnorm.weight": state.pop("visual.ln_pre.weight"),
        "vision_model.pre_layrnorm.bias": state.pop("visual.ln_pre.bias"),
        "vision_model.post_layernorm.weight": state.pop("visual.ln_post.weight"),
        "vision_model.post_layernorm.bias": state.pop("visual.ln_post.bias"),
        "visual_projection.weight": state.pop("visual.proj").t().contiguous(),
        "logit_scale": state.pop("logit_scale"),
    }
    _blocks(state, "transformer.resblocks", "text_model.encoder.layers", arch.text_layers, out)
    _blocks(state, "visual.transformer.resblocks", "vision_model.encoder.layers", arch.vision_layers, out)
    if state:  # a weight this table does not know would be silently lost
        raise ExportError(f"transformers export: no CLIPModel name for {sorted(state)[:5]}")
    return out


@lru_cache(maxsize=1)
def _clip_bpe() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """CLIP's vocabulary and merges from open_clip's BPE file, special tokens under OpenAI's names."""
    from open_clip.tokenizer import SimpleTokenizer

    tokenizer = SimpleTokenizer()
    # open_clip names the two special tokens <start_of_text>/<end_of_text>; OpenAI's and transformers'
    # CLIP call them <|startoftext|>/<|endoftext|>; the ids are the same
    special = {SOT_TOKEN_ID: "<|startoftext|>", EOT_TOKEN_ID: "<|endoftext|>"}
    vocab = {}
    for token, index in tokenizer.encoder.items():
        vocab[special.get(index, token)] = index
    if len(vocab) != CLIP_VOCAB_SIZE or sorted(vocab.values()) != list(range(CLIP_VOCAB_SIZE)):
        raise ExportError(f"open_clip's CLIP vocabulary has {len(vocab)} tokens, expected ids 0..{CLIP_VOCAB_SIZE - 1}")
    merges = [pair for pair, _ in sorted(tokenizer.bpe_ranks.items(), key=lambda item: item[1])]
    return vocab, merges


def clip_tokenizer(context_length: int):
    from transformers import CLIPTokenizer

    vocab, merges = _clip_bpe()
    tokenizer = CLIPTokenizer(vocab=dict(vocab), merges=list(merges), model_max_length=context_length)
    if (tokenizer.bos_token_id, tokenizer.eos_token_id) != (SOT_TOKEN_ID, EOT_TOKEN_ID):
        raise ExportError(f"CLIPTokenizer maps its special tokens to {tokenizer.bos_token_id}/"
                          f"{tokenizer.eos_token_id}, expected {SOT_TOKEN_ID}/{EOT_TOKEN_ID}")
    return tokenizer


# PIL's codes, as CLIPImageProcessor.resample stores them (hnclip.models.from_transformers reads them back)
PIL_RESAMPLE = {"bicubic": 3, "bilinear": 2}


def clip_processor(model):
    from transformers import CLIPImageProcessor, CLIPProcessor

    arch = architecture(model)
    side = int(arch.image_size)
    images = CLIPImageProcessor(do_resize=True, size={"shortest_edge": side},
                                resample=PIL_RESAMPLE[arch.interpolation],
                                do_center_crop=True, crop_size={"height": side, "width": side}, do_rescale=True,
                                rescale_factor=1 / 255, do_normalize=True, image_mean=list(arch.mean),
                                image_std=list(arch.std), do_convert_rgb=True)
    return CLIPProcessor(image_processor=images, tokenizer=clip_tokenizer(arch.context_length))


@torch.no_grad()
def write_transformers(model, out_dir: Path, where: str = "model") -> list[Path]:
    from transformers import CLIPModel

    refuse_if(transformers_problems(model), "transformers", where)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    hf_model = CLIPModel(hf_clip_config(model)).eval()
    result = hf_model.load_state_dict(hf_state_dict(model), strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ExportError(f"transformers export of {where}: CLIPModel's weights and ours differ; missing "
                          f"{result.missing_keys[:5]}, unexpected {result.unexpected_keys[:5]}")
    hf_model.save_pretrained(out_dir)
    clip_processor(model).save_pretrained(out_dir)
    return sorted(p for p in out_dir.iterdir() if p.is_file())


def _transformers_version() -> str:
    import transformers

    return transformers.__version__
