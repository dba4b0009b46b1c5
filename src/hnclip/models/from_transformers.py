"""transformers' ``CLIPModel`` as a :class:`DualEncoder`: a ``save_pretrained`` folder (or its weights in memory).

The key mapping is the inverse of :mod:`hnclip.export.transformers_format`'s table (transformers' names ->
OpenAI/open_clip's, q/k/v stacked into ``in_proj``, the two projections transposed back); both libraries
implement the same blocks (pre-norm, attention scaled by head_dim ** -0.5, ``ln_post`` on the class token,
text pooled at EOT). What would compute something else is refused, naming the config key:

- an activation other than ``quick_gelu`` or ``gelu`` (erf), or one that differs between the towers;
- a LayerNorm epsilon other than 1e-5 (open_clip's);
- a text ``eos_token_id`` other than the largest id of the vocabulary or the legacy ``2`` (transformers then
  pools at the argmax of the ids): we pool at the largest id, CLIP's EOT;
- a vocabulary other than CLIP's BPE (our tokenizer's), checked on the folder's own tokenizer when it has one.

**Preprocessing.** The folder's image processor (``preprocessor_config.json``, or the ``image_processor`` of a
``processor_config.json``, read by transformers' ``CLIPImageProcessor.from_pretrained``) gives the mean, std and
interpolation (``resample`` 3 bicubic, 2 bilinear); its resize must be the shorter side to the model's image
size followed by a centre crop of that size (what our image stores do), else it is refused naming the key. A
folder without one (a bare ``CLIPModel.save_pretrained``) takes ``CLIPImageProcessor``'s defaults, OpenAI's
normalisation and bicubic, at the model's own image size, and says so in the log.

**Tokenizer.** A folder with tokenizer files is loaded with ``AutoTokenizer`` (never remote code): its
vocabulary must be CLIP's, and its ids for a few probe captions must equal ours up to EOT (it pads with EOT,
we pad with 0: the padding never reaches a feature). Without tokenizer files the vocabulary size must be
CLIP's 49,408. The converted model records ``tokenizer: clip``.

**Checked on the spot.** A conversion ends by running transformers' own ``CLIPModel`` and the converted model
on the same probe (seeded random pixels, the probe captions): features further apart than 1e-4 refuse the
conversion, so a CLIPModel option this module does not know cannot slip through as a silently different model.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from .dual_encoder import DualEncoder
from .tokenizer import EOT_TOKEN_ID

__all__ = ["CLIP_VOCAB_SIZE", "PROBE_CAPTIONS", "PROBE_TOLERANCE", "check_hf_tokenizer", "config_from_hf",
           "dual_encoder_from_hf", "hf_preprocess", "load_transformers_folder", "openai_state_from_hf",
           "verify_against_hf"]

log = logging.getLogger(__name__)

CLIP_VOCAB_SIZE = 49408
LEGACY_EOS_ID = 2  # transformers' CLIPTextTransformer pools at argmax(input_ids) for this value
_ACTIVATIONS = {"quick_gelu": True, "gelu": False}
_RESAMPLE = {3: "bicubic", 2: "bilinear"}  # PIL's codes in CLIPImageProcessor.resample
_BLOCK = {"layer_norm1": "ln_1", "layer_norm2": "ln_2", "self_attn.out_proj": "attn.out_proj",
          "mlp.fc1": "mlp.c_fc", "mlp.fc2": "mlp.c_proj"}
_IGNORED = ("text_model.embeddings.position_ids", "vision_model.embeddings.position_ids")
PROBE_TOLERANCE = 1e-4  # max abs feature difference a conversion may show on the probe (float32)
PROBE_CAPTIONS = ("A red cube to the left of a small blue sphere.",
                  "two striped cylinders, one green and one yellow; it's on a grey floor!",
                  "An OLD café sign reads 'Open 24/7' above the door.")


def _get(section, key: str, default=None):
    return section.get(key, default) if isinstance(section, dict) else getattr(section, key, default)


def config_from_hf(hf_config, where: str) -> dict:
    """Our architecture config (open_clip's shape) of a ``CLIPConfig`` (object or its dict)."""
    text, vision = _get(hf_config, "text_config"), _get(hf_config, "vision_config")
    problems = []
    acts = {tower: _get(cfg, "hidden_act", "quick_gelu") for tower, cfg in (("text", text), ("vision", vision))}
    for tower, act in acts.items():
        if act not in _ACTIVATIONS:
            problems.append(f"{tower}_config.hidden_act={act!r} (supported: {', '.join(_ACTIVATIONS)})")
    if len(set(acts.values())) > 1:
        problems.append(f"text_config.hidden_act={acts['text']!r} differs from vision_config.hidden_act="
                        f"{acts['vision']!r} (open_clip has one activation for both towers)")
    for tower, cfg in (("text", text), ("vision", vision)):
        eps = float(_get(cfg, "layer_norm_eps", 1e-5))
        if eps != 1e-5:
            problems.append(f"{tower}_config.layer_norm_eps={eps} (open_clip's LayerNorm uses 1e-5)")
        width, inter = int(_get(cfg, "hidden_size")), int(_get(cfg, "intermediate_size"))
        if int(width * (inter / width)) != inter:
            problems.append(f"{tower}_config.intermediate_size={inter} is no whole MLP ratio of hidden_size={width}")
        if width % int(_get(cfg, "num_attention_heads")):
            problems.append(f"{tower}_config.hidden_size={width} is not a multiple of num_attention_heads")
    if int(_get(vision, "num_channels", 3)) != 3:
        problems.append(f"vision_config.num_channels={_get(vision, 'num_channels')} (RGB only)")
    vocab = int(_get(text, "vocab_size"))
    eos = _get(text, "eos_token_id", LEGACY_EOS_ID)
    if eos not in (LEGACY_EOS_ID, vocab - 1):
        problems.append(f"text_config.eos_token_id={eos}: pooled at that id, we pool at the largest id "
                        f"({vocab - 1}, CLIP's EOT)")
    projection = int(_get(hf_config, "projection_dim"))
    if problems:
        raise ValueError(f"{where}: this CLIPModel cannot be converted without changing what it computes: "
                         + "; ".join(problems))
    v_width, t_width = int(_get(vision, "hidden_size")), int(_get(text, "hidden_size"))
    return {
        "embed_dim": projection,
        "quick_gelu": _ACTIVATIONS[acts["text"]],
        "vision_cfg": {"image_size": int(_get(vision, "image_size")), "patch_size": int(_get(vision, "patch_size")),
                       "width": v_width, "layers": int(_get(vision, "num_hidden_layers")),
                       "head_width": v_width // int(_get(vision, "num_attention_heads")),
                       "mlp_ratio": int(_get(vision, "intermediate_size")) / v_width},
        "text_cfg": {"context_length": int(_get(text, "max_position_embeddings")), "vocab_size": vocab,
                     "width": t_width, "heads": int(_get(text, "num_attention_heads")),
                     "layers": int(_get(text, "num_hidden_layers")),
                     "mlp_ratio": int(_get(text, "intermediate_size")) / t_width},
    }


def _layers(state: dict, prefix: str) -> int:
    return len({k[len(prefix):].split(".")[0] for k in state if k.startswith(prefix)})


def _blocks(state: dict, theirs: str, ours: str, out: dict) -> None:
    for i in range(_layers(state, theirs + ".")):
        src, dst = f"{theirs}.{i}", f"{ours}.{i}"
        for param in ("weight", "bias"):
            out[f"{dst}.attn.in_proj_{param}"] = torch.cat(
                [state.pop(f"{src}.self_attn.{n}_proj.{param}") for n in ("q", "k", "v")], dim=0)
            for a, b in _BLOCK.items():
                out[f"{dst}.{b}.{param}"] = state.pop(f"{src}.{a}.{param}")


def openai_state_from_hf(hf_state: dict, where: str) -> dict[str, torch.Tensor]:
    """A ``CLIPModel`` state dict under OpenAI/open_clip names (``positional_embedding`` whole, ``logit_scale``
    the log scale); a tensor the table does not know is refused, never dropped."""
    state = {k: v for k, v in hf_state.items() if k not in _IGNORED}
    try:
        out = {
            "token_embedding.weight": state.pop("text_model.embeddings.token_embedding.weight"),
            "positional_embedding": state.pop("text_model.embeddings.position_embedding.weight"),
            "ln_final.weight": state.pop("text_model.final_layer_norm.weight"),
            "ln_final.bias": state.pop("text_model.final_layer_norm.bias"),
            "text_projection": state.pop("text_projection.weight").t(),
            "visual.class_embedding": state.pop("vision_model.embeddings.class_embedding"),
            "visual.conv1.weight": state.pop("vision_model.embeddings.patch_embedding.weight"),
            "visual.positional_embedding": state.pop("vision_model.embeddings.position_embedding.weight"),
            "visual.ln_pre.weight": state.pop("vision_model.pre_layrnorm.weight"),
            "visual.ln_pre.bias": state.pop("vision_model.pre_layrnorm.bias"),
            "visual.ln_post.weight": state.pop("vision_model.post_layernorm.weight"),
            "visual.ln_post.bias": state.pop("vision_model.post_layernorm.bias"),
            "visual.proj": state.pop("visual_projection.weight").t(),
            "logit_scale": state.pop("logit_scale"),
        }
        _blocks(state, "text_model.encoder.layers", "transformer.resblocks", out)
        _blocks(state, "vision_model.encoder.layers", "visual.transformer.resblocks", out)
    except KeyError as err:
        raise ValueError(f"{where}: not a CLIPModel state dict; missing {err.args[0]!r}") from None
    if state:
        raise ValueError(f"{where}: CLIPModel weights with no open_clip counterpart: {sorted(state)[:5]} (a "
                         "CLIPModel variant this converter does not know)")
    return {k: v.detach().to(torch.float32).contiguous() for k, v in out.items()}


def dual_encoder_from_hf(hf_state: dict, hf_config, where: str, preprocess: dict, frozen_positions: int = 0,
                         name: str | None = None) -> DualEncoder:
    """The DualEncoder computing what ``CLIPModel(hf_config)`` with ``hf_state`` computes, its ``preprocess``
    (mean, std, interpolation: :func:`hf_preprocess`) and CLIP's tokenizer recorded in its spec."""
    from .checkpoints import dual_encoder_from_openai_state

    config = config_from_hf(hf_config, where)
    config["preprocess_cfg"] = dict(preprocess)
    return dual_encoder_from_openai_state(config, openai_state_from_hf(hf_state, where), frozen_positions, where,
                                          name=name, tokenizer="clip")


_PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")  # the image processor alone, or in a processor


def hf_preprocess(folder: Path | None, image_size: int, where: str) -> dict:
    """mean, std and interpolation of the folder's image processor (read by transformers' own
    ``CLIPImageProcessor.from_pretrained``), checked against what our image stores do; CLIPImageProcessor's
    defaults when the folder has none."""
    from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD

    if folder is None or not any((Path(folder) / f).is_file() for f in _PROCESSOR_FILES):
        log.info("%s: no image processor; CLIPImageProcessor's defaults (OpenAI's mean and std, bicubic, shorter "
                 "side to %d then a centre crop)", where, image_size)
        return {"mean": list(OPENAI_DATASET_MEAN), "std": list(OPENAI_DATASET_STD), "interpolation": "bicubic"}
    from transformers import CLIPImageProcessor

    cfg = CLIPImageProcessor.from_pretrained(str(folder))
    problems = []
    size = dict(cfg.size) if cfg.size is not None else {"shortest_edge": image_size}
    if not cfg.do_resize or size.get("shortest_edge") != image_size:
        problems.append(f"size={size!r} (the stores resize the shorter side to the model's {image_size})")
    crop = dict(cfg.crop_size) if cfg.crop_size is not None else {}
    if not cfg.do_center_crop or (crop.get("height"), crop.get("width")) != (image_size, image_size):
        problems.append(f"crop_size={crop!r} (the stores centre-crop {image_size}x{image_size})")
    resample = int(cfg.resample) if cfg.resample is not None else None
    if resample not in _RESAMPLE:
        problems.append(f"resample={cfg.resample!r} (supported: 3 bicubic, 2 bilinear)")
    if not cfg.do_rescale or abs(float(cfg.rescale_factor) - 1 / 255) > 1e-12:
        problems.append(f"rescale_factor={cfg.rescale_factor!r} (pixels are scaled by 1/255)")
    if not cfg.do_normalize:
        problems.append("do_normalize=false")
    if problems:
        raise ValueError(f"{folder}: image preprocessing our image stores cannot reproduce: " + "; ".join(problems))
    return {"mean": [float(v) for v in cfg.image_mean], "std": [float(v) for v in cfg.image_std],
            "interpolation": _RESAMPLE[resample]}


_TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "tokenizer_config.json")


def check_hf_tokenizer(folder: Path | None, vocab_size: int, where: str) -> None:
    """Refuse a model whose tokenizer is not CLIP's lower-cased BPE (module docstring)."""
    from .tokenizer import tokenize

    if folder is None or not any((Path(folder) / f).is_file() for f in _TOKENIZER_FILES):
        if vocab_size != CLIP_VOCAB_SIZE:
            raise ValueError(f"{where}: no tokenizer files and a vocabulary of {vocab_size}, not CLIP's "
                             f"{CLIP_VOCAB_SIZE}: its tokenizer is unknown")
        log.info("%s: no tokenizer files; CLIP's BPE (vocabulary of %d) assumed", where, CLIP_VOCAB_SIZE)
        return
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    if len(tokenizer) != CLIP_VOCAB_SIZE or tokenizer.eos_token_id != EOT_TOKEN_ID:
        raise ValueError(f"{where}: its tokenizer ({type(tokenizer).__name__}, {len(tokenizer)} tokens, EOS id "
                         f"{tokenizer.eos_token_id}) is not CLIP's BPE ({CLIP_VOCAB_SIZE} tokens, EOT {EOT_TOKEN_ID}); "
                         "only CLIP's tokenizer is supported")
    ours = tokenize(list(PROBE_CAPTIONS), 77)
    theirs = tokenizer(list(PROBE_CAPTIONS), padding="max_length", max_length=77, truncation=True)["input_ids"]
    for caption, mine, other in zip(PROBE_CAPTIONS, ours.tolist(), theirs, strict=True):
        n = mine.index(EOT_TOKEN_ID) + 1
        if list(other[:n]) != mine[:n]:
            raise ValueError(f"{where}: its tokenizer gives other ids than CLIP's BPE for {caption!r} "
                             f"({list(other[:n])} vs {mine[:n]}); only CLIP's tokenizer is supported")


def pickled_weights(folder: Path) -> dict | None:
    """The folder's ``pytorch_model.bin`` weights (one file or the shards its index names), loaded weights-only by
    :func:`hnclip.models.weights_files.load_torch_weights`; None when it has safetensors (which transformers
    prefers) or no torch pickle.

    transformers' own ``torch.load`` of a pickle that needs code raises torch's message, whose last lines
    advise ``weights_only=False`` and name neither the file nor the refusal; loading it here first gives the
    one-line refusal every other checkpoint gets, and the weights are passed on (``state_dict=``), not read twice.
    """
    import json

    from .weights_files import load_torch_weights

    if (folder / "model.safetensors").is_file() or (folder / "model.safetensors.index.json").is_file():
        return None
    index = folder / "pytorch_model.bin.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"{index}: not a transformers weights index (a JSON object with a weight_map of "
                             f"shard files): {type(err).__name__}: {err}") from None
    elif (folder / "pytorch_model.bin").is_file():
        shards = ["pytorch_model.bin"]
    else:
        return None
    state: dict = {}
    for shard in shards:
        state.update(load_torch_weights(folder / shard, "transformers weights file"))
    return state


def load_transformers_folder(folder, frozen_positions: int = 0, name: str | None = None,
                             state_override=None) -> DualEncoder:
    """The ``CLIPModel.save_pretrained`` folder ``folder`` as a DualEncoder, its preprocessing and tokenizer
    checked (module docstring). ``state_override(hf_state, hf_config) -> (hf_state, hf_config)`` may change the
    weights first (GOAL's and StructXLIP's checkpoints over their base model: :mod:`.publishers`)."""
    from transformers import CLIPConfig, CLIPModel

    folder = Path(folder)
    where = str(folder)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder}: not a transformers model folder (no config.json)")
    hf_config = CLIPConfig.from_pretrained(str(folder))
    if hf_config.model_type != "clip":
        raise ValueError(f"{folder}/config.json: model_type {hf_config.model_type!r}, expected 'clip' (CLIPModel)")
    pickled = pickled_weights(folder)  # loaded here, so a refused pickle is named in one line (not torch's advice)
    if pickled is None:
        hf_model = CLIPModel.from_pretrained(str(folder), dtype=torch.float32, trust_remote_code=False)
    else:  # transformers takes a state_dict only without a folder name
        hf_model = CLIPModel.from_pretrained(None, config=hf_config, state_dict=pickled, dtype=torch.float32)
    state = {k: v for k, v in hf_model.state_dict().items()}
    del hf_model
    config = hf_config.to_dict()
    if state_override is not None:
        state, config = state_override(state, config)
    preprocess = hf_preprocess(folder, int(config["vision_config"]["image_size"]), where)
    check_hf_tokenizer(folder, int(config["text_config"]["vocab_size"]), where)
    model = dual_encoder_from_hf(state, config, where, preprocess, frozen_positions, name=name or folder.name)
    verify_against_hf(model, state, config, where)
    return model


@torch.no_grad()
def verify_against_hf(model: DualEncoder, hf_state: dict, hf_config: dict, where: str) -> float:
    """transformers' CLIPModel with ``hf_state`` and ours on one probe; the max abs feature difference, or
    ValueError above :data:`PROBE_TOLERANCE` (module docstring)."""
    from transformers import CLIPConfig, CLIPModel

    from .tokenizer import tokenize

    theirs = CLIPModel(CLIPConfig.from_dict(hf_config)).eval()
    result = theirs.load_state_dict({k: v for k, v in hf_state.items() if k not in _IGNORED}, strict=False)
    unexpected = [k for k in result.unexpected_keys if k not in _IGNORED]
    missing = [k for k in result.missing_keys if k not in _IGNORED]
    if missing or unexpected:
        raise ValueError(f"{where}: CLIPModel does not take these weights; missing {missing[:5]}, unexpected "
                         f"{unexpected[:5]}")
    side = model.image_size[0]
    pixels = torch.randn(2, 3, side, model.image_size[1], generator=torch.Generator().manual_seed(0))
    tokens = tokenize(list(PROBE_CAPTIONS), model.context_length)
    out = theirs(pixel_values=pixels, input_ids=tokens)
    was = model.training
    model.eval()
    diff = max(float((out.image_embeds - model.encode_image(pixels)).abs().max()),
               float((out.text_embeds - model.encode_text(tokens)).abs().max()))
    model.train(was)
    if not diff <= PROBE_TOLERANCE:
        raise ValueError(f"{where}: the converted model's features differ from transformers' CLIPModel by {diff:.3g} "
                         f"(> {PROBE_TOLERANCE}) on the probe: this CLIPModel computes something the conversion "
                         "does not reproduce")
    return diff
