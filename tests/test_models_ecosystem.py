"""Backbones from the ecosystem (`backbone.source: open_clip | transformers`), offline.

Each model is small, random and perturbed (every LayerNorm and bias moved off its init), made by the library
itself and saved to disk in that library's own format; nothing is downloaded:

- open_clip: a small architecture registered for the test, its weights in a Hugging Face cache written in
  tmp_path and named by a pretrained tag, so open_clip's own tag resolution and download function find them
  (and by ``hf-hub:`` / ``local-dir:``, open_clip's two other routes);
- transformers: ``CLIPModel.save_pretrained`` with its ``CLIPImageProcessor`` and CLIP tokenizer, as a folder and
  as a Hub repository in the cache.

The reference is the library's own model on the same inputs: open_clip's ``encode_image``/``encode_text`` after
its own preprocess and tokenizer, transformers' ``CLIPModel`` outputs after its own processor; features agree
within 1e-5, token ids exactly (up to EOT: transformers pads with EOT, we pad with 0), pixels within 1e-5.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from hnclip.data.checksum_lock import ChecksumMismatchError
from hnclip.data.image_store import resize_center_crop, to_model_input
from hnclip.models import load_model
from hnclip.models.convert import convert_source
from hnclip.rehearsal.hub_cache import populate_hub_cache

ATOL = 1e-5
NAME = "hnclip-test-vit"  # registered with open_clip for these tests only
ARCH = {"embed_dim": 32, "quick_gelu": True,
        "vision_cfg": {"image_size": 32, "patch_size": 8, "width": 64, "layers": 2, "head_width": 32},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2}}
REPO = "hnclip-test/tiny-clip"
FIRST, SECOND = "a" * 40, "b" * 40
CAPTIONS = ["A red cube to the left of a small blue sphere.",
            "two striped cylinders, one green and one yellow; it's on a grey floor",
            " ".join(f"object {i} is a dotted purple cone beside a large orange torus" for i in range(12))]
MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)


def _perturb(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in module.parameters():
            tensor.add_(torch.randn(tensor.shape, generator=g) * 0.05)
    return module.eval()


def _images(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes]


def _our_pixels(model, images) -> torch.Tensor:
    batch = np.stack([np.asarray(resize_center_crop(im, model.image_size[0], model.interpolation), dtype=np.uint8)
                      for im in images])
    return to_model_input(batch, model.image_mean, model.image_std)


def _diff(a, b) -> float:
    return float((a.float() - b.float()).abs().max())


def _safetensors_bytes(module) -> bytes:
    from safetensors.torch import save

    return save({k: v.contiguous() for k, v in module.state_dict().items()})


# ------------------------------------------------------------------------------------------------ open_clip
@pytest.fixture
def open_clip_tag(hub_cache, monkeypatch):
    """NAME with tag ``testtag``: an open_clip pretrained config pointing at REPO, whose weights the cache holds
    at two commits (main: SECOND); returns the two random models and their weights' bytes."""
    import open_clip
    from open_clip.pretrained import _PRETRAINED

    monkeypatch.setitem(open_clip.factory._MODEL_CONFIGS, NAME, json.loads(json.dumps(ARCH)))
    monkeypatch.setitem(_PRETRAINED, NAME, {"testtag": {
        "url": "", "hf_hub": f"{REPO}/", "mean": MEAN, "std": STD, "interpolation": "bicubic",
        "resize_mode": "shortest", "quick_gelu": True}})
    models, blobs = [], []
    for commit, seed in ((FIRST, 1), (SECOND, 2)):
        torch.manual_seed(seed)
        oc = _perturb(open_clip.create_model(NAME), seed)
        models.append(oc)
        blobs.append(_safetensors_bytes(oc))
        populate_hub_cache(hub_cache, "model", REPO, {"open_clip_model.safetensors": blobs[-1]}, commit)
    return models, blobs


def test_open_clip_by_tag_through_its_own_cache_encodes_as_open_clip_does(open_clip_tag, hub_cache, tmp_path):
    import open_clip

    _, blobs = open_clip_tag
    out = convert_source("open_clip", "testtag", tmp_path / "model", model=NAME, download_dir=tmp_path / "ckpt")
    model = load_model(out).eval()
    # the reference: open_clip's own tag route, preprocess and tokenizer
    theirs, _, preprocess = open_clip.create_model_and_transforms(NAME, pretrained="testtag", cache_dir=str(hub_cache))
    theirs.eval()
    tokenizer = open_clip.get_tokenizer(NAME)
    images = _images([(45, 37), (32, 32), (20, 64)])
    their_pixels = torch.stack([preprocess(im) for im in images])
    assert _diff(their_pixels, _our_pixels(model, images)) <= ATOL  # the tag's mean/std, bicubic, shortest + crop
    assert torch.equal(tokenizer(CAPTIONS), model.tokenize(CAPTIONS))
    with torch.no_grad():
        assert _diff(theirs.encode_image(their_pixels, normalize=True), model.encode_image(their_pixels)) <= ATOL
        assert _diff(theirs.encode_text(tokenizer(CAPTIONS), normalize=True), model.encode_text(model.tokenize(CAPTIONS))) <= ATOL
    assert float(theirs.logit_scale.detach()) == pytest.approx(float(model.logit_scale.detach()))
    spec = json.loads((out / "model.json").read_text())["spec"]
    assert spec["tokenizer"] == "clip" and spec["config"]["preprocess_cfg"] == {
        "mean": list(MEAN), "std": list(STD), "interpolation": "bicubic"}
    # the file open_clip loaded is locked with main's commit and hashlib's sha256 of the bytes in the cache
    lock = json.loads((tmp_path / "ckpt" / f"open_clip--{NAME}--testtag" / "hnclip-checksums.json").read_text())
    entry = lock["files"][f"open_clip--{NAME}--testtag"]
    assert (entry["sha256"], entry["revision"]) == (hashlib.sha256(blobs[1]).hexdigest(), SECOND)
    record = json.loads((out / "conversion.json").read_text())
    assert record["weights_sha256"] == hashlib.sha256(blobs[1]).hexdigest()


def test_open_clip_tag_pinned_by_revision_and_sha256(open_clip_tag, tmp_path):
    models, blobs = open_clip_tag
    out = convert_source("open_clip", "testtag", tmp_path / "first", model=NAME, revision=FIRST,
                         sha256=hashlib.sha256(blobs[0]).hexdigest(), download_dir=tmp_path / "ckpt")
    pixels = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert _diff(models[0].encode_image(pixels, normalize=True), load_model(out).encode_image(pixels)) <= ATOL
    # main's file under the first commit's pin: refused naming both hashes
    with pytest.raises(ChecksumMismatchError) as info:
        convert_source("open_clip", "testtag", tmp_path / "main", model=NAME,
                       sha256=hashlib.sha256(blobs[0]).hexdigest(), download_dir=tmp_path / "other")
    assert hashlib.sha256(blobs[1]).hexdigest() in str(info.value) and hashlib.sha256(blobs[0]).hexdigest() in str(info.value)


def test_open_clip_hf_hub_and_local_dir_schemas(open_clip_tag, hub_cache, tmp_path):
    import open_clip

    models, blobs = open_clip_tag
    config = {"model_cfg": ARCH, "preprocess_cfg": {"mean": list(MEAN), "std": list(STD), "interpolation": "bilinear"}}
    populate_hub_cache(hub_cache, "model", "hnclip-test/oc-repo", {"open_clip_config.json": json.dumps(config).encode(),
                                                                  "open_clip_model.safetensors": blobs[0]}, FIRST)
    by_hub = load_model(convert_source("open_clip", None, tmp_path / "hub", model="hf-hub:hnclip-test/oc-repo",
                                       revision=FIRST, download_dir=tmp_path / "ckpt"))
    theirs, _, preprocess = open_clip.create_model_and_transforms("hf-hub:hnclip-test/oc-repo", cache_dir=str(hub_cache))
    images = _images([(45, 37), (20, 64)], seed=3)
    their_pixels = torch.stack([preprocess(im) for im in images])
    assert by_hub.interpolation == "bilinear"
    assert _diff(their_pixels, _our_pixels(by_hub, images)) <= ATOL
    with torch.no_grad():
        assert _diff(theirs.eval().encode_image(their_pixels, normalize=True), by_hub.encode_image(their_pixels)) <= ATOL

    folder = tmp_path / "oc-folder"
    folder.mkdir()
    (folder / "open_clip_config.json").write_text(json.dumps(config))
    (folder / "open_clip_model.safetensors").write_bytes(blobs[1])
    by_dir = load_model(convert_source("open_clip", None, tmp_path / "dir", model=f"local-dir:{folder}",
                                       sha256=hashlib.sha256(blobs[1]).hexdigest()))
    tokens = by_dir.tokenize(CAPTIONS)
    with torch.no_grad():
        assert _diff(models[1].encode_text(tokens, normalize=True), by_dir.encode_text(tokens)) <= ATOL
    with pytest.raises(ChecksumMismatchError, match="does not match the pinned"):
        convert_source("open_clip", None, tmp_path / "dir2", model=f"local-dir:{folder}", sha256="0" * 64)


def test_open_clip_refuses_what_it_cannot_represent(open_clip_tag, tmp_path, monkeypatch):
    import open_clip

    with pytest.raises(FileNotFoundError, match="neither one of open_clip's tags for it"):
        convert_source("open_clip", "nosuchtag", tmp_path / "m", model=NAME)
    with pytest.raises(ValueError, match="not an architecture open_clip knows"):
        convert_source("open_clip", "testtag", tmp_path / "m", model="ViT-Nope-1")
    # a tower option the dual encoder would silently ignore, named
    odd = json.loads(json.dumps(ARCH))
    odd["text_cfg"]["pool_type"] = "last"
    monkeypatch.setitem(open_clip.factory._MODEL_CONFIGS, "hnclip-test-odd", odd)
    torch.manual_seed(0)
    weights = tmp_path / "odd.safetensors"
    weights.write_bytes(_safetensors_bytes(open_clip.create_model("hnclip-test-odd")))
    with pytest.raises(ValueError, match=r"text_cfg\.pool_type"):
        convert_source("open_clip", str(weights), tmp_path / "odd", model="hnclip-test-odd")


def test_stretch_gives_longclips_table_and_a_context_mismatch_names_the_key(open_clip_tag, tmp_path):
    out = convert_source("open_clip", "testtag", tmp_path / "long", model=NAME, stretch=20, context_length=248,
                         download_dir=tmp_path / "ckpt")
    model = load_model(out)
    assert (model.context_length, model.frozen_positions, model.spec["tokenizer"]) == (248, 20, "clip")
    with pytest.raises(ValueError, match=r"backbone\.context_length is 248; set backbone\.stretch: true"):
        convert_source("open_clip", "testtag", tmp_path / "short", model=NAME, context_length=248,
                       download_dir=tmp_path / "ckpt")


# ------------------------------------------------------------------------------------------- transformers
def _hf_folder(tmp_path, *, act="gelu", resample=2, crop=32, eps=1e-5, seed=0):
    """A random, perturbed CLIPModel saved with save_pretrained beside its processor (bilinear, own mean/std)."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    from hnclip.export.transformers_format import clip_tokenizer

    config = CLIPConfig(
        text_config={"vocab_size": 49408, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 77, "hidden_act": act,
                     "layer_norm_eps": eps},
        vision_config={"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
                       "image_size": 32, "patch_size": 8, "hidden_act": act, "layer_norm_eps": eps},
        projection_dim=32)
    torch.manual_seed(seed)
    model = _perturb(CLIPModel(config), seed)
    folder = tmp_path / f"hf-{seed}-{act}-{resample}-{crop}"
    model.save_pretrained(folder)
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": crop, "width": crop},
                                resample=resample, image_mean=list(MEAN), image_std=list(STD))
    CLIPProcessor(image_processor=images, tokenizer=clip_tokenizer(77)).save_pretrained(folder)
    return folder, model


def test_transformers_folder_encodes_as_clipmodel_does(tmp_path):
    from transformers import CLIPProcessor

    folder, theirs = _hf_folder(tmp_path)
    model = load_model(convert_source("transformers", str(folder), tmp_path / "model"))
    assert (model.interpolation, model.image_mean, model.context_length) == ("bilinear", MEAN, 77)
    processor = CLIPProcessor.from_pretrained(folder, backend="pil")
    images = _images([(45, 37), (20, 64)], seed=4)
    inputs = processor(text=CAPTIONS, images=images, padding="max_length", max_length=77, truncation=True,
                       return_tensors="pt")
    ours_tokens = model.tokenize(CAPTIONS)
    for their_row, our_row in zip(inputs["input_ids"], ours_tokens, strict=True):
        n = int(our_row.argmax()) + 1
        assert their_row[:n].tolist() == our_row[:n].tolist()
    assert _diff(inputs["pixel_values"], _our_pixels(model, images)) <= ATOL  # bilinear, shorter side + crop
    with torch.no_grad():
        out = theirs(**inputs)
        assert _diff(out.image_embeds, model.encode_image(inputs["pixel_values"])) <= ATOL
        assert _diff(out.text_embeds, model.encode_text(ours_tokens)) <= ATOL


class _RunsCode:
    """Unpickling this would call ``Path.touch`` on the marker file: what a malicious checkpoint does."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _as_torch_pickles(folder, shards: int) -> dict:
    """``folder``'s model.safetensors replaced by ``shards`` pytorch_model*.bin files (an index when > 1), as
    older transformers wrote them; returns the state written."""
    from safetensors.torch import load_file

    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    keys = sorted(state)
    if shards == 1:
        torch.save(state, folder / "pytorch_model.bin")
        return state
    names = [f"pytorch_model-{i + 1:05d}-of-{shards:05d}.bin" for i in range(shards)]
    weight_map = {key: names[i % shards] for i, key in enumerate(keys)}
    for name in names:
        torch.save({k: state[k] for k in keys if weight_map[k] == name}, folder / name)
    total = sum(t.numel() * t.element_size() for t in state.values())
    (folder / "pytorch_model.bin.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    return state


@pytest.mark.parametrize("shards", [1, 3])
def test_a_folder_of_torch_pickles_loads_as_clipmodel_does(tmp_path, shards):
    folder, theirs = _hf_folder(tmp_path)
    _as_torch_pickles(folder, shards)
    model = load_model(convert_source("transformers", str(folder), tmp_path / "model"))
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    tokens = model.tokenize(CAPTIONS)
    with torch.no_grad():
        out = theirs(pixel_values=pixels, input_ids=tokens)
        assert _diff(out.image_embeds, model.encode_image(pixels)) <= ATOL
        assert _diff(out.text_embeds, model.encode_text(tokens)) <= ATOL


def test_a_torch_pickle_that_needs_code_in_a_transformers_folder_is_refused_in_one_line(tmp_path):
    folder, _ = _hf_folder(tmp_path)
    state = _as_torch_pickles(folder, 1)
    marker = tmp_path / "code-ran"
    torch.save({**state, "payload": _RunsCode(marker)}, folder / "pytorch_model.bin")
    with pytest.raises(ValueError) as error:
        convert_source("transformers", str(folder), tmp_path / "model")
    text = str(error.value)
    assert text.startswith(f"{folder / 'pytorch_model.bin'}: refused: not a weights-only") and "\n" not in text
    assert "weights_only=False" not in text and "documentation of torch.load" not in text
    assert not marker.exists() and not (tmp_path / "model").exists()


def test_a_bare_save_pretrained_and_a_hub_id_pinned(tmp_path, hub_cache):
    from transformers import CLIPModel

    folder, theirs = _hf_folder(tmp_path, act="quick_gelu", resample=3)
    bare = tmp_path / "bare"
    CLIPModel.from_pretrained(folder).save_pretrained(bare)  # no processor, no tokenizer
    model = load_model(convert_source("transformers", str(bare), tmp_path / "bare-model"))
    assert model.interpolation == "bicubic" and model.spec["config"]["quick_gelu"] is True
    pixels, tokens = torch.randn(2, 3, 32, 32), model.tokenize(CAPTIONS)
    with torch.no_grad():
        assert _diff(theirs.get_image_features(pixel_values=pixels).pooler_output,
                     model._encode_image(pixels, False)[0]) <= ATOL

    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    populate_hub_cache(hub_cache, "model", "someone/tiny-clip", files, FIRST)
    weights_sha = hashlib.sha256(files["model.safetensors"]).hexdigest()
    out = convert_source("transformers", "someone/tiny-clip", tmp_path / "hub-model", revision=FIRST,
                         sha256=weights_sha, download_dir=tmp_path / "ckpt")
    with torch.no_grad():
        assert _diff(load_model(out).encode_text(tokens), theirs(input_ids=tokens, pixel_values=pixels).text_embeds) <= ATOL
    lock = json.loads((tmp_path / "ckpt" / "someone--tiny-clip" / "hnclip-checksums.json").read_text())["files"]
    assert lock["someone--tiny-clip/model.safetensors"]["sha256"] == weights_sha
    assert lock["someone--tiny-clip/model.safetensors"]["revision"] == FIRST
    with pytest.raises(ChecksumMismatchError):
        convert_source("transformers", "someone/tiny-clip", tmp_path / "bad", sha256="1" * 64,
                       download_dir=tmp_path / "ckpt2")


@pytest.mark.parametrize("change, message", [
    ({"eps": 1e-6}, r"text_config\.layer_norm_eps=1e-06"),
    ({"act": "relu"}, r"hidden_act='relu'"),
    ({"crop": 28}, r"crop_size=.*centre-crop 32x32"),
    ({"resample": 0}, r"resample=0"),
])
def test_transformers_refusals_name_the_key(tmp_path, change, message):
    folder, _ = _hf_folder(tmp_path, **change)
    with pytest.raises(ValueError, match=message):
        convert_source("transformers", str(folder), tmp_path / "model")


def test_a_tokenizer_other_than_clips_is_refused(tmp_path):
    from transformers import AutoTokenizer

    folder, _ = _hf_folder(tmp_path)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    vocab["a</w>"], vocab["the</w>"] = vocab["the</w>"], vocab["a</w>"]  # same size, other ids
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert AutoTokenizer.from_pretrained(folder)("a")["input_ids"][1] != 320  # CLIP's id of "a</w>"
    with pytest.raises(ValueError, match="other ids than CLIP's BPE"):
        convert_source("transformers", str(folder), tmp_path / "model")


def test_a_missing_folder_or_id_names_the_key(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"models\.mine\.checkpoint 'no/such/place'"):
        convert_source("transformers", "no/such/place", tmp_path / "m", key="models.mine")
    with pytest.raises(ValueError, match=r"backbone\.model: required for source open_clip"):
        convert_source("open_clip", "x", tmp_path / "m")


def test_pixels_of_a_store_reach_the_model_as_its_own_preprocess_would(tmp_path):
    """A store built for a bilinear model resizes bilinearly, and a bicubic store is refused for it."""
    from hnclip.data.image_store import ImageStore, build_store
    from hnclip.evaluate import check_store_matches_model

    folder, _ = _hf_folder(tmp_path)
    model = load_model(convert_source("transformers", str(folder), tmp_path / "model"))
    image = _images([(45, 37)], seed=5)[0]
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    (tmp_path / "im.png").write_bytes(buffer.getvalue())
    import pandas as pd

    manifest = pd.DataFrame({"image_id": ["a"], "image_path": [str(tmp_path / "im.png")]})
    build_store(manifest, tmp_path / "bicubic", 32)
    build_store(manifest, tmp_path / "bilinear", 32, resample="bilinear")
    with pytest.raises(ValueError, match="resized bicubic, but the model's preprocessing resizes bilinear"):
        check_store_matches_model(ImageStore(tmp_path / "bicubic"), model, "bicubic")
    check_store_matches_model(ImageStore(tmp_path / "bilinear"), model, "bilinear")
