"""The README's Python API snippet runs as written on a fine-tuned model folder, and what it computes is what
open_clip's own eval transform and tokenizer give (an independent reference), with unit-length features and,
on a model fine-tuned until it separates its pairs, each image's own caption ranked first."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from test_train_support import make_dataset, run_training, small_config

ROOT = Path(__file__).resolve().parents[1]
OPENAI_MEAN, OPENAI_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


def _readme_snippet() -> str:
    """The python block of the README's "In Python" paragraph (the only python block after it)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text.split("**In Python.**", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", after, flags=re.S)
    assert blocks, "README's 'In Python' paragraph has no python block"
    return blocks[0]


def _with_inputs(snippet: str, folder: Path, paths: list[Path], captions: list[str]) -> str:
    """The snippet with its three input lines (folder, paths, captions) pointing at the test's files."""
    values = {"folder": str(folder), "paths": [str(p) for p in paths], "captions": captions}
    for name, value in values.items():
        snippet, count = re.subn(rf"^{name} = .*$", lambda _m, n=name, v=value: f"{n} = {v!r}", snippet,
                                 flags=re.M)
        assert count == 1, f"README snippet should set {name} on one line"
    return snippet


def test_readme_api_snippet_matches_open_clip_reference_and_ranks_pairs(tmp_path):
    from open_clip import image_transform
    from open_clip import tokenize as oc_tokenize

    from hnclip.data.image_store import build_store

    n = 8
    torch.manual_seed(0)
    paths = make_dataset(tmp_path / "data", n=n)
    captions = pd.read_csv(paths["train_manifest"])["caption"].tolist()
    assert len(set(captions)) == n
    # odd-sized images with structure (a colour and a bar per image), so the resize is exercised
    rng = np.random.default_rng(3)
    files = []
    for i in range(n):
        width, height = 37 + 4 * i, 53 - 2 * i
        pixels = np.zeros((height, width, 3), dtype=np.uint8) + rng.integers(0, 256, size=3, dtype=np.uint8)
        pixels[:, (i * width) // n:((i + 1) * width) // n] = 255 - pixels[0, 0]
        pixels = np.clip(pixels.astype(int) + rng.integers(-20, 21, size=pixels.shape), 0, 255).astype(np.uint8)
        files.append(tmp_path / f"image{i}.png")
        Image.fromarray(pixels).save(files[-1])
    manifest = pd.DataFrame({"image_id": [f"img{i:03d}" for i in range(n)], "image_path": [str(f) for f in files],
                             "caption": captions})
    manifest.to_csv(paths["train_manifest"], index=False)
    build_store(manifest, paths["store_dir"], image_size=32)
    run_training(paths, tmp_path, small_config(epochs=60, lr=3e-3, micro_batch=8, accum_steps=1))
    folder = tmp_path / "out" / "model"

    scope: dict = {}
    exec(compile(_with_inputs(_readme_snippet(), folder, files, captions), "README.md", "exec"), scope)
    image_features, text_features, similarity = scope["image_features"], scope["text_features"], scope["similarity"]

    assert image_features.shape == text_features.shape == (n, 32)
    torch.testing.assert_close(image_features.norm(dim=1), torch.ones(n), atol=1e-5, rtol=0)
    torch.testing.assert_close(text_features.norm(dim=1), torch.ones(n), atol=1e-5, rtol=0)
    # open_clip's own eval transform and tokenizer on the same files and captions
    model = scope["model"]
    transform = image_transform(32, is_train=False, mean=OPENAI_MEAN, std=OPENAI_STD, interpolation="bicubic")
    with torch.no_grad():
        ref_images = model.encode_image(torch.stack([transform(Image.open(f)) for f in files]))
        ref_texts = model.encode_text(oc_tokenize(captions, context_length=77))
    torch.testing.assert_close(similarity, ref_images @ ref_texts.T, atol=1e-5, rtol=0)
    # the fine-tuned model ranks each image's own caption first
    assert similarity.argmax(dim=1).tolist() == list(range(n))


# ------------------------------------------------------------------------------------------ preprocess, exports
def _odd_images(tmp_path: Path) -> list[Path]:
    """Images the resize and crop treat differently: wide, tall, already at the size, grayscale, RGBA, odd margins."""
    rng = np.random.default_rng(7)
    shapes = [(37, 53, "RGB"), (91, 40, "RGB"), (32, 32, "RGB"), (33, 32, "L"), (64, 47, "RGBA"), (32, 70, "RGB")]
    files = []
    for i, (width, height, mode) in enumerate(shapes):
        channels = {"RGB": 3, "L": 1, "RGBA": 4}[mode]
        pixels = rng.integers(0, 256, size=(height, width, channels), dtype=np.uint8)
        files.append(tmp_path / f"odd{i}.png")
        Image.fromarray(pixels[..., 0] if channels == 1 else pixels, mode).save(files[-1])
    return files


def _small_model(interpolation: str = "bicubic"):
    from hnclip.models import DualEncoder

    config = {"embed_dim": 32, "quick_gelu": True,
              "vision_cfg": {"image_size": 32, "patch_size": 16, "width": 64, "layers": 1, "head_width": 64},
              "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 1},
              "preprocess_cfg": {"interpolation": interpolation, "mean": [0.5, 0.4, 0.3], "std": [0.2, 0.25, 0.3]}}
    torch.manual_seed(0)
    return DualEncoder(config, 77, 0).eval()


def test_preprocess_is_an_inspectable_compose_giving_the_stores_tensors(tmp_path):
    from torchvision.transforms import CenterCrop, Compose, Normalize, Resize

    from hnclip.api import preprocess_for
    from hnclip.data.image_store import resize_center_crop, to_model_input

    files = _odd_images(tmp_path)
    for interpolation in ("bicubic", "bilinear"):
        model = _small_model(interpolation)
        preprocess = preprocess_for(model)
        assert isinstance(preprocess, Compose)
        text = repr(preprocess)
        for step in ("ConvertRGB", "Resize(size=32", f"interpolation={interpolation}", "CenterCrop(size=(32, 32))",
                     "ToTensor", "Normalize(mean=[0.5, 0.4, 0.3], std=[0.2, 0.25, 0.3])"):
            assert step in text, f"{step!r} not in {text}"
        assert [type(t) for t in preprocess.transforms][1:3] == [Resize, CenterCrop]
        assert isinstance(preprocess.transforms[-1], Normalize)
        for path in files:  # the reference: what the image stores and the evaluation compute
            with Image.open(path) as image:
                pixels = np.asarray(resize_center_crop(image.convert("RGB"), 32, interpolation))
                expected = to_model_input(pixels[None], model.image_mean, model.image_std)[0]
                got = preprocess(image)
            assert got.dtype == torch.float32 and got.shape == (3, 32, 32)
            assert torch.equal(got, expected), f"{path.name} ({interpolation}): max diff {(got - expected).abs().max()}"


def test_load_reads_open_clip_and_transformers_exports_and_names_other_folders(tmp_path):
    from hnclip.api import load
    from hnclip.export import export_model
    from hnclip.models import save_model

    model = _small_model("bilinear")
    model_dir = save_model(model, tmp_path / "run" / "model")
    images = torch.randn(2, 3, 32, 32)
    captions = ["a red cube left of a blue sphere", "two green cylinders"]
    with torch.no_grad():
        ref_images, ref_texts = model.encode_image(images), model.encode_text(model.tokenize(captions))
    for fmt in ("open_clip", "transformers"):
        folder = export_model(model_dir, fmt, tmp_path / "exports" / fmt)
        loaded, preprocess, tokenize = load(folder)
        assert not loaded.training
        with torch.no_grad():
            torch.testing.assert_close(loaded.encode_image(images), ref_images, atol=1e-5, rtol=0)
            torch.testing.assert_close(loaded.encode_text(tokenize(captions)), ref_texts, atol=1e-5, rtol=0)
        assert "interpolation=bilinear" in repr(preprocess) and "mean=[0.5, 0.4, 0.3]" in repr(preprocess)
    other = tmp_path / "other"
    other.mkdir()
    (other / "weights.bin").write_bytes(b"x")
    with pytest.raises(FileNotFoundError) as info:
        load(other)
    message = str(info.value)
    assert "\n" not in message and str(other) in message and "weights.bin" in message
    assert "model.json" in message and "open_clip_config.json" in message and "config.json" in message
