"""`hnclip export` / `hnclip push`: each format read back by the other library's own loader.

Every round trip starts from a small random model whose every weight (LayerNorms, biases, both halves of the
positional table) is perturbed, so a swapped or dropped tensor shows in the features; features are compared
in float32 with max abs difference <= 1e-4.

- open_clip: ``add_model_config`` + ``create_model_and_transforms(name, pretrained=path)``; images through
  open_clip's own preprocess, captions through its own tokenizer.
- transformers: ``CLIPModel.from_pretrained`` + ``CLIPProcessor.from_pretrained``; images and captions through
  the processor (default torchvision backend on images at the model's side, so no resampling happens; the
  PIL backend on images that are resized).
- Long-CLIP: its code is not installed here, so the test carries its own transcription of what
  ``longclip.load`` does with a state dict (``build_model``: dimensions from the tensors' shapes, a strict
  ``load_state_dict`` into 248-row tables, ``convert_weights``' float16 rounding) and of its
  ``encode_image`` / ``encode_text``, in float64 functional ops. Token ids come from our tokenizer: Long-CLIP's
  ``tokenize`` is the same CLIP BPE at 248 positions. Images are our store's tensors: its transform is
  open_clip's evaluation transform with OpenAI's mean and std, which the open_clip test checks against ours.
  The project's own Long-CLIP importer must read the file back to the same weights.
- push: against a local stand-in of the Hub's HTTP endpoints (no network), token from HF_TOKEN only.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from hnclip.cli import main
from hnclip.data.image_store import resize_center_crop, to_model_input
from hnclip.export import ExportError, export_model
from hnclip.models import DualEncoder, create_model, load_longclip_checkpoint, load_model, save_model

ATOL = 1e-4
# OpenAI's rules (heads = width // 64, QuickGELU): the architectures Long-CLIP's loader can build
OPENAI_SHAPED = {
    "embed_dim": 32, "quick_gelu": True,
    "vision_cfg": {"image_size": 32, "patch_size": 16, "width": 64, "layers": 2, "head_width": 64},
    "text_cfg": {"context_length": 248, "vocab_size": 49408, "width": 128, "heads": 2, "layers": 2},
}
CAPTIONS = [
    "A red cube to the left of a small blue sphere.",
    "two striped cylinders, one green and one yellow; it's on a grey floor!",
    # past 248 tokens: truncated, EOT kept last
    " ".join(f"object {i} is a dotted purple cone beside a large orange torus" for i in range(40)),
]


@torch.no_grad()
def _perturb(model: DualEncoder, seed: int) -> DualEncoder:
    g = torch.Generator().manual_seed(seed)
    for tensor in list(model.parameters()) + [model.positional_embedding_frozen]:
        tensor.add_(torch.randn(tensor.shape, generator=g) * 0.05)
    model.logit_scale.fill_(3.1)
    return model.eval()


def _micro(tmp_path: Path) -> tuple[DualEncoder, Path]:
    model = _perturb(create_model("micro", context_length=248, frozen_positions=20, seed=0), seed=1)
    return model, save_model(model, tmp_path / "micro" / "model")


def _openai_shaped(tmp_path: Path, fp16_exact: bool = False, name: str = "openai_shaped") -> tuple[DualEncoder, Path]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2)
        model = _perturb(DualEncoder(OPENAI_SHAPED, 248, 20), seed=3)
    if fp16_exact:  # weights Long-CLIP's float16 rounding leaves unchanged
        with torch.no_grad():
            for key, tensor in model.state_dict().items():
                if _rounded_by_longclip(key.removeprefix("clip.")):
                    tensor.copy_(tensor.half().float())
    return model, save_model(model, tmp_path / name / "model")


def _pil_images(sizes, seed=0) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes]


def _our_pixels(model: DualEncoder, images) -> torch.Tensor:
    side = model.image_size[0]
    batch = np.stack([np.asarray(resize_center_crop(im, side), dtype=np.uint8) for im in images])
    return to_model_input(batch, model.image_mean, model.image_std)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max())


# ------------------------------------------------------------------------------------------ open_clip
def test_open_clip_export_loads_in_open_clip_and_encodes_the_same(tmp_path):
    import open_clip

    model, model_dir = _micro(tmp_path)
    out = export_model(model_dir, "open_clip", tmp_path / "oc", name="hnclip-test-micro")
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "hnclip-test-micro.json", "open_clip_config.json",
                                                     "open_clip_model.safetensors"]
    open_clip.add_model_config(out / "hnclip-test-micro.json")
    theirs, _, preprocess = open_clip.create_model_and_transforms(
        "hnclip-test-micro", pretrained=str(out / "open_clip_model.safetensors"),
        image_mean=model.image_mean, image_std=model.image_std)
    theirs.eval()
    tokenizer = open_clip.get_tokenizer("hnclip-test-micro")

    images = _pil_images([(45, 37), (32, 32), (20, 64)])
    their_pixels = torch.stack([preprocess(im) for im in images])
    our_pixels = _our_pixels(model, images)
    assert _max_diff(their_pixels, our_pixels) <= 1e-6  # same geometry, same normalisation
    their_tokens = tokenizer(CAPTIONS)
    assert their_tokens.shape == (3, 248) and torch.equal(their_tokens, model.tokenize(CAPTIONS))
    with torch.no_grad():
        assert _max_diff(theirs.encode_image(their_pixels, normalize=True), model.encode_image(our_pixels)) <= ATOL
        assert _max_diff(theirs.encode_text(their_tokens, normalize=True), model.encode_text(their_tokens)) <= ATOL
        assert float(theirs.logit_scale) == pytest.approx(float(model.logit_scale))

    # open_clip_config.json: the local-dir: loader finds the weights and the normalisation by itself
    by_dir, _, _ = open_clip.create_model_and_transforms(f"local-dir:{out}")
    assert by_dir.visual.preprocess_cfg["mean"] == list(model.image_mean)
    with torch.no_grad():
        assert _max_diff(by_dir.eval().encode_text(their_tokens, normalize=True), model.encode_text(their_tokens)) <= ATOL


def test_open_clip_name_must_not_replace_a_builtin(tmp_path):
    _, model_dir = _micro(tmp_path)
    with pytest.raises(ExportError, match="ViT-B-32.*built-in"):
        export_model(model_dir, "open_clip", tmp_path / "oc", name="ViT-B-32")
    assert not (tmp_path / "oc").exists()


# --------------------------------------------------------------------------------------- transformers
@pytest.mark.parametrize("shape", ["micro", "openai_shaped"])  # erf GELU and QuickGELU
def test_transformers_export_loads_in_transformers_and_encodes_the_same(tmp_path, shape):
    from transformers import CLIPModel, CLIPProcessor

    model, model_dir = _micro(tmp_path) if shape == "micro" else _openai_shaped(tmp_path)
    out = export_model(model_dir, "transformers", tmp_path / "hf")
    theirs = CLIPModel.from_pretrained(out).eval()
    processor = CLIPProcessor.from_pretrained(out)
    assert theirs.dtype == torch.float32
    assert theirs.config.text_config.max_position_embeddings == 248
    assert processor.tokenizer.model_max_length == 248
    side = model.image_size[0]

    def check(processor, images):
        inputs = processor(text=CAPTIONS, images=images, padding="max_length", max_length=248, truncation=True,
                           return_tensors="pt")
        ours_tokens = model.tokenize(CAPTIONS)
        # the same ids up to EOT (transformers pads with EOT, we pad with 0)
        for theirs_row, ours_row in zip(inputs["input_ids"], ours_tokens, strict=True):
            n = int(ours_row.argmax()) + 1
            assert theirs_row[:n].tolist() == ours_row[:n].tolist()
        pixels = _our_pixels(model, images)
        assert _max_diff(inputs["pixel_values"], pixels) <= 1e-5
        with torch.no_grad():
            outputs = theirs(**inputs)
            assert _max_diff(outputs.image_embeds, model.encode_image(pixels)) <= ATOL
            assert _max_diff(outputs.text_embeds, model.encode_text(ours_tokens)) <= ATOL
            assert float(theirs.logit_scale) == pytest.approx(float(model.logit_scale))

    check(processor, _pil_images([(side, side), (side, side)], seed=1))  # torchvision backend, no resize
    check(CLIPProcessor.from_pretrained(out, backend="pil"), _pil_images([(45, 37), (20, 64)], seed=2))


# image sizes whose crop margin after the resize is odd: 11 (43 x 32, as is and from 86 x 64), 3, 7 (3 mod 4:
# transformers' floor(m / 2) and torchvision's round(m / 2) differ) and 5, 9 (1 mod 4: they agree)
ODD_MARGINS = [(43, 32), (86, 64), (35, 32), (32, 39), (37, 32), (32, 41), (30, 41)]


def test_transformers_export_reaches_torchvision_pixels_without_remote_code(tmp_path):
    from torchvision import transforms
    from transformers import CLIPProcessor

    model, model_dir = _micro(tmp_path)
    out = export_model(model_dir, "transformers", tmp_path / "hf")
    assert not [p for p in out.iterdir() if p.suffix == ".py"]  # no code to trust
    assert "auto_map" not in (out / "processor_config.json").read_text()
    side = model.image_size[0]
    images = _pil_images(ODD_MARGINS, seed=3)
    # the independent reference: open_clip's evaluation geometry, torchvision's Resize + CenterCrop
    geometry = transforms.Compose([transforms.Resize(side, interpolation=transforms.InterpolationMode.BICUBIC),
                                   transforms.CenterCrop(side)])
    reference = to_model_input(np.stack([np.asarray(geometry(im), dtype=np.uint8) for im in images]),
                               model.image_mean, model.image_std)
    assert _max_diff(_our_pixels(model, images), reference) == 0.0
    # the card's path: torchvision's geometry first, then the stock processor without its own resize and crop
    processor = CLIPProcessor.from_pretrained(out, backend="pil")
    assert type(processor.image_processor).__name__ in ("CLIPImageProcessor", "CLIPImageProcessorPil")
    pixels = processor(images=[geometry(im) for im in images], do_resize=False, do_center_crop=False,
                       return_tensors="pt")["pixel_values"]
    assert _max_diff(pixels, reference) <= 1e-6
    theirs = __import__("transformers").CLIPModel.from_pretrained(out).eval()
    with torch.no_grad():
        features = F.normalize(theirs.get_image_features(pixel_values=pixels).pooler_output, dim=-1)
        assert _max_diff(features, model.encode_image(reference)) <= ATOL
    # the stock processor's own crop puts a margin of 3 mod 4 one pixel off: why the card shows the path above
    stock = processor(images=images[:1], return_tensors="pt")["pixel_values"]
    assert _max_diff(stock, reference[:1]) > 0.1
    card = (out / "README.md").read_text() if (out / "README.md").is_file() else ""
    assert "trust_remote_code" not in card


def _with_interpolation(tmp_path: Path, interpolation: str) -> tuple[DualEncoder, Path]:
    """The micro model with ``preprocess_cfg.interpolation`` set (as a converter records a model's own)."""
    config = create_model("micro").spec["config"]
    config["preprocess_cfg"] = {"interpolation": interpolation}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(4)
        model = _perturb(DualEncoder(config, 248, 20), seed=5)
    assert model.interpolation == interpolation
    return model, save_model(model, tmp_path / interpolation / "model")


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_exports_resize_with_the_models_own_interpolation(tmp_path, interpolation):
    import open_clip
    from torchvision import transforms
    from transformers import CLIPModel, CLIPProcessor

    model, model_dir = _with_interpolation(tmp_path, interpolation)
    side = model.image_size[0]
    images = _pil_images(ODD_MARGINS, seed=6)
    # the independent reference: torchvision's Resize + CenterCrop with the filter the model's stores use
    mode = {"bilinear": transforms.InterpolationMode.BILINEAR, "bicubic": transforms.InterpolationMode.BICUBIC}
    geometry = transforms.Compose([transforms.Resize(side, interpolation=mode[interpolation]),
                                   transforms.CenterCrop(side)])
    reference = to_model_input(np.stack([np.asarray(geometry(im), dtype=np.uint8) for im in images]),
                               model.image_mean, model.image_std)
    ours = np.stack([np.asarray(resize_center_crop(im, side, model.interpolation), dtype=np.uint8) for im in images])
    assert _max_diff(to_model_input(ours, model.image_mean, model.image_std), reference) == 0.0
    with torch.no_grad():
        expected = model.encode_image(reference)

    # open_clip: local-dir: reads the interpolation from open_clip_config.json
    out = export_model(model_dir, "open_clip", tmp_path / "oc", name=f"hnclip-test-{interpolation}")
    assert json.loads((out / "open_clip_config.json").read_text())["preprocess_cfg"]["interpolation"] == interpolation
    theirs, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{out}")
    pixels = torch.stack([preprocess(im) for im in images])
    assert _max_diff(pixels, reference) <= 1e-6
    with torch.no_grad():
        assert _max_diff(model.encode_image(pixels), expected) <= 1e-6
        assert _max_diff(theirs.eval().encode_image(pixels, normalize=True), expected) <= ATOL
    assert f'image_interpolation="{interpolation}"' in (out / "README.md").read_text()

    # transformers: the card's recipe (its torchvision geometry, then the processor) and the processor's filter
    out = export_model(model_dir, "transformers", tmp_path / "hf")
    card = (out / "README.md").read_text()
    named = re.findall(r"transforms\.InterpolationMode\.(\w+)", card)
    assert named == [interpolation.upper()]
    card_geometry = transforms.Compose([transforms.Resize(side, getattr(transforms.InterpolationMode, named[0])),
                                        transforms.CenterCrop(side)])
    processor = CLIPProcessor.from_pretrained(out, backend="pil")
    assert processor.image_processor.resample == {"bilinear": 2, "bicubic": 3}[interpolation]  # PIL's codes
    pixels = processor(images=[card_geometry(im) for im in images], do_resize=False, do_center_crop=False,
                       return_tensors="pt")["pixel_values"]
    assert _max_diff(pixels, reference) <= 1e-6
    with torch.no_grad():
        assert _max_diff(model.encode_image(pixels), expected) <= 1e-6
        features = F.normalize(CLIPModel.from_pretrained(out).eval().get_image_features(pixel_values=pixels)
                               .pooler_output, dim=-1)
        assert _max_diff(features, expected) <= ATOL


def test_transformers_refuses_layer_scale_naming_the_key(tmp_path):
    config = json.loads(json.dumps(OPENAI_SHAPED))
    config["vision_cfg"]["ls_init_value"] = 0.1
    model_dir = save_model(DualEncoder(config, 248, 20), tmp_path / "ls" / "model")
    with pytest.raises(ExportError, match=r"model\.json.*vision_cfg\.ls_init_value=0\.1"):
        export_model(model_dir, "transformers", tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


# ------------------------------------------------------------------------------------------- Long-CLIP
def _rounded_by_longclip(key: str) -> bool:
    """Long-CLIP's convert_weights: Conv/Linear weights and biases, attention in_proj, both projections."""
    return (key in ("text_projection", "visual.proj", "visual.conv1.weight") or ".attn.in_proj_" in key
            or ".attn.out_proj." in key or ".mlp.c_fc." in key or ".mlp.c_proj." in key)


def _longclip_build_by_shapes(state: dict) -> dict:
    """The dimensions model_longclip.build_model reads from a ViT state dict (load_from_clip=False)."""
    assert "visual.proj" in state, "Long-CLIP builds a ViT only when visual.proj is present"
    conv = state["visual.conv1.weight"]
    width = state["ln_final.weight"].shape[0]
    return {
        "embed_dim": state["text_projection"].shape[1],
        "vision_width": conv.shape[0],
        "vision_layers": sum(1 for k in state if k.startswith("visual.") and k.endswith(".attn.in_proj_weight")),
        "patch": conv.shape[-1],
        "grid": round((state["visual.positional_embedding"].shape[0] - 1) ** 0.5),
        "vocab": state["token_embedding.weight"].shape[0],
        "text_width": width,
        "text_heads": width // 64,
        "text_layers": len({k.split(".")[2] for k in state if k.startswith("transformer.resblocks")}),
    }


def _longclip_parameter_shapes(d: dict) -> dict:
    """Every parameter of Long-CLIP's CLIP(..., load_from_clip=False) of dimensions ``d``: its
    load_state_dict is strict, so the file must have exactly these keys and shapes."""
    def block(prefix, w):
        return {f"{prefix}.ln_1.weight": (w,), f"{prefix}.ln_1.bias": (w,),
                f"{prefix}.attn.in_proj_weight": (3 * w, w), f"{prefix}.attn.in_proj_bias": (3 * w,),
                f"{prefix}.attn.out_proj.weight": (w, w), f"{prefix}.attn.out_proj.bias": (w,),
                f"{prefix}.ln_2.weight": (w,), f"{prefix}.ln_2.bias": (w,),
                f"{prefix}.mlp.c_fc.weight": (4 * w, w), f"{prefix}.mlp.c_fc.bias": (4 * w,),
                f"{prefix}.mlp.c_proj.weight": (w, 4 * w), f"{prefix}.mlp.c_proj.bias": (w,)}

    vw, tw, e = d["vision_width"], d["text_width"], d["embed_dim"]
    shapes = {
        "positional_embedding": (248, tw), "positional_embedding_res": (248, tw), "text_projection": (tw, e),
        "logit_scale": (), "token_embedding.weight": (d["vocab"], tw), "ln_final.weight": (tw,),
        "ln_final.bias": (tw,), "visual.class_embedding": (vw,),
        "visual.positional_embedding": (d["grid"] ** 2 + 1, vw), "visual.proj": (vw, e),
        "visual.conv1.weight": (vw, 3, d["patch"], d["patch"]), "visual.ln_pre.weight": (vw,),
        "visual.ln_pre.bias": (vw,), "visual.ln_post.weight": (vw,), "visual.ln_post.bias": (vw,),
    }
    for i in range(d["vision_layers"]):
        shapes.update(block(f"visual.transformer.resblocks.{i}", vw))
    for i in range(d["text_layers"]):
        shapes.update(block(f"transformer.resblocks.{i}", tw))
    return shapes


def _block_forward(sd, prefix, x, heads, mask=None):
    """Long-CLIP's ResidualAttentionBlock (pre-norm, nn.MultiheadAttention, QuickGELU MLP), [B, L, W]."""
    w = x.shape[-1]
    h = F.layer_norm(x, (w,), sd[prefix + "ln_1.weight"], sd[prefix + "ln_1.bias"], eps=1e-5)
    q, k, v = (h @ sd[prefix + "attn.in_proj_weight"].T + sd[prefix + "attn.in_proj_bias"]).split(w, dim=-1)
    d = w // heads
    outs = []
    for head in range(heads):
        cols = slice(head * d, (head + 1) * d)
        scores = q[..., cols] @ k[..., cols].transpose(1, 2) / d ** 0.5
        if mask is not None:
            scores = scores + mask
        outs.append(scores.softmax(dim=-1) @ v[..., cols])
    x = x + torch.cat(outs, -1) @ sd[prefix + "attn.out_proj.weight"].T + sd[prefix + "attn.out_proj.bias"]
    h = F.layer_norm(x, (w,), sd[prefix + "ln_2.weight"], sd[prefix + "ln_2.bias"], eps=1e-5)
    h = h @ sd[prefix + "mlp.c_fc.weight"].T + sd[prefix + "mlp.c_fc.bias"]
    h = h * torch.sigmoid(1.702 * h)
    return x + h @ sd[prefix + "mlp.c_proj.weight"].T + sd[prefix + "mlp.c_proj.bias"]


def _longclip_features(state: dict, pixels: torch.Tensor, tokens: torch.Tensor, fp16_rounding: bool = True):
    """longclip.load(file, device="cpu") then encode_image / encode_text, normalised (float64 reference)."""
    d = _longclip_build_by_shapes(state)
    sd = {}
    for key, value in state.items():
        value = value.half().float() if fp16_rounding and _rounded_by_longclip(key) else value.float()
        sd[key] = value.double()
    vw, tw = d["vision_width"], d["text_width"]

    x = F.conv2d(pixels.double(), sd["visual.conv1.weight"], stride=d["patch"])
    x = x.reshape(x.shape[0], vw, -1).permute(0, 2, 1)
    x = torch.cat([sd["visual.class_embedding"].expand(x.shape[0], 1, vw), x], dim=1)
    x = F.layer_norm(x + sd["visual.positional_embedding"], (vw,), sd["visual.ln_pre.weight"],
                     sd["visual.ln_pre.bias"], eps=1e-5)
    for i in range(d["vision_layers"]):
        x = _block_forward(sd, f"visual.transformer.resblocks.{i}.", x, vw // 64)
    image = F.layer_norm(x[:, 0], (vw,), sd["visual.ln_post.weight"], sd["visual.ln_post.bias"], eps=1e-5)
    image = image @ sd["visual.proj"]

    assert tokens.shape[1] == 248
    mask1 = torch.zeros(248, 1, dtype=torch.float64)
    mask1[:20] = 1
    x = sd["token_embedding.weight"][tokens]
    x = x + sd["positional_embedding"] * mask1 + sd["positional_embedding_res"] * (1 - mask1)
    causal = torch.full((248, 248), float("-inf"), dtype=torch.float64).triu(1)
    for i in range(d["text_layers"]):
        x = _block_forward(sd, f"transformer.resblocks.{i}.", x, d["text_heads"], causal)
    x = F.layer_norm(x, (tw,), sd["ln_final.weight"], sd["ln_final.bias"], eps=1e-5)
    text = x[torch.arange(x.shape[0]), tokens.argmax(dim=-1)] @ sd["text_projection"]
    return F.normalize(image, dim=-1), F.normalize(text, dim=-1)


@pytest.mark.parametrize("fp16_exact", [True, False])
def test_longclip_export_is_what_longclip_load_reads_and_encodes_the_same(tmp_path, fp16_exact):
    model, model_dir = _openai_shaped(tmp_path, fp16_exact=fp16_exact)
    out = export_model(model_dir, "longclip", tmp_path / "lc")
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "longclip.pt"]
    state = torch.load(out / "longclip.pt", map_location="cpu", weights_only=True)
    # train.py's torch.save(model.state_dict()): float32 tensors under the module's names, nothing else
    assert isinstance(state, dict) and all(isinstance(v, torch.Tensor) for v in state.values())
    assert {v.dtype for v in state.values()} == {torch.float32}
    expected = _longclip_parameter_shapes(_longclip_build_by_shapes(state))
    assert {k: tuple(v.shape) for k, v in state.items()} == expected

    images = _pil_images([(45, 37), (32, 32)], seed=4)
    pixels = _our_pixels(model, images)
    tokens = model.tokenize(CAPTIONS)
    with torch.no_grad():
        ours_image, ours_text = model.encode_image(pixels), model.encode_text(tokens)
    # what Long-CLIP computes from these weights in exact arithmetic: our features
    exact_image, exact_text = _longclip_features(state, pixels, tokens, fp16_rounding=False)
    assert _max_diff(exact_image, ours_image) <= ATOL and _max_diff(exact_text, ours_text) <= ATOL
    # what longclip.load then computes, after rounding Linear/Conv weights through float16
    image, text = _longclip_features(state, pixels, tokens, fp16_rounding=True)
    if fp16_exact:
        assert _max_diff(image, ours_image) <= ATOL and _max_diff(text, ours_text) <= ATOL
    else:  # the rounding alone: a relative 2^-11 per weight
        assert _max_diff(image, ours_image) <= 2e-2 and _max_diff(text, ours_text) <= 2e-2

    # the project's own importer reads it back to the same weights, the same rows frozen
    back = load_longclip_checkpoint(out / "longclip.pt")
    assert back.frozen_positions == 20
    for key, value in model.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key


def test_longclip_refuses_what_its_loader_cannot_build_naming_the_keys(tmp_path):
    _, micro_dir = _micro(tmp_path)
    with pytest.raises(ExportError) as info:
        export_model(micro_dir, "longclip", tmp_path / "lc")
    message = str(info.value)
    assert str(micro_dir / "model.json") in message
    for key in ("quick_gelu=false", "vision_cfg.head_width=16", "text_cfg.heads=2"):
        assert key in message
    short = save_model(DualEncoder(OPENAI_SHAPED, 77, 0), tmp_path / "short" / "model")
    with pytest.raises(ExportError, match="text_cfg.context_length=77"):
        export_model(short, "longclip", tmp_path / "lc")
    config = dict(OPENAI_SHAPED, preprocess_cfg={"interpolation": "bilinear"})
    bilinear = save_model(DualEncoder(config, 248, 20), tmp_path / "bilinear" / "model")
    with pytest.raises(ExportError, match="preprocess_cfg.interpolation='bilinear'"):
        export_model(bilinear, "longclip", tmp_path / "lc")
    assert not (tmp_path / "lc").exists()


def test_export_refuses_a_non_empty_folder(tmp_path):
    _, model_dir = _openai_shaped(tmp_path)
    (tmp_path / "lc").mkdir()
    (tmp_path / "lc" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not empty"):
        export_model(model_dir, "longclip", tmp_path / "lc")
    assert main(["export", "--model", str(model_dir), "--format", "longclip", "--out", str(tmp_path / "lc2")]) == 0
    assert (tmp_path / "lc2" / "longclip.pt").is_file()


@pytest.mark.parametrize("damage", ["truncated", "not safetensors"])
def test_export_of_a_damaged_weights_file_names_the_file(tmp_path, damage):
    """safetensors' own error (``SafetensorError: ... incomplete metadata``) names no file; the export does."""
    _, model_dir = _micro(tmp_path)
    weights = model_dir / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:100] if damage == "truncated" else b"<html>not found</html>" + data[:64])
    with pytest.raises(SystemExit) as info:
        main(["export", "--model", str(model_dir), "--format", "open_clip", "--out", str(tmp_path / "oc")])
    assert str(weights) in str(info.value.code) and "hnclip export" in str(info.value.code)
    assert not (tmp_path / "oc").exists()


# ------------------------------------------------------------------------------------------ model card
RUN = {"train_set": "synthetic", "method": "hnclip", "gamma": "0.5", "fraction": "1", "seed": 0}


def _record(run: dict, n_images: int = 400) -> dict:
    i2t = [0 if i % 2 == 0 else 20 for i in range(n_images)]  # R@1 = R@5 = R@10 = 50 %
    t2i = [0] * n_images  # every caption finds its image first: 100 %
    metrics = {f"i2t_r{k}": 100.0 * np.mean(np.asarray(i2t) < k) for k in (1, 5, 10)}
    metrics.update({f"t2i_r{k}": 100.0 for k in (1, 5, 10)})
    return {"run": run, "eval_benchmark": "synthetic", "split": "test", "n_images": n_images, "n_texts": n_images,
            "ks": [1, 5, 10], "metrics": metrics,
            "ranks": {"i2t": i2t, "t2i": t2i, "text_image": list(range(n_images))}}


def _run_folder(root: Path, model: DualEncoder | None = None) -> tuple[Path, Path]:
    run_dir = root / "results" / "runs" / "synthetic" / "hnclip" / "g0.5" / "f1" / "s0"
    model = model if model is not None else _openai_shaped(root, name="scratch")[0]
    save_model(model, run_dir / "model")
    summary = {"config": {"framework": "longclip", "lr": 1e-5, "gamma": 0.5}, "config_hash": "c0ffee" * 10,
               "seed": 0, "steps": 120, "epochs": 2, "wall_time_s": 1.0, "samples_per_s": 10.0, "peak_memory_mb": 1.0,
               "device": "cpu", "checkpoint_sha256": "ab" * 32, "git_commit": "1234567890abcdef" * 2 + "12345678",
               "data_fingerprint": "fe" * 32, "framework": "longclip",
               "recipe": {"lr": 1e-5, "warmup_steps": 200, "schedule": "cosine", "effective_batch": 128},
               # what hnclip train records under "run": its inputs (the run's fields are its folder's path)
               "run": {"init_model_dir": "results/backbone/model", "train_manifest": "results/data/x/train.csv"}}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    evals = root / "results" / "evals" / "synthetic" / "hnclip" / "g0.5" / "f1" / "s0"
    evals.mkdir(parents=True)
    (evals / "synthetic.json").write_text(json.dumps(_record(RUN)))
    return run_dir, evals / "synthetic.json"


def test_model_card_has_results_with_intervals_recipe_and_provenance(tmp_path):
    from huggingface_hub import ModelCard

    run_dir, _ = _run_folder(tmp_path)
    out = tmp_path / "exports" / "open_clip"
    # no --run / --evals: the summary beside the model, the run's records under results/evals/
    assert main(["export", "--model", str(run_dir / "model"), "--format", "open_clip", "--out", str(out),
                 "--resamples", "500"]) == 0
    card = ModelCard.load(out / "README.md")
    assert card.data.library_name == "open_clip"
    text = card.text
    for needle in ("c0ffee" * 10, "fe" * 32, "1234567890abcdef" * 2 + "12345678", '"warmup_steps": 200',
                   "hnclip-synthetic-hnclip-g0.5-f1-s0.json", "500 resamples", "# hnclip export: synthetic/hnclip",
                   "results/backbone/model"):
        assert needle in text, needle
    rows = re.findall(r"\| synthetic \| test \| (image -> text|text -> image) \| (\d+) \| ([\d.]+) \| "
                      r"\[([\d.]+), ([\d.]+)\] \| 400 \| 400 \|", text)
    assert len(rows) == 6
    for direction, _, value, low, high in rows:
        value, low, high = float(value), float(low), float(high)
        if direction == "text -> image":
            assert value == low == high == 100.0  # no resample can miss
        else:
            # 50 % of 400 images: binomial standard error 2.5 points, a 95 % interval ~9.8 wide around 50
            assert value == 50.0 and low < 50.0 < high and 7.0 <= high - low <= 13.0
    # the card lists each exported file with its sha256
    import hashlib

    digest = hashlib.sha256((out / "open_clip_model.safetensors").read_bytes()).hexdigest()
    assert f"| open_clip_model.safetensors | `{digest}` |" in text


def _card_section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0].strip()


def test_model_card_states_scale_true_context_length_data_limitations_and_licence(tmp_path):
    import tomllib

    from huggingface_hub import ModelCard

    # micro's base config has 77 text positions; this model's table was stretched to 248
    model = _perturb(create_model("micro", context_length=248, frozen_positions=20, seed=0), seed=1)
    run_dir, _ = _run_folder(tmp_path, model)
    out = tmp_path / "exports" / "transformers"
    assert main(["export", "--model", str(run_dir / "model"), "--format", "transformers", "--out", str(out),
                 "--resamples", "200", "--scale", "toy"]) == 0
    card = ModelCard.load(out / "README.md")
    text = card.text
    # the scale heads the card and tags it
    assert text.lstrip().startswith("# hnclip export: synthetic/hnclip (transformers), toy-scale run\n\n**Toy scale.**")
    assert "toy-scale" in card.data.tags and card.data.datasets == ["synthetic"]
    # a stretched (248-position) model is Long-CLIP-style, and tagged so
    assert "long-clip" in card.data.tags and "Long-CLIP-style" in text
    # the true context length, read back from the exported weights' position table
    from safetensors.torch import load_file as load_hf

    exported = load_hf(str(out / "model.safetensors"))["text_model.embeddings.position_embedding.weight"]
    architecture = json.loads(_card_section(text, "Architecture").split("```json\n", 1)[1].split("```", 1)[0])
    assert architecture["config"]["text_cfg"]["context_length"] == exported.shape[0] == 248
    assert architecture["config"]["text_cfg"]["base_context_length"] == 77
    assert "Text positions: 248 (the base architecture's 77, stretched)." in text
    assert '"context_length": 77' not in text
    # training data, limitations (with the transformers crop note), licence: MIT as the repository's
    assert "`synthetic`" in _card_section(text, "Training data")
    limitations = _card_section(text, "Limitations")
    assert "Synthetic scenes only" in limitations and "resize and crop with torchvision first" in limitations
    assert "trust_remote_code" not in text
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    licence_file = (Path(__file__).resolve().parents[1] / "LICENSE").read_text()
    assert pyproject["license"] == "MIT" and licence_file.startswith("MIT License\n")
    assert card.data.license == "mit" and _card_section(text, "Licence").startswith("MIT, as hnclip-repro")

    # another scale: shown as the config names it, the licence left to the data's and the backbone's terms
    paper = tmp_path / "exports" / "paper"
    export_model(run_dir / "model", "open_clip", paper, name="hnclip-card-paper", scale="paper")
    paper_card = ModelCard.load(paper / "README.md")
    assert "**Paper scale.**" in paper_card.text and paper_card.data.license == "other"
    assert "results/backbone/model" in _card_section(paper_card.text, "Licence")
    # none given (by hand): the card says so
    bare = tmp_path / "exports" / "bare"
    export_model(run_dir / "model", "open_clip", bare, name="hnclip-card-bare")
    assert "**Scale not stated**" in ModelCard.load(bare / "README.md").text


def test_model_card_of_an_own_data_plain_fine_tune_names_its_method_and_caption_column(tmp_path):
    """A plain fine-tune (CLIP's loss, 77 positions) on the user's table of captions is neither called
    Long-CLIP-style dense-caption retrieval nor tagged long-clip, and the card names the column of the user's
    files the captions came from (the table adapter's ``caption_key``, ``title`` by default or as set), not the
    prepared manifest's ``caption``."""
    from huggingface_hub import ModelCard

    for caption_key, expected in ((None, "title"), ("alt_text", "alt_text")):
        root = tmp_path / (caption_key or "default")
        data = root / "results" / "data" / "my_captions"
        data.mkdir(parents=True)
        settings = {"files": {"train": "train.csv"}, **({"caption_key": caption_key} if caption_key else {})}
        (data / "source.json").write_text(json.dumps({"benchmark": "my_captions", "adapter": "table",
                                                     "caption_column": None, "adapter_settings": settings}))
        run_dir = root / "results" / "runs" / "my_captions" / "longclip" / "g0" / "f1" / "s0"
        save_model(_perturb(create_model("micro", seed=0), seed=2), run_dir / "model")
        summary = {"config": {"framework": "longclip", "gamma": 0.0, "token_weight": 0.0, "caption_column": "caption",
                              "longclip": {"short_weight": 0.0}},
                   "framework": "longclip", "n_train": 40, "run": {"train_manifest": str(data / "train.csv")},
                   "config_hash": "c0ffee" * 10, "seed": 0, "steps": 10, "wall_time_s": 1.0, "samples_per_s": 10.0,
                   "peak_memory_mb": 1.0, "device": "cpu", "checkpoint_sha256": "ab" * 32, "git_commit": "12" * 20}
        (run_dir / "summary.json").write_text(json.dumps(summary))
        out = root / "exports" / "open_clip"
        export_model(run_dir / "model", "open_clip", out, name="hnclip-own", scale="own")
        card = ModelCard.load(out / "README.md")
        assert "long-clip" not in card.data.tags and "clip" in card.data.tags
        text = card.text
        for wrong in ("Long-CLIP-style", "dense-caption", "dense captions", "column `caption`"):
            assert wrong not in text, wrong
        assert "plain contrastive fine-tuning" in text and "on your captions (`my_captions`)" in text
        assert f"captions from column `{expected}`" in _card_section(text, "Training data")
        assert "on the captions of `my_captions`" in _card_section(text, "Limitations")


def test_model_card_refuses_a_record_of_another_run(tmp_path):
    run_dir, _ = _run_folder(tmp_path)
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_record(dict(RUN, method="longclip"))))
    with pytest.raises(ValueError, match=r"other\.json.*not the exported run"):
        export_model(run_dir / "model", "longclip", tmp_path / "lc", eval_paths=[other])
    assert not (tmp_path / "lc").exists()


# ---------------------------------------------------------------------------------------------- push
class _HubStandIn(BaseHTTPRequestHandler):
    """The endpoints huggingface_hub's create_repo and upload_folder call (huggingface_hub 2.4: hf_api.py,
    _commit_api.py): every file is declared "regular", so it travels base64 in the commit's NDJSON."""

    repos: dict
    requests: list
    fail_commit = False

    def log_message(self, *args):  # keep the server quiet
        pass

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.requests.append(("GET", self.path, self.headers.get("Authorization")))
        self._reply(404, {"error": "not here"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.requests.append(("POST", self.path, self.headers.get("Authorization")))
        host = f"http://{self.headers['Host']}"
        if self.path == "/api/repos/create":
            payload = json.loads(body)
            repo = f"{payload['organization']}/{payload['name']}"
            self.repos.setdefault(repo, {})
            return self._reply(200, {"url": f"{host}/{repo}", "name": repo})
        if self.path == "/api/validate-yaml":
            return self._reply(200, {"errors": [], "warnings": []})
        match = re.fullmatch(r"/api/models/([^/]+/[^/]+)/(preupload|commit)/([^/?]+)", self.path)
        if not match or match.group(1) not in self.repos:
            return self._reply(404, {"error": f"no route {self.path}"})
        repo, kind = match.group(1), match.group(2)
        if kind == "preupload":
            files = json.loads(body)["files"]
            return self._reply(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                                                "oid": None} for f in files]})
        if self.fail_commit:
            return self._reply(422, {"error": "commit refused by the stand-in"})
        for line in body.decode().splitlines():
            item = json.loads(line)
            if item["key"] == "file":
                assert item["value"]["encoding"] == "base64"
                self.repos[repo][item["value"]["path"]] = base64.b64decode(item["value"]["content"])
        return self._reply(200, {"commitUrl": f"{host}/{repo}/commit/{'a' * 40}", "commitOid": "a" * 40,
                                 "success": True})


@pytest.fixture
def hub(monkeypatch):
    handler = type("Handler", (_HubStandIn,), {"repos": {}, "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_push_uploads_the_folder_with_the_environment_token_and_never_shows_it(tmp_path, hub, monkeypatch,
                                                                                 caplog, capsys):
    handler, endpoint = hub
    _, model_dir = _openai_shaped(tmp_path)
    out = export_model(model_dir, "longclip", tmp_path / "lc")
    token = "hf_standinSECRET0123456789abcdefXYZ"
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # no stored token to fall back on
    caplog.set_level(logging.DEBUG)
    assert main(["-v", "push", "--repo", "someone/hnclip-test", "--folder", str(out), "--endpoint", endpoint]) == 0

    uploaded = handler.repos["someone/hnclip-test"]
    assert sorted(uploaded) == ["README.md", "longclip.pt"]
    for name, data in uploaded.items():
        assert data == (out / name).read_bytes(), name
    routes = [path.split("?")[0] for _, path, _ in handler.requests]
    assert routes == ["/api/repos/create", "/api/validate-yaml", "/api/models/someone/hnclip-test/preupload/main",
                      "/api/models/someone/hnclip-test/commit/main"]
    assert {auth for _, _, auth in handler.requests} == {f"Bearer {token}"}
    captured = capsys.readouterr()
    assert "pushed 2 files" in caplog.text
    for text in (caplog.text, captured.out, captured.err):
        assert token not in text

    # a refused commit fails naming the repository, the token masked and absent
    handler.fail_commit = True
    with pytest.raises(SystemExit) as info:
        main(["push", "--repo", "someone/hnclip-test", "--folder", str(out), "--endpoint", endpoint])
    assert "someone/hnclip-test" in str(info.value) and token not in str(info.value)
    assert token not in caplog.text


def test_push_needs_hf_token_from_the_environment(tmp_path, hub, monkeypatch):
    handler, endpoint = hub
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "README.md").write_text("x")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    with pytest.raises(SystemExit, match="HF_TOKEN"):
        main(["push", "--repo", "someone/x", "--folder", str(tmp_path / "folder"), "--endpoint", endpoint])
    assert handler.requests == []


def test_exported_models_load_with_the_project_loader_unchanged(tmp_path):
    # export never touches the model folder it reads
    model, model_dir = _micro(tmp_path)
    before = {p.name: p.read_bytes() for p in model_dir.iterdir()}
    export_model(model_dir, "open_clip", tmp_path / "oc", name="hnclip-test-unchanged")
    assert {p.name: p.read_bytes() for p in model_dir.iterdir()} == before
    again = load_model(model_dir)
    for key, value in model.state_dict().items():
        assert torch.equal(again.state_dict()[key], value)
